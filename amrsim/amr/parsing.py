"""Text to AMR over a table: pick the backend per language, parse each distinct text once, keep every row.

Backends are built once per process (`parser_for`), so Ray workers and batches reuse a loaded spaCy pipeline or
seq2seq model. A row's result never depends on its batch: backends are deterministic per sentence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import polars as pl

from amrsim.amr.backends import FAILED, OK, AMRParser, ParseResult
from amrsim.amr.graph import AMRError
from amrsim.amr.linearize import linearize

# other amrsim modules are imported inside the functions: keeps this module cheap to import, free of cycles


@dataclass(frozen=True)
class ParserSpec:
    """Everything that builds a backend; `id` names it in the `amr.parser` column and in content keys."""

    backend: str  # ud | amrlib
    lang: str = "en"
    model_dir: str | None = None
    batch_size: int | None = None  # None: the backend's default (ud 1000 sentences, amrlib 16)
    num_beams: int = 4
    device: str = "auto"

    @property
    def id(self) -> str:
        if self.backend == "amrlib":
            return f"amrlib:{Path(self.model_dir or '').name}"
        return self.backend


DEFAULT_BATCH_SIZE = {"ud": 1000, "amrlib": 16}  # spaCy gains from big batches; a seq2seq beam batch is GPU memory


def batch_size_for(spec: ParserSpec) -> int:
    return spec.batch_size or DEFAULT_BATCH_SIZE.get(spec.backend, 64)


@lru_cache(maxsize=8)
def parser_for(spec: ParserSpec) -> AMRParser:
    if spec.backend == "ud":
        from amrsim.amr.ud import UDParser

        return UDParser(spec.lang, batch_size=batch_size_for(spec))
    if spec.backend == "amrlib":
        from amrsim.amr.amrlib_parser import AmrlibParser

        if not spec.model_dir:
            raise ValueError("backend amrlib needs a model directory")
        return AmrlibParser(spec.model_dir, device=spec.device, batch_size=batch_size_for(spec),
                            num_beams=spec.num_beams)
    raise ValueError(f"unknown parser backend '{spec.backend}': use ud or amrlib")


def parse_texts(spec: ParserSpec, texts: list[str]) -> tuple[list[ParseResult], float]:
    """Parse distinct texts with one backend; results in input order and the seconds per sentence."""
    t0 = time.perf_counter()
    results = parser_for(spec).parse(texts) if texts else []
    return results, (time.perf_counter() - t0) / max(1, len(texts))


def parse_frame(frame: pl.DataFrame, specs: dict[str, ParserSpec], linearize: str | None = "paper") -> pl.DataFrame:
    """`frame` has `parsed_text` and `parse_lang` (the language actually parsed); adds penman, status, error,
    seconds and `linearized`. Rows whose parse_lang has no spec, or whose text is empty, fail with the reason."""
    penman: list[str | None] = [None] * frame.height
    status = [FAILED] * frame.height
    error: list[str | None] = ["no parser configured"] * frame.height
    seconds: list[float | None] = [None] * frame.height
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
        for i in rows:
            r = by_text[texts[i] or ""]
            penman[i], status[i], error[i], seconds[i] = r.penman, r.status, r.error, per_sentence
    out = frame.with_columns(pl.Series("penman", penman, pl.String), pl.Series("status", status, pl.String),
                             pl.Series("error", error, pl.String), pl.Series("seconds", seconds, pl.Float64))
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
