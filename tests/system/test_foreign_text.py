"""Text in other languages: X -> English in the translate stage, the parse stage pivoting through those
translations, the `parse --translate` command, per-row STS languages and `mse_amr` encoding foreign text.

Translation models are tiny random Marian models built here (garbage output, real code path)."""

from __future__ import annotations

import os
import warnings
from functools import partial

import polars as pl
import pytest

from amrsim.config import DatasetConfig, ParseConfig, TranslateConfig, one_off_dataset
from amrsim.stages.ingest import ingest_tables

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("sentencepiece")
pytest.importorskip("transformers")

from tests.helpers import DE_WORDS, build_tiny_marian  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

DE_PAIRS = [["1", "test", "4.0", "Der Hund läuft.", "Ein Hund rennt schnell."],
            ["2", "test", "1.0", "Die Katze schläft.", "Der Vogel singt im Garten."],
            ["3", "test", "2.5", "Das Haus ist alt.", "Ein altes Haus steht am Fluss."],
            ["4", "test", "3.0", "Der Junge liest ein Buch.", "Ein Kind liest."]]


@pytest.fixture(scope="module")
def de_en(tmp_path_factory) -> str:
    """A tiny German -> English Marian model directory."""
    return build_tiny_marian(tmp_path_factory.mktemp("de_en"), DE_WORDS, seed=1)


@pytest.fixture(scope="module")
def de_en_other(tmp_path_factory) -> str:
    """A second German -> English model (other weights): changing the model changes the translations."""
    return build_tiny_marian(tmp_path_factory.mktemp("de_en_2"), DE_WORDS, seed=2)


@pytest.fixture
def german(wh, write_tsv):
    """A German-only pairs dataset 'g' (no English source anywhere) plus one French pair."""
    path = write_tsv("de.tsv", ["id", "split", "score", "sentence1", "sentence2", "lang"],
                     [[*r, "de"] for r in DE_PAIRS] + [["5", "test", "2.0", "Le chat dort.", "Le chien aboie.", "fr"]])
    ds = DatasetConfig(path=str(path), kind="pairs", lang="de", score_range=(0, 5), columns={"lang": "lang"})
    ingest_tables(wh, "g", ds, path, "r0")
    return ds


