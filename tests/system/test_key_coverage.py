"""Every cached or stored row is keyed by everything it depends on: each test changes one input of a table at a time
and checks the stored value follows it (it equals what a fresh warehouse computes), and that a rerun with nothing
changed computes nothing. The inputs per table are listed in warehouse/README.md ("What each key covers")."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import amrsim.encoders.cache as cache
from amrsim.config import DatasetConfig, StsEvalConfig
from amrsim.encoders import model_id
from amrsim.encoders.cache import read_embeddings
from amrsim.stages import sts_stage
from amrsim.stages.ingest import ingest_tables
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import DIGESTS
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
    monkeypatch.setattr(cache, "load_encoder_with", lambda *a, **k: enc)
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


# ----------------------------------------------------------------------------------------- translations and amr


def test_translations_follow_the_files_of_a_model_directory(wh, tmp_path, fake_encoder):
    """A model configured as a directory: other files there are another model, whose translations replace nothing
    (they are new rows) and are made again; a hub id's keys are its name."""
    from amrsim.config import TranslateConfig
    from amrsim.stages import translate_stage

    de = [[a, b, s] for (a, b), s in zip(DE, SCORES, strict=True)]
    path = _tsv(tmp_path / "g_test.tsv", ["sentence1", "sentence2", "score"], de)
    ingest_tables(wh, "g", DatasetConfig(path=str(path), kind="pairs", lang="de", split="test"), path, "r0")
    model = tmp_path / "opus-de-en"
    model.mkdir()

    def translate(frame: pl.DataFrame) -> pl.DataFrame:  # "translates" with the model's one word
        word = (model / "config.json").read_text()
        return frame.with_columns(text=pl.col("source") + f" {word}", flags=pl.lit(None, pl.String),
                                  status=pl.lit("ok"), error=pl.lit(None, pl.String), seconds=pl.lit(0.0))

    def stored() -> list[str]:
        return sorted(wh.read("g", "translations").filter(pl.col("model") == str(model))["text"].to_list())

    tr = TranslateConfig(to_english={"de": str(model)})
    (model / "config.json").write_text("one")
    assert translate_stage(wh, "p", "g", tr, "r1", translate).rows_computed == 12
    assert translate_stage(wh, "p", "g", tr, "r2", translate).rows_computed == 0
    (model / "config.json").write_text("two")
    assert translate_stage(wh, "p", "g", tr, "r3", translate).rows_computed == 12
    assert sum(t.endswith(" two") for t in stored()) == 12
    assert translate_stage(wh, "p", "g", tr, "r4", translate).rows_computed == 0


def test_a_graph_parsed_through_a_given_english_source_follows_that_source(wh, tmp_path, monkeypatch):
    """German has no parser here: its sentences are parsed as their English sources (the input's own). A
    translation file reordered gives a German sentence another English source, and so another graph."""
    from amrsim.amr import parsing as parse_mod
    from amrsim.amr.parsing import ParserSpec, parse_frame
    from amrsim.config import ParseConfig
    from amrsim.stages import parse_stage
    from tests.stages.test_parse import FakeParser

    monkeypatch.setattr(parse_mod, "parser_for", lambda spec: FakeParser(spec.lang))
    en = [["The boy runs.", "The dog barks.", "4.0"], ["The cat sleeps.", "A bird sings.", "1.0"]]
    de = [["Der Junge läuft.", "Der Hund bellt.", "4.0"], ["Die Katze schläft.", "Ein Vogel singt.", "1.0"]]
    path = _tsv(tmp_path / "x_test.tsv", ["sentence1", "sentence2", "score"], en)
    de_path = _tsv(tmp_path / "de_test.tsv", ["sentence1", "sentence2", "score"], de)
    config = _pairs_config(path, {"de": {"path": str(de_path)}})
    cfg = ParseConfig(backend="ud", langs=["en"])
    specs = {lang: ParserSpec(cfg.backend, lang) for lang in cfg.direct_langs()}

    def parse(dataset: str, run_id: str) -> tuple[int, dict[str, str]]:
        run = parse_stage(wh, "p", dataset, cfg, "ud", run_id, partial(parse_frame, specs=specs, linearize="paper"))
        graphs = wh.read(dataset, "amr").join(wh.read(dataset, "sentences").select(sentence_key="key", text="text"),
                                              on="sentence_key")
        return run.rows_computed, dict(zip(graphs["text"], graphs["penman"], strict=True))

    ingest_tables(wh, "m", config, path, "r0")
    computed, before = parse("m", "r1")
    assert computed == 8 and "(w / junge)" not in before["Der Junge läuft."] and "boy" in before["Der Junge läuft."]
    _tsv(de_path, ["sentence1", "sentence2", "score"], de[::-1])  # rows swapped: other English sources
    ingest_tables(wh, "m", config, path, "r2")
    computed, after = parse("m", "r3")
    ingest_tables(wh, "fresh", config, path, "r4")
    assert computed == 4 and after == parse("fresh", "r5")[1]
    assert "cat" in after["Der Junge läuft."] and "boy" in after["Die Katze schläft."]
    assert parse("m", "r6")[0] == 0


