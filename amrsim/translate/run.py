"""Translation over a table: one cached backend per (model, options) per process, every row kept."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

from amrsim.errors import ConfigError
from amrsim.translate import ENGLISH, Translator, model_key, translation_key
from amrsim.translate.marian import MarianTranslator
from amrsim.warehouse import FAILED, OK, Warehouse
from amrsim.warehouse.lineage import BATCH_BUDGET


@dataclass(frozen=True)
class TranslatorSpec:
    model: str  # hub id or local directory
    batch_size: int = 32
    num_beams: int = 4
    max_length: int = 256
    device: str = "auto"
    batch_budget: int | str | None = "auto"  # on CUDA: beam tokens per batch (auto: from free memory)
    configured: str | None = None  # the model as the config names it (for keys), when `model` is its resolved path

    @property
    def id(self) -> str:
        """The model's name in `translations.model`."""
        return self.configured or self.model

    @property
    def key(self) -> str:
        """The model's name in content keys: `id`, with a fingerprint of its files when it is a directory."""
        return model_key(self.id, self.model)


@lru_cache(maxsize=8)
def translator_for(spec: TranslatorSpec) -> Translator:
    return MarianTranslator(spec.model, device=spec.device, batch_size=spec.batch_size, num_beams=spec.num_beams,
                            max_length=spec.max_length, batch_budget=spec.batch_budget)


def translate_frame(frame: pl.DataFrame, specs: dict[str, TranslatorSpec]) -> pl.DataFrame:
    """`frame` has `source`, `source_lang`, `target_lang` and `model` (as configured; `specs` maps it to what
    loads); adds text, flags, status, error, seconds (per sentence) and `batch_budget` (the GPU batch budget, for
    the stage's lineage; not stored with the rows). Rows of a model without a spec fail."""
    n = frame.height
    text: list[str | None] = [None] * n
    flags: list[str | None] = [None] * n
    status = [FAILED] * n
    error: list[str | None] = [None] * n
    seconds: list[float | None] = [None] * n
    budgets: list[int | None] = [None] * n  # the GPU batch budget after the rows ran (null: fixed batches)
    sources, models = frame["source"].to_list(), frame["model"].to_list()
    directions = list(zip(frame["source_lang"].to_list(), frame["target_lang"].to_list(), strict=True))
    for model in sorted(set(models)):
        rows = [i for i, m in enumerate(models) if m == model]
        if model not in specs:
            for i in rows:
                error[i] = f"no translation model for {directions[i][0]}->{directions[i][1]} ('{model}' not loaded)"
            continue
        t0 = time.perf_counter()
        try:
            translator = translator_for(specs[model])
        except (OSError, ValueError) as e:  # a model that does not load: say which translation direction needs it
            pairs = ", ".join(sorted({f"{directions[i][0]}->{directions[i][1]}" for i in rows}))
            raise ConfigError(f"translate: model '{model}' for {pairs}: {e}") from None
        results = translator.translate([sources[i] or "" for i in rows])
        per = (time.perf_counter() - t0) / max(1, len(rows))
        budget = getattr(translator, "budget", None)  # after the rows ran: halved by any out-of-memory batch
        for i, r in zip(rows, results, strict=True):
            text[i], flags[i], status[i], error[i], seconds[i] = r.text, r.flags, r.status, r.error, per
            budgets[i] = budget.tokens if budget else None
    return frame.with_columns(pl.Series("text", text, pl.String), pl.Series("flags", flags, pl.String),
                              pl.Series("status", status, pl.String), pl.Series("error", error, pl.String),
                              pl.Series("seconds", seconds, pl.Float64),
                              pl.Series(BATCH_BUDGET, budgets, pl.Int64))


def english_translations(wh: Warehouse, dataset: str, frame: pl.DataFrame, specs: dict[str, TranslatorSpec]
                         ) -> dict[str, tuple[str | None, str | None]]:
    """English text (None when failed) and the reason per sentence of `frame` (key, lang, text) whose language has
    a spec: the `translations` row of that sentence, model and settings when the dataset has one, else translated
    now and stored there, so every later stage and rerun reuses it. Sentences of other languages are left out."""
    frame = frame.filter(pl.col("lang").is_in(list(specs)))
    if not frame.height:
        return {}
    model_keys = {lang: spec.key for lang, spec in specs.items()}
    keys = [translation_key(k, ENGLISH, model_keys[lang], specs[lang].num_beams, specs[lang].max_length)
            for k, lang in zip(frame["key"], frame["lang"], strict=True)]
    todo = frame.select(source_key="key", source_lang="lang", source="text").with_columns(
        key=pl.Series(keys, dtype=pl.String), target_lang=pl.lit(ENGLISH),
        model=pl.Series([specs[lang].id for lang in frame["lang"]], dtype=pl.String))
    stored = (wh.read(dataset, "translations", columns=["key", "text", "status", "error"]).filter(
        pl.col("key").is_in(keys) & (pl.col("status") == OK)) if wh.exists(dataset, "translations") else None)
    have = {} if stored is None else {k: (t, None) for k, t in zip(stored["key"], stored["text"], strict=True)}
    missing = todo.filter(~pl.col("key").is_in(list(have))).unique("key", maintain_order=True)
    if missing.height:
        done = translate_frame(missing, {spec.id: spec for spec in specs.values()})
        wh.upsert(dataset, "translations", done.drop(BATCH_BUDGET))  # (no stage here to record it in lineage)
        have.update({k: (t, e) for k, t, e in zip(done["key"], done["text"], done["error"], strict=True)})
    return {k: have[tk] for k, tk in zip(frame["key"], keys, strict=True)}