def translate(wh, tr: TranslateConfig, run_id: str, **paths: str):
    """The translate stage as the task runs it, in process: `paths` maps a configured model to its directory."""
    from amrsim.stages import translate_stage
    from amrsim.translate.run import TranslatorSpec, translate_frame

    specs = {m: TranslatorSpec(paths.get(m, m), tr.batch_size, tr.num_beams, tr.max_length, "cpu")
             for m in {*tr.models.values(), *tr.to_english.values()}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return translate_stage(wh, "p", "g", tr, run_id, partial(translate_frame, specs=specs))


def to_english(model: str) -> TranslateConfig:
    return TranslateConfig(to_english={"de": model}, num_beams=1, max_length=12)


def test_german_sentences_are_translated_into_english_once(wh, german, de_en):
    from amrsim.translate import model_key, translation_key

    run = translate(wh, to_english(de_en), "r1")
    tr = wh.read("g", "translations")
    german_keys = wh.read("g", "sentences").filter(pl.col("lang") == "de")["key"].sort()
    assert run.rows_computed == tr.height == german_keys.len() == 8  # French is not translated
    assert tr["source_key"].sort().equals(german_keys)
    assert set(tr["source_lang"]) == {"de"} and set(tr["target_lang"]) == {"en"} and set(tr["model"]) == {de_en}
    assert (tr["status"] == "ok").all() and tr["text"].str.len_chars().min() > 0
    assert sorted(tr["key"]) == sorted(translation_key(k, "en", model_key(de_en), 1, 12) for k in german_keys)
    assert translate(wh, to_english(de_en), "r2").rows_computed == 0
    # another generation setting is another translation
    assert translate(wh, TranslateConfig(to_english={"de": de_en}, num_beams=2, max_length=12), "r3").rows_computed == 8


def test_a_translation_that_fails_fails_its_row_only(wh, german, de_en, monkeypatch):
    from amrsim.translate.run import TranslatorSpec, translator_for

    translator = translator_for(TranslatorSpec(de_en, 32, 1, 12, "cpu"))
    poison = translator._encode(["Die Katze schläft."])[0]
    real = translator.model.generate

    def poisoned(*args, **kwargs):
        ids = kwargs["input_ids"]
        if any(row[:len(poison)].tolist() == poison for row in ids):
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(translator.model, "generate", poisoned)
    run = translate(wh, to_english(de_en), "r1")
    tr = wh.read("g", "translations").join(wh.read("g", "sentences").select(source_key="key", sentence="text"),
                                           on="source_key")
    assert run.rows_computed == 8 and run.rows_failed == 1
    bad = tr.filter(pl.col("status") == "failed")
    assert bad["sentence"].to_list() == ["Die Katze schläft."] and "out of memory" in bad["error"][0]
    assert tr.filter(pl.col("status") == "ok").height == 7
    monkeypatch.setattr(translator.model, "generate", real)
    again = translate(wh, to_english(de_en), "r2")  # the failed row is retried, the others are not
    assert (again.rows_computed, again.rows_failed) == (1, 0)


def test_to_english_config_errors(write_config, write_tsv):
    from amrsim.config import load_config
    from amrsim.errors import ConfigError

    write_tsv("pairs.tsv", ["sentence1", "sentence2", "score"], [["a", "b", "1"]])
    for body, message in (("{to_english: {xx-zz-qq: m}}", "'xx-zz-qq' is not a language code"),
                          ("{to_english: {en: m}}", "'en' is English already"),
                          ("{to_english: {de: ./models/opus-de-en}}",
                           "key 'translate.to_english.de', value './models/opus-de-en': model directory not found")):
        path = write_config(f"""
            pipelines:
              demo:
                datasets:
                  s: {{path: pairs.tsv, kind: pairs}}
                translate: {body}
            """)
        with pytest.raises(ConfigError) as err:
            load_config(path).pipeline("demo")
        assert message in str(err.value)


def parse(wh, run_id: str, tr: TranslateConfig | None, cfg: ParseConfig | None = None):
    """The parse stage as the task runs it (ud rules, in process), pivoting through `tr`'s translations."""
    from amrsim.amr.parsing import ParserSpec, parse_frame
    from amrsim.stages import parse_stage

    cfg = cfg or ParseConfig(backend="ud")
    specs = {lang: ParserSpec(cfg.backend, lang) for lang in cfg.direct_langs()}
    return parse_stage(wh, "p", "g", cfg, "ud", run_id, partial(parse_frame, specs=specs, linearize=cfg.linearize),
                       tr)


def graphs(wh) -> pl.DataFrame:
    return wh.read("g", "amr").join(wh.read("g", "sentences").select(sentence_key="key", text="text"),
                                    on="sentence_key")


@pytest.mark.slow
def test_german_is_parsed_through_its_machine_translation(wh, german, de_en):
    tr = to_english(de_en)
    translate(wh, tr, "r1")
    run = parse(wh, "r2", tr)
    amr = graphs(wh)
    assert run.rows_in == amr.height == 10 and run.rows_failed == 0
    de = amr.filter(pl.col("lang") == "de")
    english = wh.read("g", "translations").select(sentence_key="source_key", translation="text")
    de = de.join(english, on="sentence_key")
    assert de.height == 8 and (de["status"] == "ok").all()
    assert (de["parsed_text"] == de["translation"]).all()  # the machine translation was parsed, not the German
    assert set(de["pivot_lang"]) == {"en"} and set(de["pivot_source"]) == {de_en}
    fr = amr.filter(pl.col("lang") == "fr")
    assert fr["pivot_source"].is_null().all() and (fr["parsed_text"] == fr["text"]).all()
    assert parse(wh, "r3", tr).rows_computed == 0


def test_without_a_model_the_failed_row_names_the_language_and_the_key(wh, german, de_en):
    run = parse(wh, "r1", None)
    failed = graphs(wh).filter(pl.col("status") == "failed")
    assert run.rows_failed == failed.height == 8 and set(failed["lang"]) == {"de"}
    assert all("no ud parser for 'de'" in e and "translate.to_english.de" in e for e in failed["error"])
    # the model configured but its translations not made yet: another reason, and another key
    tr = to_english(de_en)
    parse(wh, "r2", tr)
    failed = graphs(wh).filter(pl.col("status") == "failed")
    assert failed.height == 8 and all("run the translate stage" in e for e in failed["error"])
    # translated: the same sentences now parse, and each keeps one graph
    translate(wh, tr, "r3")
    again = parse(wh, "r4", tr)
    amr = graphs(wh)
    assert (again.rows_computed, again.rows_failed) == (8, 0)
    assert amr.height == 10 and (amr["status"] == "ok").all()


def test_a_given_english_source_comes_first(wh, write_tsv, de_en):
    path = write_tsv("en.tsv", ["id", "split", "score", "sentence1", "sentence2", "sentence1_de", "sentence2_de"],
                     [["1", "test", "4.0", "The dog runs.", "A dog runs fast.", DE_PAIRS[0][3], DE_PAIRS[0][4]]])
    ds = DatasetConfig(path=str(path), kind="pairs", lang="en", score_range=(0, 5),
                       translations={"de": {"sentence1": "sentence1_de", "sentence2": "sentence2_de"}})
    ingest_tables(wh, "g", ds, path, "r0")
    tr = to_english(de_en)
    translate(wh, tr, "r1")
    parse(wh, "r2", tr)
    de = graphs(wh).filter(pl.col("lang") == "de").sort("text")
    assert de["pivot_source"].to_list() == ["given", "given"]
    assert de["parsed_text"].to_list() == ["The dog runs.", "A dog runs fast."]  # Der Hund ..., Ein Hund ...


def test_changing_the_model_recomputes_that_language_only(wh, german, de_en, de_en_other):
    first = to_english(de_en)
    translate(wh, first, "r1")
    parse(wh, "r2", first)
    before = graphs(wh)
    second = to_english(de_en_other)
    assert translate(wh, second, "r3").rows_computed == 8  # the German sentences, with the new model
    run = parse(wh, "r4", second)
    after = graphs(wh)
    assert run.rows_computed == 8  # French is not parsed again
    assert after.height == 10  # the old German graphs were replaced, not kept next to the new ones
    assert set(after.filter(pl.col("lang") == "de")["pivot_source"]) == {de_en_other}
    fr_before, fr_after = (f.filter(pl.col("lang") == "fr").sort("key") for f in (before, after))
    assert fr_before.select("key", "penman").equals(fr_after.select("key", "penman"))
    new_text = wh.read("g", "translations").filter(pl.col("model") == de_en_other).select(
        sentence_key="source_key", translation="text")
    de = after.filter(pl.col("lang") == "de").join(new_text, on="sentence_key")
    assert (de["parsed_text"] == de["translation"]).all()
    assert parse(wh, "r5", second).rows_computed == 0


@pytest.mark.slow
def test_parse_command_translates_then_parses(tmp_path, de_en):
    import json

    from tests.forked import amrsim_cli
    from tests.helpers import ROOT, cli_env

    src = tmp_path / "de.txt"
    src.write_text("Der Hund läuft.\n\nDie Katze schläft im Garten.\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    cmd = ["parse", "--lang", "de", "--file", str(src), "--out", str(out)]
    env = {**cli_env(tmp_path), "COLUMNS": "300"}  # typer's error box wraps at the terminal width
    done = amrsim_cli(*cmd, "--translate", de_en, "--device", "cpu", cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["snt"] for r in rows] == ["Der Hund läuft.", "", "Die Katze schläft im Garten."]
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert rows[1]["error"] == "translation failed: empty text" and rows[1]["english"] is None
    assert all(r["translation_model"] == de_en for r in rows)
    assert rows[0]["english"] and rows[0]["english"] != rows[0]["snt"] and rows[0]["amr"].startswith("(")
    # without a model: the error says how to get one; a model that does not load is named
    no_model = amrsim_cli(*cmd, cwd=ROOT, env=env, timeout=120)
    assert no_model.returncode == 2 and "--translate Helsinki-NLP/opus-mt-de-en" in no_model.stderr
    missing = tmp_path / "no" / "such" / "model"
    bad = amrsim_cli(*cmd, "--translate", str(missing), cwd=ROOT, env=env, timeout=120)
    assert bad.returncode == 2 and str(missing) in bad.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3  # the earlier output is left whole


def _sts_cli(tmp_path, *args: str):
    from tests.forked import amrsim_cli
    from tests.helpers import ROOT, cli_env

    cfg = tmp_path / "pipelines.yaml"
    cfg.write_text("warehouse: wh\npipelines: {demo: {}}\n", encoding="utf-8")
    return amrsim_cli("evaluate", "sts", "--config", str(cfg), *args, cwd=ROOT,
                      env={**cli_env(tmp_path), "COLUMNS": "300"})


AR = [("القط ينام", "القطة نائمة", "4.5"), ("الولد يقرأ كتابا", "الطفل يقرأ", "3.5"),
      ("السماء زرقاء", "الكلب ينبح", "0.5"), ("المدينة كبيرة", "البيت صغير", "1.0")]
ES_EN = [("El gato duerme.", "The cat sleeps.", "5.0"), ("El niño lee un libro.", "A child reads.", "3.5"),
         ("El cielo es azul.", "The dog barks.", "0.5"), ("La ciudad es grande.", "The house is small.", "1.0")]


@pytest.mark.slow
def test_sts_files_say_the_language_of_each_sentence(tmp_path, write_tsv):
    from amrsim.warehouse import Warehouse


    ar = write_tsv("ar_test.tsv", ["sentence1", "sentence2", "score", "lang1", "lang2"],
                   [[a, b, s, "ar", "ar"] for a, b, s in AR])
    done = _sts_cli(tmp_path, "--encoder", "minilm", "--file", str(ar))
    assert done.returncode == 0, done.stderr[-2000:]
    wh = Warehouse(tmp_path / "wh")
    results = wh.read("eval", "results")
    assert set(results["lang_pair"]) == {"ar-ar"}  # not the --lang default en-en
    assert set(wh.read(one_off_dataset(ar), "sentences")["lang"]) == {"ar"}
    # --lang es-en: sentence 1 Spanish, sentence 2 English
    es_en = write_tsv("es_en_test.tsv", ["sentence1", "sentence2", "score"], [list(r) for r in ES_EN])
    done = _sts_cli(tmp_path, "--encoder", "minilm", "--file", str(es_en), "--lang", "es-en")
    assert done.returncode == 0, done.stderr[-2000:]
    pairs = wh.read(one_off_dataset(es_en), "pairs")
    assert set(pairs["lang1"]) == {"es"} and set(pairs["lang2"]) == {"en"}
    assert set(wh.read("eval", "results").filter(pl.col("dataset") == one_off_dataset(es_en))["lang_pair"]) == {"es-en"}
    # a language code that is not one: exit 2 naming the row; nothing is written for the file
    bad = write_tsv("bad_test.tsv", ["sentence1", "sentence2", "score", "lang1", "lang2"],
                    [[a, b, s, "ar", "ar"] for a, b, s in AR[:2]] + [[AR[2][0], AR[2][1], "1", "ar", "arabic!"]])
    done = _sts_cli(tmp_path, "--encoder", "minilm", "--file", str(bad))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert f"{bad}:4: column lang2: 'arabic!' is not a language code" in lines[0]
    assert not (tmp_path / "wh" / "bad_test").exists()
    wrong = _sts_cli(tmp_path, "--encoder", "minilm", "--file", str(es_en), "--lang", "spanish")
    assert wrong.returncode == 2 and "--lang 'spanish': not a language code" in wrong.stderr


def test_lang_option_names_one_language_or_a_pair():
    from amrsim.cli.evaluate import sentence_langs
    from amrsim.errors import ConfigError

    assert sentence_langs("de") == ("de", "de")
    assert sentence_langs("es-en") == ("es", "en")
    assert sentence_langs("en-US") == ("en-US", "en-US")  # one tag: a language and a region
    assert sentence_langs("deu-eng") == ("de", "en")
    with pytest.raises(ConfigError, match="not a language code"):
        sentence_langs("xx-yy-zz")


# --- end to end: German only, through translate -> parse -> metrics -> mse_amr encode -> STS --------------------------


def add_mse_amr_run(models_root) -> None:
    """One `mse_amr` run under `models_root`: a tiny BERT as both the graph encoder and the base encoder (its
    model.json as training writes it). The encode path is under test here, not training."""
    import json

    from transformers import BertConfig, BertModel, BertTokenizerFast

    run = models_root / "mse_amr" / "tiny"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "(", ")", ":", "-", "arg", "##0", "##1", "01",
             *sorted({w.lower() for w in DE_WORDS}), "the", "cat", "dog", "runs", "sleeps"]
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)})
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=64))
    for sub in ("amr_encoder", "base"):
        bert.save_pretrained(str(run / sub))
        tok.save_pretrained(str(run / sub))
    (run / "model.json").write_text(json.dumps({
        "method": "mse_amr", "run_id": "tiny", "created_at": "2026-01-01T00:00:00", "amr_encoder": "amr_encoder",
        "pooling": "cls", "max_length": 64, "base_encoder": f"hf:{run / 'base'}#cls", "integration": "concat",
        "parser": "ud", "linearize": "paper", "langs": ["en"]}), encoding="utf-8")


