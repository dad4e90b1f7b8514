"""The parse and translate stages: language routing, pivoting through English, incrementality, config errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial

import polars as pl
import pytest

from amrsim.amr.backends import ParseResult
from amrsim.config import DatasetConfig, ParseConfig, TranslateConfig, load_config
from amrsim.errors import ConfigError
from amrsim.stages.ingest import ingest_tables
from tests.forked import amrsim_cli
from tests.helpers import ROOT

HEADER = ["id", "split", "score", "sentence1", "sentence2", "sentence1_de", "sentence2_de", "sentence1_fr",
          "sentence2_fr"]
ROWS = [["1", "test", "4.0", "The boy runs.", "A boy is running.", "Der Junge läuft.", "Ein Junge rennt.",
         "Le garçon court.", "Un garçon court."],
        ["2", "test", "1.0", "The cat sleeps.", "The dog barks.", "Die Katze schläft.", "", "Le chat dort.",
         "Le chien aboie."]]


class FakeParser:
    """Deterministic stand-in for a backend: one concept per sentence; 'fail' in the text fails the row."""

    name = "fake"

    def __init__(self, lang: str):
        self.lang, self.calls = lang, []

    def parse(self, sentences):
        self.calls.append(list(sentences))
        return [ParseResult.failed("empty sentence") if not s.strip() else
                ParseResult(f'(s / sentence :lang "{self.lang}" :mod (w / {s.split()[1].lower().strip(".")}))')
                for s in sentences]


@pytest.fixture
def sample(wh, write_tsv):
    path = write_tsv("pairs.tsv", HEADER, ROWS)
    ds = DatasetConfig(path=str(path), kind="pairs", lang="en", score_range=(0, 5),
                       translations={"de": {"sentence1": "sentence1_de", "sentence2": "sentence2_de"},
                                     "fr": {"sentence1": "sentence1_fr", "sentence2": "sentence2_fr"}})
    ingest_tables(wh, "s", ds, path, "r0")
    return ds, path


@pytest.fixture
def fake_parsers(monkeypatch):
    from amrsim.amr import parsing as parse_mod

    made: dict[str, FakeParser] = {}
    monkeypatch.setattr(parse_mod, "parser_for", lambda spec: made.setdefault(spec.lang, FakeParser(spec.lang)))
    return made


def run_parse(wh, cfg: ParseConfig, run_id: str):
    from amrsim.amr.parsing import ParserSpec, parse_frame
    from amrsim.stages import parse_stage

    specs = {lang: ParserSpec(cfg.backend, lang) for lang in cfg.direct_langs()}
    return parse_stage(wh, "p", "s", cfg, "ud", run_id, partial(parse_frame, specs=specs, linearize="paper"))


def test_languages_are_parsed_directly_or_through_english(wh, sample, fake_parsers):
    run = run_parse(wh, ParseConfig(backend="ud"), "r1")
    amr = wh.read("s", "amr").join(wh.read("s", "sentences").select(sentence_key="key", text="text"),
                                   on="sentence_key")
    assert run.rows_in == amr.height == wh.read("s", "sentences").height
    de = amr.filter(pl.col("lang") == "de").sort("text")
    # German has no ud parser: each German sentence is parsed as its English source, and says so
    assert de["pivot_lang"].to_list() == ["en"] * de.height
    assert set(de["parsed_text"]) <= {"The boy runs.", "A boy is running.", "The cat sleeps."}
    assert all('"en"' in g for g in de["penman"])
    fr = amr.filter(pl.col("lang") == "fr")
    assert fr["pivot_lang"].is_null().all() and (fr["parsed_text"] == fr["text"]).all()
    assert all('"fr"' in g for g in fr["penman"]) and fr["linearized"].is_not_null().all()
    # the four English texts, shared by en rows and pivoted de rows, are parsed once each
    assert sorted(t for c in fake_parsers["en"].calls for t in c) == sorted(
        ["The boy runs.", "A boy is running.", "The cat sleeps.", "The dog barks."])
    again = run_parse(wh, ParseConfig(backend="ud"), "r2")
    assert again.rows_computed == 0


def test_without_pivot_other_languages_fail_with_the_reason(wh, sample, fake_parsers):
    run_parse(wh, ParseConfig(backend="ud", langs=["en"], pivot=False), "r1")
    amr = wh.read("s", "amr")
    failed = amr.filter(pl.col("status") == "failed")
    assert set(failed["lang"]) == {"de", "fr"}
    assert all("no ud parser for" in e and "pivot: false" in e for e in failed["error"])
    assert amr.filter(pl.col("lang") == "en")["status"].to_list() == ["ok"] * 4


def test_ingest_keeps_parsed_graphs(wh, sample, fake_parsers):
    ds, path = sample
    run_parse(wh, ParseConfig(backend="ud"), "r1")
    before = wh.read("s", "amr").height
    ingest_tables(wh, "s", ds, path, "r2")
    assert wh.read("s", "amr").height == before


def test_provided_translations_are_copied_once(wh, sample):
    from amrsim.stages import translate_stage

    run = translate_stage(wh, "p", "s", TranslateConfig(backend="provided"), "r1", lambda f: f)
    tr = wh.read("s", "translations")
    assert run.rows_computed == tr.height == wh.read("s", "parallel").height
    assert set(tr["target_lang"]) == {"de", "fr"} and (tr["model"] == "provided").all()
    assert translate_stage(wh, "p", "s", TranslateConfig(backend="provided"), "r2", lambda f: f).rows_computed == 0


def test_marian_translations_through_the_stage(wh, sample, monkeypatch):
    from amrsim.stages import translate_stage
    from amrsim.translate import TranslationResult
    from amrsim.translate import run as run_mod

    class Upper:
        name = "upper"

        def translate(self, texts):
            return [TranslationResult(t.upper()) for t in texts]

    monkeypatch.setattr(run_mod, "translator_for", lambda spec: Upper())
    cfg = TranslateConfig(backend="marian", targets=["de", "it"], models={"de": "m/de", "it": "m/it"})
    specs = {"m/de": run_mod.TranslatorSpec("m/de")}  # 'm/it' has no spec: its rows fail, they are not dropped
    run = translate_stage(wh, "p", "s", cfg, "r1", partial(run_mod.translate_frame, specs=specs))
    tr = wh.read("s", "translations")
    english = wh.read("s", "sentences").filter(pl.col("lang") == "en").height
    assert run.rows_computed == tr.height == 2 * english
    de = tr.filter(pl.col("target_lang") == "de")
    assert (de["text"] == de["source"].str.to_uppercase()).all()
    assert tr.filter(pl.col("target_lang") == "it")["error"].to_list() == [
        "no translation model for en->it ('m/it' not loaded)"] * english
    # failed rows are retried, ok rows are not
    again = translate_stage(wh, "p", "s", cfg, "r2", partial(run_mod.translate_frame, specs=specs))
    assert again.rows_computed == english


@pytest.mark.parametrize("body, message", [
    ("parse: {backend: ud, langs: [de]}", "key 'parse', value {...}: backend 'ud' has no parser for ['de']"),
    ("parse: {backend: amrlib}", "backend 'amrlib' needs model_dir"),
    ("parse: {backend: amrlib, model_dir: ./no/such/model}", "key 'parse.model_dir', value './no/such/model': "
                                                              "model directory not found"),
    ("translate: {backend: marian, targets: [de, it], models: {de: Helsinki-NLP/opus-mt-en-de}}",
     "no model configured for target language(s) ['it']"),
    ("translate: {backend: marian, targets: [de], models: {de: ./models/opus-de}}",
     "key 'translate.models.de', value './models/opus-de': model directory not found"),
    ("parse: {datasets: [nope]}", "parse.datasets: unknown dataset 'nope'"),
])
def test_bad_parse_and_translate_config(write_config, write_tsv, body, message):
    write_tsv("pairs.tsv", HEADER, ROWS)
    path = write_config(f"""
        pipelines:
          demo:
            datasets:
              s: {{path: pairs.tsv, kind: pairs}}
            {body}
        """)
    with pytest.raises(ConfigError) as err:
        load_config(path).pipeline("demo")
    assert message in str(err.value)


@pytest.mark.slow
def test_parse_cli_keeps_every_row(tmp_path):
    src = tmp_path / "sentences.txt"
    src.write_text("The boy does not want to go.\n\n   \nJohn Smith visited Paris in 2010.\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "amrsim.cli", "parse", "--backend", "ud", "--lang", "en", "--file", str(src),
           "--out", str(out), "--linearize", "paper"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["status"] for r in rows] == ["ok", "failed", "failed", "ok"]
    assert rows[1]["amr"] is None and rows[1]["error"]
    assert ":polarity -" in rows[0]["amr"] and rows[0]["linearized"].startswith("(")
    wide = {**os.environ, "COLUMNS": "300"}  # typer's error box wraps at the terminal width
    bad = subprocess.run([*cmd[:6], "--lang", "de", *cmd[8:]], capture_output=True, text=True, cwd=ROOT, env=wide,
                         timeout=120)
    assert bad.returncode == 2 and "--lang 'de': backend ud parses ['en', 'fr']" in bad.stderr


@pytest.mark.slow
def test_bench_commands_check_mechanics_on_cpu_and_refuse_a_missing_gpu():
    import torch

    for what in ("translate", "parse"):
        done = amrsim_cli("bench", what, "--device", "cpu", "--tiny", "--sentences", "4", "--batch-size", "2",
                          "--out-tokens", "3", "--num-beams", "2", cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout[done.stdout.index("{"):])
    if not torch.cuda.is_available():
        done = subprocess.run([sys.executable, "-m", "amrsim.cli", "bench", "parse"], capture_output=True, text=True,
                              cwd=ROOT, timeout=120)
        assert done.returncode == 2 and "no CUDA device" in done.stderr


def test_a_parse_that_fails_mid_stage_keeps_its_committed_chunks_and_the_rerun_parses_the_rest(wh, sample,
                                                                                              fake_parsers):
    from amrsim.amr.parsing import ParserSpec, parse_frame
    from amrsim.stages import parse_stage

    cfg = ParseConfig(backend="ud", commit_rows=3)
    specs = {lang: ParserSpec(cfg.backend, lang) for lang in cfg.direct_langs()}
    parse = partial(parse_frame, specs=specs, linearize="paper")
    calls: list[int] = []

    def crashes_on_the_second_chunk(frame):
        calls.append(frame.height)
        if len(calls) == 2:
            raise RuntimeError("parser process died")
        return parse(frame)

    with pytest.raises(RuntimeError, match="parser process died"):
        parse_stage(wh, "p", "s", cfg, "ud", "r1", crashes_on_the_second_chunk)
    assert wh.read("s", "amr").height == 3  # the first chunk, committed whole
    total = wh.read("s", "sentences").height
    rerun = parse_stage(wh, "p", "s", cfg, "ud", "r2", parse)
    assert (rerun.rows_in, rerun.rows_computed) == (total, total - 3)
    assert wh.read("s", "amr")["sentence_key"].sort().equals(wh.read("s", "sentences")["key"].sort())
