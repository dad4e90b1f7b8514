"""STS evaluation: Spearman and Pearson x 100 of cosine similarity (or a cross-encoder's pair scores) against
gold scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from amrsim.encoders import find_trained, model_id
from amrsim.encoders.cache import read_embeddings
from amrsim.evaluate.results import EVAL, RESULTS, Score
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.store import OK, Warehouse

# scipy is imported inside the functions: importing this module must stay cheap

if TYPE_CHECKING:
    pass

__all__ = ["EVAL", "RESULTS", "StsEvaluator", "correlations", "cosine", "evaluate_sts",
           "is_constant", "is_cross_encoder", "result_key", "select_pairs"]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return np.einsum("ij,ij->i", a, b)


@dataclass
class StsEvaluator:
    """Spearman x 100 of the cosine of `encode(texts1)` and `encode(texts2)` against `gold` (None when undefined):
    the STS evaluator, for dev selection during training and for evaluation after it."""

    texts1: Sequence[str]
    texts2: Sequence[str]
    gold: np.ndarray
    encode: Callable[[list[str]], np.ndarray]
    greater_is_better: bool = True

    def __call__(self) -> float | None:
        return correlations(cosine(self.encode(list(self.texts1)), self.encode(list(self.texts2))),
                            self.gold)["spearman"]


# float32 keeps 24 bits (eps 1.2e-7); a cosine sums hundreds of float32 products, so identical inputs differ by a
# few ulps. Values whose spread is at most 1e-6 of their magnitude carry only that noise, and ranking noise would give
# a correlation that is a number (Spearman 9.06 for sentence2 == sentence1) instead of undefined.
CONSTANT_RTOL = 1e-6


def is_constant(values: np.ndarray) -> bool:
    """True when `values` do not vary beyond float32 rounding: np.ptp <= CONSTANT_RTOL * max |value|."""
    values = np.asarray(values, dtype=np.float64)
    return bool(np.ptp(values) <= CONSTANT_RTOL * np.abs(values).max()) if values.size else True


def correlations(pred: np.ndarray, gold: np.ndarray) -> dict[str, float | None]:
    """spearman and pearson, both x 100; None (undefined) when either side is constant (up to float32 rounding, see
    `is_constant`) or has a NaN."""
    pred, gold = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if (len(pred) < 2 or not (np.isfinite(pred).all() and np.isfinite(gold).all())
            or is_constant(pred) or is_constant(gold)):
        return {"spearman": None, "pearson": None}
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


def result_key(encoder: str, dataset: str, split: str, lang_pair: str, pair_keys: list[str],
               models_root: Path | None = None) -> str:
    return content_key("sts", model_id(encoder, models_root), dataset, split, lang_pair, sorted(pair_keys))


def pair_similarities(wh: Warehouse, dataset: str, encoder: str, pairs: pl.DataFrame) -> \
        tuple[np.ndarray, np.ndarray]:
    """(cosine, gold) per row of `pairs` (as `select_pairs` returns them), from the cached embeddings."""
    if pairs.height == 0:
        return np.zeros(0), np.zeros(0)
    keys1, keys2 = pairs["sentence1_key"].to_list(), pairs["sentence2_key"].to_list()
    both = read_embeddings(wh, dataset, encoder, keys1 + keys2)
    return cosine(both[: len(keys1)], both[len(keys1):]), pairs["score"].to_numpy()


def evaluate_sts(wh: Warehouse, dataset: str, encoder: str, split: str, lang_pair: str,
                 pairs: pl.DataFrame) -> list[Score]:
    """Spearman and Pearson of one (dataset, split, language pair) whose pairs were selected by the caller;
    [] without 2 pairs."""
    if pairs.height < 2:
        return []
    sims, gold = pair_similarities(wh, dataset, encoder, pairs)
    return [Score("sts", encoder, dataset, split or "all", lang_pair, metric, value, pairs.height)
            for metric, value in correlations(sims, gold).items()]


def is_cross_encoder(encoder: str, models_root: Path | None = None) -> bool:
    """A trained model that scores pairs directly (model.json `kind: cross-encoder`, e.g. `pear:latest`)."""
    if encoder.startswith("hf:") or ":" not in encoder:
        return False

    try:
        return find_trained(encoder, models_root).meta.get("kind") == "cross-encoder"
    except ValueError:
        return False
