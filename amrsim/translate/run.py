"""Translation over a table: one cached backend per (model, options) per process, every row kept."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

from amrsim.translate import FAILED, Translator


@dataclass(frozen=True)
class TranslatorSpec:
    model: str  # hub id or local directory
    batch_size: int = 32
    num_beams: int = 4
    max_length: int = 256
    device: str = "auto"


@lru_cache(maxsize=8)
def translator_for(spec: TranslatorSpec) -> Translator:
    from amrsim.translate.marian import MarianTranslator

    return MarianTranslator(spec.model, device=spec.device, batch_size=spec.batch_size, num_beams=spec.num_beams,
                            max_length=spec.max_length)


def translate_frame(frame: pl.DataFrame, specs: dict[str, TranslatorSpec]) -> pl.DataFrame:
    """`frame` has `source`, `source_lang`, `target_lang` and `model` (as configured; `specs` maps it to what
    loads); adds text, flags, status, error, seconds (per sentence). Rows of a model without a spec fail."""
    n = frame.height
    text: list[str | None] = [None] * n
    flags: list[str | None] = [None] * n
    status = [FAILED] * n
    error: list[str | None] = [None] * n
    seconds: list[float | None] = [None] * n
    sources, models = frame["source"].to_list(), frame["model"].to_list()
    directions = list(zip(frame["source_lang"].to_list(), frame["target_lang"].to_list(), strict=True))
    for model in sorted(set(models)):
        rows = [i for i, m in enumerate(models) if m == model]
        if model not in specs:
            for i in rows:
                error[i] = f"no translation model for {directions[i][0]}->{directions[i][1]} ('{model}' not loaded)"
            continue
        t0 = time.perf_counter()
        results = translator_for(specs[model]).translate([sources[i] or "" for i in rows])
        per = (time.perf_counter() - t0) / max(1, len(rows))
        for i, r in zip(rows, results, strict=True):
            text[i], flags[i], status[i], error[i], seconds[i] = r.text, r.flags, r.status, r.error, per
    return frame.with_columns(pl.Series("text", text, pl.String), pl.Series("flags", flags, pl.String),
                              pl.Series("status", status, pl.String), pl.Series("error", error, pl.String),
                              pl.Series("seconds", seconds, pl.Float64))
