"""The STS evaluation stage: the pairs of each (dataset, split, language pair), scored by cosine of the cached
embeddings (or by a cross-encoder directly), results reused while the pairs, their gold scores and the model are
unchanged."""

from __future__ import annotations

from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from amrsim.config import StsEvalConfig
from amrsim.console import progress_bar
from amrsim.encoders import model_id, run_name
from amrsim.encoders.cache import TABLE as EMBEDDINGS
from amrsim.encoders.cache import read_embeddings
from amrsim.evaluate.sts import cosine, sts_scores
from amrsim.methods.loaders import load_encoder, vector_inputs
from amrsim.stages.evaluate.common import embed_with_progress, store_results, trained_meta
from amrsim.stages.evaluate.results import EVAL, RESULTS, row_key, score_rows
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import config_hash, content_key
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.store import OK


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


def pair_similarities(wh: Warehouse, dataset: str, encoder: str, pairs: pl.DataFrame) -> \
        tuple[np.ndarray, np.ndarray]:
    """(cosine, gold) per row of `pairs` (as `select_pairs` returns them), from the cached embeddings."""
    if pairs.height == 0:
        return np.zeros(0), np.zeros(0)
    keys1, keys2 = pairs["sentence1_key"].to_list(), pairs["sentence2_key"].to_list()
    both = read_embeddings(wh, dataset, encoder, keys1 + keys2)
    return cosine(both[: len(keys1)], both[len(keys1):]), pairs["score"].to_numpy()


def is_cross_encoder(encoder: str, models_root: Path | None = None) -> bool:
    """A trained model that scores pairs directly (model.json `kind: cross-encoder`, e.g. `pear:latest`)."""
    return (trained_meta(encoder, models_root) or {}).get("kind") == "cross-encoder"


def result_key(encoder: str, dataset: str, split: str, lang_pair: str, pairs: pl.DataFrame,
               models_root: Path | None = None, read: dict[str, str] | None = None) -> str:
    """What an STS result depends on: the model (a trained run's weights among it), the pairs evaluated as
    (sentence 1, sentence 2, gold score), so new gold scores for the same sentences (a reordered score column or
    translation file) are a new result, and what the model's vectors read besides the texts (`read`, by sentence
    key: an MSE-AMR run's graphs)."""
    rows = sorted(zip(pairs["sentence1_key"].to_list(), pairs["sentence2_key"].to_list(),
                      pairs["score"].cast(pl.Float64).to_list(), strict=True))
    return content_key("sts", model_id(encoder, models_root), dataset, split, lang_pair, rows,
                       *([sorted(read.items())] if read else []))


def _predictions(wh: Warehouse, dataset: str, encoder: str, chosen: pl.DataFrame, sentences: pl.DataFrame,
                 batch_size: int, device: str, translate: dict[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
    """(prediction, gold) per chosen pair: a cross-encoder's score of the texts, else the embeddings' cosine."""
    if not is_cross_encoder(encoder, wh.models_root):
        embed_with_progress(wh, dataset, encoder, sentences, batch_size=batch_size, device=device, translate=translate)
        return pair_similarities(wh, dataset, encoder, chosen)
    model = load_encoder(encoder, batch_size=batch_size, device=device, models_root=wh.models_root)
    text = dict(zip(sentences["key"].to_list(), sentences["text"].to_list(), strict=True))
    with progress_bar(chosen.height, f"score {dataset} with {encoder}", unit="pairs") as advance:
        pred = model.score([text[k] for k in chosen["sentence1_key"]],  # type: ignore[attr-defined]
                           [text[k] for k in chosen["sentence2_key"]], on_progress=advance)
    return pred, chosen["score"].to_numpy()


def sts_stage(wh: Warehouse, pipeline: str, sts: StsEvalConfig, run_id: str,
              datasets: list[str] | None = None, encoders: list[str] | None = None,
              batch_size: int = 64, device: str = "auto",
              translate: dict[str, Any] | None = None) -> tuple[StageRun, pl.DataFrame]:
    """STS for every (dataset, encoder, split, language pair); results already in the warehouse are reused. A
    cross-encoder (pear:...) scores the pairs directly instead of comparing embeddings. `translate` (language ->
    TranslatorSpec): an encoder that parses (mse_amr) translates sentences of those languages into English first."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="evaluate:sts", dataset=EVAL,
                   config_hash=config_hash(sts))
    frames = []
    with record_stage(wh, run):
        existing = wh.read(EVAL, RESULTS)
        for dataset in datasets or sts.datasets:
            pairs = wh.read(dataset, "pairs")
            texts = wh.read(dataset, "sentences", columns=["key", "text"])
            run.input_versions[f"{dataset}.pairs"] = wh.version(dataset, "pairs")
            run.input_versions[f"{dataset}.embeddings"] = wh.version(dataset, EMBEDDINGS)
            for encoder, split, lang_pair in product(encoders or sts.encoders, sts.splits, sts.lang_pairs):
                chosen = select_pairs(pairs, split, lang_pair)
                if chosen.height < 2:
                    continue
                run.rows_in += 1
                needed = pl.concat([chosen.select(key="sentence1_key"), chosen.select(key="sentence2_key")])
                sentences = texts.join(needed.unique(), on="key", how="semi")
                read = vector_inputs(wh, dataset, encoder, sentences, translate)
                key = result_key(encoder, dataset, split, lang_pair, chosen, wh.models_root,
                                 None if read is None else dict(zip(sentences["key"], read, strict=True)))
                wanted = [row_key("sts", run_name(encoder, wh.models_root), dataset, split, lang_pair, m, [key])
                          for m in ("spearman", "pearson")]
                done = existing.filter(pl.col("key").is_in(wanted))
                if done.height == len(wanted):
                    frames.append(done)
                    continue
                pred, gold = _predictions(wh, dataset, encoder, chosen, sentences, batch_size, device, translate)
                rows = score_rows(sts_scores(encoder, dataset, split, lang_pair, pred, gold), run_id,
                                  run.config_hash, [key], wh.models_root)
                frames.append(rows)
                store_results(wh, rows)
                run.rows_computed += 1
        if run.rows_computed:
            run.outputs.append(RESULTS)
        run.rows_out = len(frames)
    # diagonal: rows read back from an older table (a column added later sits last, or is missing) meet new ones
    table = pl.concat(frames, how="diagonal_relaxed") if frames else existing.clear()
    return run, table


def results_table(rows: pl.DataFrame) -> pl.DataFrame:
    """Wide view for printing: one row per (dataset, split, lang pair, model), spearman and pearson columns."""
    if not rows.height:
        return rows
    return (rows.pivot(on="metric", index=["dataset", "split", "lang_pair", "model", "n"], values="value",
                       aggregate_function="first")
            .sort(["dataset", "split", "lang_pair", "model"]))
