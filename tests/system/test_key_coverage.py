"""Every cached or stored row is keyed by everything it depends on: each test changes one input of a table at a time
and checks the stored value follows it (it equals what a fresh warehouse computes), and that a rerun with nothing
changed computes nothing. The inputs per table are listed in warehouse/README.md ("What each key covers")."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import amrsim.encoders.cache as cache
from amrsim.config import DatasetConfig, StsEvalConfig
from amrsim.encoders import model_id
from amrsim.encoders.cache import read_embeddings
from amrsim.encoders.fingerprint import DIGESTS
from amrsim.stages import sts_stage
from amrsim.stages.ingest import ingest_tables
from amrsim.warehouse import Warehouse
from tests.helpers import CountingEncoder, sentence_transformer_run, tiny_sentence_transformer

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


# ------------------------------------------------------------------------- trained runs: embeddings and results


def _retrain(models_root: Path, tmp_path: Path, run_id: str, seed: int) -> None:
    """`s3bert:<run_id>` (a tiny sentence-transformers run), deleted first when it exists: another training run
    under the same id."""
    shutil.rmtree(models_root / "s3bert" / run_id, ignore_errors=True)
    encoder = tiny_sentence_transformer(tmp_path / f"st-{run_id}-{seed}", seed=seed)
    sentence_transformer_run(models_root, "s3bert", run_id, datetime(2026, 1, 1, tzinfo=UTC), encoder)


TINY = [("the cat runs", "the cat sleeps"), ("the dog eats", "the red dog eats"), ("the bird sings", "der hund"),
        ("blue fish", "green fish sleeps"), ("die katze", "the black cat"), ("the dog runs", "the dog runs")]


@pytest.fixture
def tiny_pairs(wh, tmp_path):
    path = _tsv(tmp_path / "t_test.tsv", ["sentence1", "sentence2", "score"],
                [[a, b, s] for (a, b), s in zip(TINY, SCORES, strict=True)])
    ingest_tables(wh, "t", _pairs_config(path), path, "r0")
    return path


def test_a_run_trained_again_under_its_id_gets_new_embeddings_and_results(wh, tmp_path, tiny_pairs, one_thread):
    from sentence_transformers import SentenceTransformer

    _retrain(wh.models_root, tmp_path, "r1", seed=0)
    computed, before = _sts(wh, "t", "s3bert:r1", ["en-en"])
    assert computed == 1
    _retrain(wh.models_root, tmp_path, "r1", seed=1)
    computed, after = _sts(wh, "t", "s3bert:r1", ["en-en"])
    assert computed == 1 and after["en-en"] != pytest.approx(before["en-en"])
    texts = sorted({t for pair in TINY for t in pair})
    keys = wh.read("t", "sentences").filter(pl.col("text").is_in(texts)).sort("text")["key"].to_list()
    new = SentenceTransformer(str(wh.models_root / "s3bert" / "r1"), device="cpu").encode(texts)
    assert np.allclose(read_embeddings(wh, "t", "s3bert:r1", keys), new, atol=1e-5)
    version = wh.version("t", "embeddings")
    assert _sts(wh, "t", "s3bert:r1", ["en-en"])[0] == 0  # unchanged weights: results and vectors reused
    assert wh.version("t", "embeddings") == version
    ids = wh.read("t", "embeddings").filter(pl.col("encoder") == "s3bert:r1")["model_id"].unique().to_list()
    assert ids == [model_id("s3bert:r1", wh.models_root)]  # the old weights' vectors are gone, not only unread


# ------------------------------------------------------------------------------------------------- embeddings


def test_embeddings_of_a_local_model_directory_follow_its_files(wh, tmp_path, tiny_pairs, one_thread):
    """`hf:<directory>`: the same name over other weights is another model."""
    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "local"
    shutil.copytree(tiny_sentence_transformer(tmp_path / "a", seed=0), folder)
    name = f"hf:{folder}"
    computed, before = _sts(wh, "t", name, ["en-en"])
    assert computed == 1
    shutil.rmtree(folder)
    shutil.copytree(tiny_sentence_transformer(tmp_path / "b", seed=1), folder)
    computed, after = _sts(wh, "t", name, ["en-en"])
    assert computed == 1 and after["en-en"] != pytest.approx(before["en-en"])
    texts = sorted({t for pair in TINY for t in pair})
    keys = wh.read("t", "sentences").filter(pl.col("text").is_in(texts)).sort("text")["key"].to_list()
    assert np.allclose(read_embeddings(wh, "t", name, keys),
                       SentenceTransformer(str(folder), device="cpu").encode(texts), atol=1e-5)
    assert _sts(wh, "t", name, ["en-en"])[0] == 0


def test_a_run_id_follows_its_files_and_the_encoders_it_loads_by_name(tmp_path):
    """A trained run's model id: its files (not its card, request or checkpoint) and the model ids of the
    encoders its model.json names for loading (a fused run's PEAR run and base, a base under trained heads)."""
    root = tmp_path / "models"
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    (base / "model.safetensors").write_bytes(b"weights one")

    def run(method: str, run_id: str, weights: bytes | None, **meta: object) -> None:
        folder = root / method / run_id
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        if weights is not None:
            (folder / "model.safetensors").write_bytes(weights)
        (folder / "model.json").write_text(json.dumps({"method": method, "run_id": run_id,
                                                      "created_at": "2026-01-01T00:00:00+00:00", **meta}))

    run("pear", "p1", b"pear one")
    run("pear_fused", "f1", None, pear="pear:p1", fusion={"base": f"hf:{base}", "weight": 0.5})
    run("meaning", "m1", b"heads", base_encoder=f"hf:{base}")
    run("meaning", "own", b"heads", base_encoder=f"hf:{base}", text_encoder="text_encoder")
    ids = {n: model_id(n, root) for n in ("pear:p1", "pear_fused:f1", "meaning:m1", "meaning:own")}
    for name in ids:  # a card, a request, a checkpoint and the digests cache are no part of the model
        folder = root / name.replace(":", "/")
        (folder / "README.md").write_text("a card")
        (folder / "request.json").write_text("{}")
        (folder / "checkpoint").mkdir()
        (folder / "checkpoint" / "state.json").write_text("{}")
        assert model_id(name, root) == ids[name] and (folder / DIGESTS).is_file()
    run("pear", "p1", b"pear two")  # trained again under its id
    assert model_id("pear:p1", root) != ids["pear:p1"]
    assert model_id("pear_fused:f1", root) != ids["pear_fused:f1"]
    assert model_id("meaning:m1", root) == ids["meaning:m1"]
    (base / "model.safetensors").write_bytes(b"weights two")  # the base directory's weights change
    assert model_id("meaning:m1", root) != ids["meaning:m1"]
    assert model_id("meaning:own", root) == ids["meaning:own"]  # it encodes with its own text encoder
    ids["meaning:m1"] = model_id("meaning:m1", root)
    (root / "meaning" / "m1" / "model.safetensors").write_bytes(b"HEADS")  # same size, weights replaced in place
    assert model_id("meaning:m1", root) != ids["meaning:m1"]
