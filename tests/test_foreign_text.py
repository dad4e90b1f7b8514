"""Text in other languages: X -> English in the translate stage, the parse stage pivoting through those
translations, the `parse --translate` command, per-row STS languages and `mse_amr` encoding foreign text.

Translation models are tiny random Marian models built here (garbage output, real code path)."""

from __future__ import annotations

import os
import warnings
from functools import partial

import polars as pl
import pytest

from amrsim.config import DatasetConfig, ParseConfig, TranslateConfig
from amrsim.ingest import ingest_tables

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
    from amrsim.translate import translation_key

    run = translate(wh, to_english(de_en), "r1")
    tr = wh.read("g", "translations")
    german_keys = wh.read("g", "sentences").filter(pl.col("lang") == "de")["key"].sort()
    assert run.rows_computed == tr.height == german_keys.len() == 8  # French is not translated
    assert tr["source_key"].sort().equals(german_keys)
    assert set(tr["source_lang"]) == {"de"} and set(tr["target_lang"]) == {"en"} and set(tr["model"]) == {de_en}
    assert (tr["status"] == "ok").all() and tr["text"].str.len_chars().min() > 0
    assert sorted(tr["key"]) == sorted(translation_key(k, "en", de_en, 1, 12) for k in german_keys)
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
