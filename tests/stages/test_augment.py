"""The augment stage over the warehouse: pool by language and split, gold pairs excluded, incremental rerun."""

from __future__ import annotations

import polars as pl
import pytest

import amrsim.encoders.cache as cache
from amrsim.augment import augment_pairs
from amrsim.config import AugmentConfig, DatasetConfig
from amrsim.encoders.cache import read_embeddings
from amrsim.stages import augment_stage
from amrsim.stages.ingest import ingest_tables
from tests.helpers import CountingEncoder


def test_augment_stage_writes_silver_pairs_without_gold_and_reruns_as_a_no_op(wh, write_tsv, monkeypatch):
    monkeypatch.setattr(cache, "load_encoder_with", lambda *a, **k: CountingEncoder())
    rows = [["a", "train", "5", "the cat sat", "the cat sat down"], ["b", "train", "1", "dogs bark", "the sun"],
            ["c", "train", "3", "a cat sits", "cats sat"], ["d", "test", "2", "held out text", "more held out"]]
    path = write_tsv("p.tsv", ["id", "split", "score", "sentence1", "sentence2"], rows)
    ingest_tables(wh, "d", DatasetConfig(path=str(path), kind="pairs", columns={"id": "id", "split": "split"}),
                  path, "r0")
    aug = AugmentConfig(datasets=["d"], k=2)
    run = augment_stage(wh, "p", "d", aug, "r1")
    silver = wh.read("d", "augmented_pairs")
    assert run.rows_in == 6 and run.rows_computed == silver.height > 0  # 6 train sentences; test ones stay out
    sentences = dict(wh.read("d", "sentences").select("key", "text").iter_rows())
    texts = {(sentences[a], sentences[b]) for a, b in silver.select("sentence1_key", "sentence2_key").iter_rows()}
    assert not any("held out" in a or "held out" in b for a, b in texts)
    gold = {tuple(sorted((r[3], r[4]))) for r in rows}
    assert not {tuple(sorted(t)) for t in texts} & gold
    # the same rows as the library function on the same vectors, with weak label = cosine
    keys = sorted({k for k in silver["sentence1_key"]} | {k for k in silver["sentence2_key"]})
    pairs = wh.read("d", "pairs")
    pool = sorted(set(pairs.filter(pl.col("split") == "train")["sentence1_key"])
                  | set(pairs.filter(pl.col("split") == "train")["sentence2_key"]))
    assert set(keys) <= set(pool)
    direct = augment_pairs(pool, read_embeddings(wh, "d", "minilm", pool), 2,
                           set(pairs.select("sentence1_key", "sentence2_key").iter_rows()))
    assert sorted(direct["cosine"].to_list()) == pytest.approx(sorted(silver["cosine"].to_list()))
    assert silver["weak_label"].to_list() == silver["cosine"].to_list()
    again = augment_stage(wh, "p", "d", aug, "r2")
    assert again.rows_computed == 0 and wh.read("d", "augmented_pairs").height == silver.height


def test_augment_config_rejects_a_dataset_that_is_not_pairs():
    from amrsim.config import PipelineConfig

    with pytest.raises(ValueError, match="augment.datasets: 'n' is kind 'triples', needs 'pairs'"):
        PipelineConfig(datasets={"n": DatasetConfig(path="x.tsv", kind="triples")}, augment={"datasets": ["n"]})
