"""The augment stage: silver pairs from each pool sentence's nearest neighbours, weak-labelled by cosine or a
trained cross-encoder."""

from __future__ import annotations

from typing import Any

import polars as pl

from amrsim.augment import CallableScorer, CosineScorer, Scorer, augment_pairs
from amrsim.config import AugmentConfig
from amrsim.encoders import model_id
from amrsim.encoders.cache import read_embeddings
from amrsim.errors import ConfigError
from amrsim.methods.loaders import embed_sentences, load_encoder
from amrsim.warehouse import OK, Warehouse, config_hash, content_key
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.schemas import SCHEMAS


def cross_encoder_scorer(wh: Warehouse, name: str, keys: list[str], sentences: pl.DataFrame) -> Scorer:
    """A trained cross-encoder (pear:...) as the kNN weak labeller of the sentences `keys` index; its name carries
    the resolved run, so a newer `pear:latest` gives new row keys and relabels."""
    try:
        model = load_encoder(name, device="auto", models_root=wh.models_root)
    except ValueError as exc:
        raise ConfigError(f"augment.scorer: {exc}") from None
    if not callable(getattr(model, "score", None)):
        raise ConfigError(f"augment.scorer '{name}' is not a cross-encoder (it embeds sentences); use 'cosine' "
                          "or a trained PEAR model such as pear:latest")
    text_of = dict(zip(sentences["key"].to_list(), sentences["text"].to_list(), strict=True))
    texts = [text_of[k] for k in keys]

    def score(pairs: list[tuple[int, int]]) -> Any:
        return model.score([texts[i] for i, _ in pairs], [texts[j] for _, j in pairs])

    return CallableScorer(f"cross-encoder:{model.model_id}", score)


def augment_stage(wh: Warehouse, pipeline: str, dataset: str, aug: AugmentConfig, run_id: str) -> StageRun:
    """Silver pairs for a pairs dataset: each pool sentence's k nearest neighbours by the bi-encoder, weak-labelled,
    gold pairs left out. Rows depend on the whole pool, so their keys include its digest; an unchanged pool
    rewrites nothing (embeddings come from the cache)."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=f"augment:{aug.encoder}", dataset=dataset,
                   config_hash=config_hash(aug))
    with record_stage(wh, run):
        run.input_versions = {"pairs": wh.version(dataset, "pairs"), "sentences": wh.version(dataset, "sentences")}
        pairs = wh.read(dataset, "pairs").filter(pl.col("status") == OK)
        labelled = set(zip(pairs["sentence1_key"].to_list(), pairs["sentence2_key"].to_list(), strict=True))
        pool = pairs.filter((pl.col("lang1") == aug.lang) & (pl.col("lang2") == aug.lang))
        if aug.splits is not None:
            pool = pool.filter(pl.col("split").is_in(aug.splits))
        keys = sorted(set(pool["sentence1_key"].to_list()) | set(pool["sentence2_key"].to_list()))
        run.rows_in = len(keys)
        if len(keys) < 2:
            frame = pl.from_arrow(SCHEMAS["augmented_pairs"].empty_table())
        else:
            sentences = wh.read(dataset, "sentences", columns=["key", "text"]).filter(pl.col("key").is_in(keys))
            embed_sentences(wh, dataset, aug.encoder, sentences)
            vectors = read_embeddings(wh, dataset, aug.encoder, keys)
            scorer = (CosineScorer(aug.encoder) if aug.scorer == "cosine"
                      else cross_encoder_scorer(wh, aug.scorer, keys, sentences))
            frame = augment_pairs(keys, vectors, aug.k, labelled, aug.index, scorer)
            pool_digest = content_key("pool", model_id(aug.encoder, wh.models_root), keys)
            frame = frame.with_columns(pl.col("key").map_elements(lambda k: content_key(pool_digest, k),
                                                                  return_dtype=pl.String))
        added, removed = wh.sync(dataset, "augmented_pairs", frame)
        run.rows_computed = added
        run.rows_failed = frame.filter(pl.col("status") != OK).height
        run.rows_out = frame.height
        run.wrote("augmented_pairs", added or removed)
    return run
