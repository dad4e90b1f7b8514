"""The parse stage: an AMR graph per sentence and parser, through English (given or machine-translated) for a
language without a parser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from amrsim.amr.backends import PROVIDED
from amrsim.config import PIVOT_LANG, ParseConfig, TranslateConfig
from amrsim.stages.translate import english_translation_key, model_keys
from amrsim.warehouse import FAILED, OK, Warehouse, config_hash, content_key
from amrsim.warehouse.lineage import StageRun, record_stage

PARSE_TODO_SCHEMA = {"key": pl.String, "sentence_key": pl.String, "lang": pl.String, "parser": pl.String,
                     "pivot_lang": pl.String, "pivot_source": pl.String, "parsed_text": pl.String,
                     "parse_lang": pl.String, "reason": pl.String}
GIVEN = "given"  # amr.pivot_source of a graph parsed from the English source the input gave


def machine_english(wh: Warehouse, dataset: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    """`translations` rows by key (text, status, error, model), for the English translations wanted."""
    if not keys or not wh.exists(dataset, "translations"):
        return {}
    rows = wh.read(dataset, "translations", columns=["key", "text", "status", "error", "model"]).filter(
        pl.col("key").is_in(keys))
    return {r["key"]: r for r in rows.iter_rows(named=True)}


def parse_todo(wh: Warehouse, dataset: str, parse: ParseConfig, parser_id: str,
               translate: TranslateConfig | None = None, where: Callable[[str], Path | str] = str) -> pl.DataFrame:
    """One row per ok sentence: the text actually parsed: the sentence; for a language without a parser, its given
    English source, else its English machine translation by the model `translate.to_english` names (`where`: where
    a configured model loads from, `model_path`). A row's key names the English it parses (the source sentence, the
    translation), so another source or model is a new graph; a row that cannot be parsed carries the reason, and
    its key says why, so a source that appears later gets a new key."""
    sentences = wh.read(dataset, "sentences", columns=["key", "lang", "text", "status"]).filter(pl.col("status") == OK)
    direct = parse.direct_langs()
    parallel = wh.read(dataset, "parallel").filter((pl.col("status") == OK) & (pl.col("source_lang") == PIVOT_LANG))
    english: dict[str, tuple[str, str]] = {}  # a translation's English source: the smallest key when it has several
    for target, key, text in parallel.sort("source_key").select("target_key", "source_key", "source").iter_rows():
        english.setdefault(target, (key, text))
    to_english = translate.to_english if translate is not None and parse.pivot else {}
    keys = model_keys(translate, where) if to_english and translate is not None else {}
    wanted = {key: english_translation_key(key, lang, translate, keys)  # type: ignore[arg-type]
              for key, lang in zip(sentences["key"], sentences["lang"], strict=True)
              if lang not in direct and lang in to_english and key not in english}
    machine = machine_english(wh, dataset, list(wanted.values()))
    rows = []
    for key, lang, text in zip(sentences["key"], sentences["lang"], sentences["text"], strict=True):
        parsed, parse_lang, pivot, source, reason, why = None, None, None, None, None, ()
        if lang in direct:
            parsed, parse_lang = text, lang
        elif not parse.pivot:
            reason = f"no {parse.backend} parser for '{lang}' (pivot: false)"
        elif PIVOT_LANG not in direct:
            pivot, reason = PIVOT_LANG, f"no {parse.backend} parser for '{lang}' nor for English to pivot through"
        elif key in english:
            parsed, parse_lang, pivot, source, why = english[key][1], PIVOT_LANG, PIVOT_LANG, GIVEN, (english[key][0],)
        elif key in wanted:
            pivot, source, row = PIVOT_LANG, to_english[lang], machine.get(wanted[key])
            if row is not None and row["status"] == OK:
                parsed, parse_lang, why = row["text"], PIVOT_LANG, (wanted[key],)
            elif row is not None:
                why = (wanted[key], "translation failed")
                reason = f"English translation of this '{lang}' sentence by {source} failed: {row['error']}"
            else:
                why = (wanted[key], "not translated")
                reason = (f"no English translation of this '{lang}' sentence by {source} yet (translate.to_english."
                          f"{lang}): run the translate stage")
        else:
            pivot, why = PIVOT_LANG, ("no English source",)
            reason = (f"no {parse.backend} parser for '{lang}' and no English source: give one (parallel columns) "
                      f"or set translate.to_english.{lang} to a model (e.g. Helsinki-NLP/opus-mt-{lang}-en)")
        rows.append({"key": content_key("amr", key, parser_id, pivot or "", parse.linearize, *why),
                     "sentence_key": key, "lang": lang, "parser": parser_id, "pivot_lang": pivot,
                     "pivot_source": source, "parsed_text": parsed, "parse_lang": parse_lang, "reason": reason})
    return pl.DataFrame(rows, schema=PARSE_TODO_SCHEMA)


def parse_stage(wh: Warehouse, pipeline: str, dataset: str, parse: ParseConfig, parser_id: str, run_id: str,
                parse_batches: Callable[..., pl.DataFrame],
                translate: TranslateConfig | None = None, where: Callable[[str], Path | str] = str,
                on_progress: Callable[[int], None] | None = None,
                on_plan: Callable[[int, int], None] | None = None) -> StageRun:
    """AMR graphs for a dataset's sentences lacking one from this parser; `parse_batches` may distribute.
    `translate` (the pipeline's translate stage for this dataset) names the machine translations to pivot through
    (`where`: where its models load from, as for the translate stage).
    A sentence's earlier graphs from this parser with another key (another source text, model or setting) are
    removed once the new ones are in, so each sentence keeps one graph per parser. Progress: `on_plan(todo, done)`
    once the sentences to parse are known; `on_progress(rows)` for the rows that fail without parsing, and given to
    `parse_batches` as a keyword, which tells the rows it parses."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=f"parse:{parser_id}", dataset=dataset,
                   config_hash=config_hash({"parse": parse.model_dump(mode="json"),
                                            "to_english": translate.to_english if translate else {},
                                            "settings": [translate.num_beams, translate.max_length]
                                            if translate else []}))
    with record_stage(wh, run):
        run.input_versions = {t: wh.version(dataset, t) for t in ("sentences", "parallel", "translations")}
        todo = parse_todo(wh, dataset, parse, parser_id, translate, where)
        current = todo.select("key", "sentence_key")
        run.rows_in = todo.height
        # parsers are deterministic per sentence: a failed row would fail again, so failed keys count as done
        todo = todo.filter(~pl.col("key").is_in(list(wh.keys(dataset, "amr", ok_only=False))))
        unparsable = todo.filter(pl.col("reason").is_not_null()).select(
            pl.exclude("reason"), pl.lit(None, pl.String).alias("penman"), pl.lit(FAILED).alias("status"),
            pl.col("reason").alias("error"), pl.lit(None, pl.Float64).alias("seconds"),
            pl.lit(None, pl.String).alias("linearized"))
        runnable = todo.filter(pl.col("reason").is_null()).drop("reason")
        if on_plan is not None:
            on_plan(todo.height, run.rows_in - todo.height)
        progress = {"on_progress": on_progress} if on_progress is not None else {}
        # one commit per chunk: a crash loses at most the chunk in flight, and the rerun parses only the rest
        chunks = [unparsable] if unparsable.height else []
        chunks += [runnable.slice(i, parse.commit_rows) for i in range(0, runnable.height, parse.commit_rows)]
        for i, chunk in enumerate(chunks):
            rows = chunk if i == 0 and unparsable.height else run.take_budgets(parse_batches(chunk, **progress))
            if on_progress is not None and rows is chunk:
                on_progress(chunk.height)
            wh.upsert(dataset, "amr", rows.drop("parse_lang", strict=False))
            run.wrote("amr")
            run.rows_computed += rows.height
            run.rows_failed += rows.filter(pl.col("status") != OK).height
        if parser_id != PROVIDED and wh.exists(dataset, "amr"):  # graphs given in the input belong to ingest
            stored = wh.read(dataset, "amr", columns=["key", "sentence_key", "parser"]).filter(
                (pl.col("parser") == parser_id) & pl.col("sentence_key").is_in(current["sentence_key"].to_list()))
            stale = stored.filter(~pl.col("key").is_in(current["key"].to_list()))["key"].to_list()
            run.wrote("amr", wh.delete_keys(dataset, "amr", stale))
        run.rows_out = run.rows_computed
    return run
