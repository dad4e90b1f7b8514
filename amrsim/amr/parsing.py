"""Text to AMR over a table: pick the backend per language, parse each distinct text once, keep every row.

Backends are built once per process (`parser_for`), so Ray workers and batches reuse a loaded spaCy pipeline or
seq2seq model. A row's result never depends on its batch: backends are deterministic per sentence.
"""

from __future__ import annotations

import time
from functools import lru_cache

import polars as pl

from amrsim.amr.backends import BACKENDS, AMRParser, ParseResult, ParserSpec
from amrsim.amr.graph import AMRError
from amrsim.amr.linearize import linearize
from amrsim.warehouse import FAILED, OK
from amrsim.warehouse.lineage import BATCH_BUDGET

__all__ = ["ParserSpec", "linearized_column", "parse_frame", "parse_texts", "parser_for"]


@lru_cache(maxsize=8)
def parser_for(spec: ParserSpec) -> AMRParser:
    build = BACKENDS[spec.backend].build if spec.backend in BACKENDS else None
    if build is None:
        raise ValueError(f"unknown parser backend '{spec.backend}': use one of "
                         f"{', '.join(n for n, b in BACKENDS.items() if b.build)}")
    return build(spec)


def parse_texts(spec: ParserSpec, texts: list[str]) -> tuple[list[ParseResult], float]:
    """Parse distinct texts with one backend; results in input order and the seconds per sentence."""
    t0 = time.perf_counter()
    results = parser_for(spec).parse(texts) if texts else []
    return results, (time.perf_counter() - t0) / max(1, len(texts))


def parse_frame(frame: pl.DataFrame, specs: dict[str, ParserSpec], linearize: str | None = "paper") -> pl.DataFrame:
    """`frame` has `parsed_text` and `parse_lang` (the language actually parsed); adds penman, status, error,
    seconds, `linearized` and `batch_budget` (the GPU batch budget, for the stage's lineage). Rows whose parse_lang
    has no spec, or whose text is empty, fail with the reason."""
    penman: list[str | None] = [None] * frame.height
    status = [FAILED] * frame.height
    error: list[str | None] = ["no parser configured"] * frame.height
    seconds: list[float | None] = [None] * frame.height
    budgets: list[int | None] = [None] * frame.height  # the GPU batch budget after the rows ran (null: fixed)
    texts, langs = frame["parsed_text"].to_list(), frame["parse_lang"].to_list()
    for lang in sorted({lang for lang in langs if lang is not None}):
        rows = [i for i, lg in enumerate(langs) if lg == lang]
        if lang not in specs:
            for i in rows:
                error[i] = f"no parser for language '{lang}'"
            continue
        distinct = list(dict.fromkeys(texts[i] or "" for i in rows))
        results, per_sentence = parse_texts(specs[lang], distinct)
        by_text = dict(zip(distinct, results, strict=True))
        budget = getattr(parser_for(specs[lang]), "budget", None)
        for i in rows:
            r = by_text[texts[i] or ""]
            penman[i], status[i], error[i], seconds[i] = r.penman, r.status, r.error, per_sentence
            budgets[i] = budget.tokens if budget else None
    out = frame.with_columns(pl.Series("penman", penman, pl.String), pl.Series("status", status, pl.String),
                             pl.Series("error", error, pl.String), pl.Series("seconds", seconds, pl.Float64),
                             pl.Series(BATCH_BUDGET, budgets, pl.Int64))
    return out.with_columns(pl.Series("linearized", linearized_column(penman, status, linearize), pl.String))


def linearized_column(graphs: list[str | None], status: list[str], variant: str | None) -> list[str | None]:
    if variant is None:
        return [None] * len(graphs)

    out: list[str | None] = []
    for g, s in zip(graphs, status, strict=True):
        try:
            out.append(linearize(g, variant=variant) if g and s == OK else None)
        except AMRError:
            out.append(None)
    return out
