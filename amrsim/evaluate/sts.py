"""STS evaluation: Spearman and Pearson x 100 of cosine similarity against gold scores."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import polars as pl

from amrsim.encoders import model_id
from amrsim.encoders.cache import read_embeddings
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.store import OK, Warehouse

EVAL = "eval"
RESULTS = "results"


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return np.einsum("ij,ij->i", a, b)


def correlations(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """spearman and pearson, both x 100."""
    from scipy.stats import pearsonr, spearmanr  # scipy.stats costs ~0.9 s to import: only when scoring

    return {"spearman": float(spearmanr(pred, gold)[0] * 100), "pearson": float(pearsonr(pred, gold)[0] * 100)}


def select_pairs(pairs: pl.DataFrame, split: str | None, lang_pair: str) -> pl.DataFrame:
    """Ok pairs of one split in one language pair; 'en-de' takes sentence1 in en and sentence2 in de from rows
    sharing an item id (row-aligned translations), as cross-lingual STS is built from multilingual STSb."""
    l1, l2 = lang_pair.split("-")
    ok = pairs.filter(pl.col("status") == OK)
    if split and split != "all":
        ok = ok.filter(pl.col("split") == split)
    same = ok.filter((pl.col("lang1") == l1) & (pl.col("lang2") == l2))
    if same.height or l1 == l2:
        return same.select("item_id", "sentence1_key", "sentence2_key", "score")
    left = ok.filter((pl.col("lang1") == l1) & (pl.col("lang2") == l1)).select(
        "item_id", "sentence1_key", "score")
    right = ok.filter((pl.col("lang1") == l2) & (pl.col("lang2") == l2)).select("item_id", "sentence2_key")
    return left.join(right, on="item_id", how="inner").select("item_id", "sentence1_key", "sentence2_key",
                                                                "score")


@dataclass
class StsResult:
    model: str
    dataset: str
    split: str
    lang_pair: str
    n: int
    spearman: float
    pearson: float


def result_key(encoder: str, dataset: str, split: str, lang_pair: str, pair_keys: list[str]) -> str:
    return content_key("sts", model_id(encoder), dataset, split, lang_pair, sorted(pair_keys))


def evaluate_sts(wh: Warehouse, dataset: str, encoder: str, split: str, lang_pair: str) -> StsResult | None:
    """Score one (dataset, split, language pair) with cached embeddings; None when it has no pairs."""
    pairs = select_pairs(wh.read(dataset, "pairs"), split, lang_pair)
    if pairs.height < 2:
        return None
    keys1, keys2 = pairs["sentence1_key"].to_list(), pairs["sentence2_key"].to_list()
    both = read_embeddings(wh, dataset, encoder, keys1 + keys2)
    sims = cosine(both[: len(keys1)], both[len(keys1):])
    corr = correlations(sims, pairs["score"].to_numpy())
    return StsResult(encoder, dataset, split, lang_pair, pairs.height, corr["spearman"], corr["pearson"])


def result_rows(res: StsResult, key: str, run_id: str, cfg_hash: str) -> pl.DataFrame:
    now = datetime.now(UTC)
    return pl.DataFrame([
        {"key": f"{key}:{metric}", "run_id": run_id, "created_at": now, "model": res.model, "dataset": res.dataset,
         "split": res.split, "lang_pair": res.lang_pair, "metric": metric, "value": value, "n": res.n,
         "config_hash": cfg_hash}
        for metric, value in (("spearman", res.spearman), ("pearson", res.pearson))
    ])