def test_german_only_end_to_end(wh, write_tsv, de_en):
    from amrsim.config import MetricsConfig, StsEvalConfig
    from amrsim.metrics.engine import score_pairs
    from amrsim.stages import metrics_stage, sts_stage

    add_mse_amr_run(wh.models_root)
    path = write_tsv("de.tsv", ["id", "split", "score", "sentence1", "sentence2"], DE_PAIRS)
    ingest_tables(wh, "g", DatasetConfig(path=str(path), kind="pairs", lang="de", score_range=(0, 5),
                                          columns={"id": "id", "split": "split"}), path, "r0")
    tr = to_english(de_en)
    assert translate(wh, tr, "r1").rows_failed == 0
    assert parse(wh, "r2", tr).rows_failed == 0
    options = MetricsConfig(datasets=["g"], parser="ud", vectors="random", aspects=["smatch", "wlk"]).options()
    metrics = metrics_stage(wh, "p", "g", options, "r3", partial(score_pairs, options=options))
    scored = wh.read("g", "amr_metrics")
    assert metrics.rows_computed == scored.height == 4 and (scored["status"] == "ok").all()
    sts = StsEvalConfig(encoders=["mse_amr:latest"], datasets=["g"], splits=["test"], lang_pairs=["de-de"])
    run, results = sts_stage(wh, "p", sts, "r4", device="cpu")
    assert run.rows_computed == 1 and set(results["lang_pair"]) == {"de-de"} and set(results["n"]) == {4}
    emb = wh.read("g", "embeddings").filter(pl.col("encoder") == "mse_amr:tiny")  # the run :latest resolved to
    assert emb.height == 8 and (emb["status"] == "ok").all()  # each German sentence has its translation's graph
    # a rerun of every stage computes nothing
    assert translate(wh, tr, "r5").rows_computed == 0 and parse(wh, "r6", tr).rows_computed == 0
    assert metrics_stage(wh, "p", "g", options, "r7", partial(score_pairs, options=options)).rows_computed == 0
    assert sts_stage(wh, "p", sts, "r8", device="cpu")[0].rows_computed == 0


