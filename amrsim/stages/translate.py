"""The translate stage: `translations` rows copied from parallel data or generated, and the English translations
the parse stage pivots through."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import polars as pl

from amrsim.config import PIVOT_LANG, Pipeline, TranslateConfig
from amrsim.files import looks_like_path
from amrsim.translate import model_key, translation_key
from amrsim.translate.run import TranslatorSpec
from amrsim.warehouse import OK, Warehouse, config_hash, content_key
from amrsim.warehouse.lineage import StageRun, record_stage

TRANSLATION_TODO_SCHEMA = {"key": pl.String, "source_key": pl.String, "source_lang": pl.String,
                           "target_lang": pl.String, "source": pl.String, "model": pl.String}


def translate_stage(wh: Warehouse, pipeline: str, dataset: str, tr: TranslateConfig, run_id: str,
                    translate_batches: Callable[..., pl.DataFrame],
                    where: Callable[[str], Path | str] = str, on_progress: Callable[[int], None] | None = None,
                    on_plan: Callable[[int, int], None] | None = None) -> StageRun:
    """`translations` rows: copied from the dataset's parallel table (backend provided) or generated (marian), and
    English translations of the `to_english` languages' sentences (marian) for the parse stage to parse. `where`
    maps a configured model to where it loads from (`model_path`): a directory's files are part of the keys.
    Progress: `on_plan(todo, done)` for the translations to generate; `on_progress` goes to `translate_batches` as a
    keyword, which tells the rows it translates."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=f"translate:{tr.backend}", dataset=dataset,
                   config_hash=config_hash(tr))
    with record_stage(wh, run):
        done = wh.keys(dataset, "translations")  # failed translations (e.g. out of memory) are retried
        copied = pl.DataFrame()
        generate: list[dict[str, str]] = []
        sentences = None
        if tr.backend == "marian" or tr.to_english:
            run.input_versions["sentences"] = wh.version(dataset, "sentences")
            sentences = wh.read(dataset, "sentences", columns=["key", "lang", "text", "status"]).filter(
                pl.col("status") == OK)
        if tr.backend == "provided":
            run.input_versions["parallel"] = wh.version(dataset, "parallel")
            par = wh.read(dataset, "parallel").filter(pl.col("source_lang") == tr.source_lang)
            run.rows_in += par.height
            copied = par.select(
                pl.struct("source_key", "target_lang", "target").map_elements(
                    lambda r: content_key("translation", r["source_key"], r["target_lang"], "provided", r["target"]),
                    return_dtype=pl.String).alias("key"),
                "source_key", "source_lang", "target_lang", "source", pl.col("target").alias("text"),
                pl.lit("provided").alias("model"), pl.lit(None, pl.String).alias("flags"), "status", "error",
                pl.lit(None, pl.Float64).alias("seconds"))
            copied = copied.filter(~pl.col("key").is_in(list(done)))
        keys = model_keys(tr, where)
        if tr.backend != "provided" and sentences is not None:
            src = sentences.filter(pl.col("lang") == tr.source_lang)
            generate += [{"key": translation_key(k, t, keys[tr.models[t]], tr.num_beams, tr.max_length),
                          "source_key": k, "source_lang": tr.source_lang, "target_lang": t, "source": text,
                          "model": tr.models[t]}
                         for t in tr.targets for k, text in zip(src["key"], src["text"], strict=True)]
        if tr.to_english and sentences is not None:
            foreign = sentences.filter(pl.col("lang").is_in(list(tr.to_english)))
            generate += [{"key": english_translation_key(k, lang, tr, keys), "source_key": k, "source_lang": lang,
                          "target_lang": PIVOT_LANG, "source": text, "model": tr.to_english[lang]}
                         for k, lang, text in zip(foreign["key"], foreign["lang"], foreign["text"], strict=True)]
        todo = pl.DataFrame(generate, schema=TRANSLATION_TODO_SCHEMA)
        run.rows_in += todo.height
        todo = todo.filter(~pl.col("key").is_in(list(done)))
        if on_plan is not None:
            on_plan(todo.height, len(generate) - todo.height)  # the translations to generate (copies are quick)
        progress = {"on_progress": on_progress} if on_progress is not None else {}
        generated = run.take_budgets(translate_batches(todo, **progress)) if todo.height else None
        frames = [f for f in (copied, generated) if f is not None and f.height]
        rows = pl.concat(frames, how="diagonal_relaxed") if frames else todo
        if rows.height:
            wh.upsert(dataset, "translations", rows)
            run.wrote("translations")
            run.rows_computed = rows.height
            run.rows_failed = rows.filter(pl.col("status") != OK).height
        run.rows_out = run.rows_computed
    return run


def model_keys(tr: TranslateConfig, where: Callable[[str], Path | str] = str) -> dict[str, str]:
    """Each model the section names, as configured -> its name in content keys (`model_key` of where it loads from:
    `where`, as `model_path` gives it), computed once per stage."""
    return {m: model_key(m, where(m)) for m in {*tr.models.values(), *tr.to_english.values()}}


def english_translation_key(sentence_key: str, lang: str, tr: TranslateConfig, keys: Mapping[str, str]) -> str:
    """The content key of a sentence's English translation with the model `tr` names for its language (`keys`: the
    section's `model_keys`)."""
    return translation_key(sentence_key, PIVOT_LANG, keys[tr.to_english[lang]], tr.num_beams, tr.max_length)


def model_path(pipe: Pipeline, model: str) -> str:
    """Where a model the translate section names loads from: a path resolved against the config's directory, else
    the hub id as it is."""
    return str(pipe.resolve_path(model)) if looks_like_path(model) else model


def translator_spec(pipe: Pipeline, model: str) -> TranslatorSpec:
    """How a model the translate section names (hub id or directory, as configured) loads: a path resolved against
    the config's directory, the section's generation settings."""
    tr = pipe.spec.translate
    assert tr is not None
    return TranslatorSpec(model_path(pipe, model), tr.batch_size,
                          tr.num_beams, tr.max_length, tr.device, tr.batch_budget, configured=model)