# ------------------------------------------------------------------------------------------------- augmented_pairs


def test_silver_pairs_follow_the_encoder_run_they_come_from(wh, tmp_path, tiny_pairs, one_thread):
    """kNN pairs and their cosine labels come from the bi-encoder's vectors: the run trained again under its id
    gives the rows a fresh warehouse gives, not the old ones."""
    from amrsim.config import AugmentConfig
    from amrsim.stages import augment_stage

    def silver(dataset: str, run_id: str) -> tuple[int, list[tuple]]:
        aug = AugmentConfig(datasets=[dataset], encoder="s3bert:r1", k=2, splits=None)
        run = augment_stage(wh, "p", dataset, aug, run_id)
        rows = wh.read(dataset, "augmented_pairs").sort("sentence1_key", "sentence2_key")
        return run.rows_computed, [(a, b, round(c, 5)) for a, b, c in
                                   rows.select("sentence1_key", "sentence2_key", "weak_label").iter_rows()]

    _retrain(wh.models_root, tmp_path, "r1", seed=0)
    computed, before = silver("t", "a1")
    assert computed == len(before) > 0
    _retrain(wh.models_root, tmp_path, "r1", seed=1)
    computed, after = silver("t", "a2")
    ingest_tables(wh, "fresh", _pairs_config(tiny_pairs), tiny_pairs, "r2")
    assert computed == len(after) and after == silver("fresh", "a3")[1] and after != before
    assert silver("t", "a4")[0] == 0


# ------------------------------------------------------------------------------------------------- amr_metrics

WANT = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
WANT_NOT = "(w / want-01 :polarity - :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
DOG = "(d / dog :quant 2)"
CAT = "(c / cat :mod (b / black))"


