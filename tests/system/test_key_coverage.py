"""Every cached or stored row is keyed by everything it depends on: each test changes one input of a table at a time
and checks the stored value follows it (it equals what a fresh warehouse computes), and that a rerun with nothing
changed computes nothing. The inputs per table are listed in warehouse/README.md ("What each key covers")."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import amrsim.encoders.cache as cache
from amrsim.config import DatasetConfig, StsEvalConfig
from amrsim.stages import sts_stage
from amrsim.stages.ingest import ingest_tables
from amrsim.warehouse import Warehouse
from tests.helpers import CountingEncoder

SCORES = ["5.0", "4.0", "3.0", "1.0", "0.5", "0.0"]
EN = [("the cat sat here", "the cat sat there"), ("a dog ran", "a dog runs fast"), ("birds sing", "the bird sang"),
      ("red car", "blue sky"), ("xyz abc", "mnop qrs"), ("hello world", "zzz")]
DE = [("die katze sass hier", "die katze sass da"), ("ein hund lief", "ein hund rennt schnell"),
      ("voegel singen", "der vogel sang"), ("rotes auto", "blauer himmel"), ("xyz abc", "mnop qrs"),
      ("hallo welt", "qqq")]


def _tsv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path


def _sts(wh: Warehouse, dataset: str, encoder: str, lang_pairs: list[str]) -> tuple[int, dict[str, float]]:
    """(results computed, spearman by language pair) of one STS evaluation of `dataset`'s test split."""
    sts = StsEvalConfig(encoders=[encoder], datasets=[dataset], splits=["test"], lang_pairs=lang_pairs)
    run, rows = sts_stage(wh, "p", sts, "r")
    spearman = rows.filter(pl.col("metric") == "spearman")
    return run.rows_computed, dict(zip(spearman["lang_pair"], spearman["value"], strict=True))


@pytest.fixture
def fake_encoder(monkeypatch):
    enc = CountingEncoder()
    monkeypatch.setattr(cache, "load_encoder", lambda *a, **k: enc)
    return enc


def _pairs_config(path: Path, translations: dict | None = None) -> DatasetConfig:
    return DatasetConfig(path=str(path), kind="pairs", split="test", translations=translations or {},
                         columns={"sentence1": "sentence1", "sentence2": "sentence2", "score": "score"})


# ------------------------------------------------------------------------------------------------- eval/results


def test_sts_result_follows_the_gold_scores(wh, tmp_path, fake_encoder):
    """Same sentences, score column reversed: the stored Spearman is the new one, not the old one."""
    rows = [[a, b, s] for (a, b), s in zip(EN, SCORES, strict=True)]
    path = _tsv(tmp_path / "x_test.tsv", ["sentence1", "sentence2", "score"], rows)
    ingest_tables(wh, "x", _pairs_config(path), path, "r0")
    computed, before = _sts(wh, "x", "minilm", ["en-en"])
    assert computed == 1
    _tsv(path, ["sentence1", "sentence2", "score"], [[a, b, s] for (a, b), s in zip(EN, SCORES[::-1], strict=True)])
    ingest_tables(wh, "x", _pairs_config(path), path, "r1")
    encoded = len(fake_encoder.seen)
    computed, after = _sts(wh, "x", "minilm", ["en-en"])
    assert len(fake_encoder.seen) == encoded  # the sentences are unchanged: their vectors are reused
    ingest_tables(wh, "fresh", _pairs_config(path), path, "r2")
    _, fresh = _sts(wh, "fresh", "minilm", ["en-en"])
    assert computed == 1 and after["en-en"] == pytest.approx(fresh["en-en"])
    assert after["en-en"] == pytest.approx(-before["en-en"])  # reversed ranks
    assert _sts(wh, "x", "minilm", ["en-en"])[0] == 0  # nothing changed: nothing computed


def test_sts_result_follows_a_reordered_translation_file(wh, tmp_path, fake_encoder):
    """`translations: {de: {path: ...}}` with the German rows reordered: de-de (same German sentence pairs, other
    gold scores) follows, as en-de does."""
    path = _tsv(tmp_path / "x_test.tsv", ["sentence1", "sentence2", "score"],
                [[a, b, s] for (a, b), s in zip(EN, SCORES, strict=True)])
    de = _tsv(tmp_path / "de_test.tsv", ["sentence1", "sentence2", "score"],
              [[a, b, s] for (a, b), s in zip(DE, SCORES, strict=True)])
    config = _pairs_config(path, {"de": {"path": str(de)}})
    ingest_tables(wh, "m", config, path, "r0")
    assert _sts(wh, "m", "minilm", ["de-de", "en-de"])[0] == 2
    order = [3, 0, 5, 1, 4, 2]
    _tsv(de, ["sentence1", "sentence2", "score"], [[*DE[i], SCORES[i]] for i in order])
    ingest_tables(wh, "m", config, path, "r1")
    computed, after = _sts(wh, "m", "minilm", ["de-de", "en-de"])
    ingest_tables(wh, "fresh", config, path, "r2")
    _, fresh = _sts(wh, "fresh", "minilm", ["de-de", "en-de"])
    assert computed == 2
    assert after == pytest.approx(fresh)
    assert _sts(wh, "m", "minilm", ["de-de", "en-de"])[0] == 0