def test_mse_amr_translates_at_encode_time_or_says_which_rows_fail(wh, write_tsv, de_en):
    from amrsim.cli.evaluate import failed_embeddings
    from amrsim.config import StsEvalConfig
    from amrsim.errors import WarehouseError
    from amrsim.stages import sts_stage
    from amrsim.translate.run import TranslatorSpec

    add_mse_amr_run(wh.models_root)
    path = write_tsv("de_en.tsv", ["id", "split", "score", "sentence1", "sentence2"],
                     [[i, s, sc, a, "The cat sleeps."] for i, s, sc, a, _ in DE_PAIRS])
    ds = DatasetConfig(path=str(path), kind="pairs", lang="de", lang2="en", score_range=(0, 5),
                       columns={"id": "id", "split": "split"})
    ingest_tables(wh, "x", ds, path, "r0")  # no parse stage, no translate stage: graphs are made at encode time
    sts = StsEvalConfig(encoders=["mse_amr:latest"], datasets=["x"], splits=["test"], lang_pairs=["de-en"])
    with pytest.raises(WarehouseError):
        sts_stage(wh, "p", sts, "r1", device="cpu")
    message = failed_embeddings(wh, "x", "mse_amr:latest")
    assert message.startswith("4 sentence(s) have no mse_amr:latest vector")
    assert "(de): no AMR graph" in message and "--translate de=<model>" in message
    specs = {"de": TranslatorSpec(de_en, num_beams=1, max_length=12, device="cpu")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run, results = sts_stage(wh, "p", sts, "r2", device="cpu", translate=specs)
    assert run.rows_computed == 1 and set(results["lang_pair"]) == {"de-en"}
    tr = wh.read("x", "translations")
    assert tr.height == 4 and set(tr["model"]) == {de_en} and (tr["status"] == "ok").all()
    emb = wh.read("x", "embeddings").filter(pl.col("encoder") == "mse_amr:tiny")  # the run :latest resolved to
    assert emb.height == 5 and (emb["status"] == "ok").all()