def test_amr_metrics_follow_the_graphs_and_options_and_name_the_current_gold(wh, tmp_path):
    """A metrics row is keyed by its two graphs and the options: a changed graph or option is scored again, a
    changed gold score is not (the metrics do not read it) but the row's pair columns name the current pair."""
    from amrsim.metrics.engine import MetricsOptions, score_pairs
    from amrsim.stages import metrics_stage

    header = ["sentence1", "sentence2", "score", "amr1", "amr2"]
    rows = [["The boy wants to go.", "The boy does not want to go.", "2.0", WANT, WANT_NOT],
            ["Two dogs.", "A black cat.", "0.5", DOG, CAT], ["Two dogs.", "Dogs, two.", "4.5", DOG, DOG]]
    config = DatasetConfig(path=str(tmp_path / "g_test.tsv"), kind="pairs", split="test",
                           columns={"score": "score", "amr1": "amr1", "amr2": "amr2"})

    def metrics(rows: list[list[str]], options: MetricsOptions, dataset: str = "g") -> tuple[int, pl.DataFrame]:
        path = _tsv(tmp_path / "g_test.tsv", header, rows)
        ingest_tables(wh, dataset, config, path, "r")
        run = metrics_stage(wh, "p", dataset, options, "r", partial(score_pairs, options=options))
        table = wh.read(dataset, "amr_metrics").sort("key").join(  # keys name the graphs: one order every time
            wh.read(dataset, "pairs").select(pair_key="key", gold="score"), on="pair_key", how="left",
            maintain_order="left")
        return run.rows_computed, table.select("score", "gold", "smatch_f1", "negation")

    smatch = MetricsOptions(aspects=("smatch",), vectors="random", extra={"parser": "provided"})
    computed, before = metrics(rows, smatch)
    assert computed == 3 and before["negation"].is_null().all()
    version = wh.version("g", "amr_metrics")
    assert metrics(rows, smatch)[0] == 0 and wh.version("g", "amr_metrics") == version  # nothing changed
    reversed_ = [[*r[:2], s, *r[3:]] for r, s in zip(rows, ["4.5", "0.5", "2.0"], strict=True)]
    computed, after = metrics(reversed_, smatch)
    assert computed == 0 and after["smatch_f1"].to_list() == before["smatch_f1"].to_list()
    gold = dict(zip(after["smatch_f1"].round(3), after["score"], strict=True))
    assert gold == {0.933: 4.5, 0.0: 0.5, 1.0: 2.0} and after["score"].equals(after["gold"])  # the current gold
    assert metrics(reversed_, smatch)[0] == 0
    edited = [r[:] for r in reversed_]
    edited[0][4] = WANT  # one graph changed
    computed, after = metrics(edited, smatch)
    assert computed == 1 and after.equals(metrics(edited, smatch, "fresh")[1])
    assert metrics(edited, MetricsOptions(aspects=("smatch", "negation"), vectors="random",
                                          extra={"parser": "provided"}))[0] == 3  # another option: all again


def test_a_warehouse_with_rows_keyed_the_old_way_evaluates_again(wh, tmp_path, tiny_pairs, one_thread):
    """Vectors and results stored before model ids had a fingerprint (and STS keys the gold scores) are not read:
    the run's vectors are computed again (the old ones removed) and its result too; nothing fails on them."""
    from amrsim.encoders.cache import embedding_key
    from amrsim.evaluate import Score
    from amrsim.stages.evaluate.results import row_key, score_rows

    _retrain(wh.models_root, tmp_path, "r1", seed=0)
    sentences = wh.read("t", "sentences")
    old_id = "trained:s3bert/r1"
    wh.upsert("t", "embeddings", pl.DataFrame({
        "key": [embedding_key(old_id, k) for k in sentences["key"]], "sentence_key": sentences["key"],
        "encoder": "s3bert:r1", "model_id": old_id, "dim": 32, "vector": [[1.0] * 32] * sentences.height,
        "status": "ok", "error": None}))
    old = score_rows([Score("sts", "s3bert:r1", "t", "test", "en-en", m, 99.0, 6) for m in ("spearman", "pearson")],
                     "old", "h", ["old-key"], wh.models_root)
    wh.append_new("eval", "results", old.with_columns(key=pl.Series([row_key("sts", "s3bert:r1", "t", "test", "en-en",
                                                                             m, ["old-key"]) for m in old["metric"]])))
    computed, values = _sts(wh, "t", "s3bert:r1", ["en-en"])
    ingest_tables(wh, "fresh", _pairs_config(tiny_pairs), tiny_pairs, "r2")
    assert computed == 1 and values == _sts(wh, "fresh", "s3bert:r1", ["en-en"])[1] and values["en-en"] != 99.0
    assert set(wh.read("t", "embeddings")["model_id"]) == {model_id("s3bert:r1", wh.models_root)}
