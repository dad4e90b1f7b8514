"""One evaluation number and its row in `eval/results`; every evaluator (sts, bitext, transfer, aspects) returns
`Score`s so the warehouse, the console tables and the report treat them alike."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl

from amrsim.warehouse.keys import content_key

EVAL = "eval"
RESULTS = "results"
UNDEFINED = "undefined"  # how a None value is printed: e.g. Spearman of constant predictions


@dataclass(frozen=True)
class Score:
    """`value` is None when the metric is undefined for the input (never 0 or NaN standing in for it)."""

    task: str  # sts | bitext | bucc | transfer | aspects
    model: str  # encoder name as given (minilm, muse, hf:..., <method>:<run>)
    dataset: str
    split: str
    lang_pair: str  # "en-de", "deu-eng", "en" (transfer: the evaluation language), aspect name for aspects
    metric: str  # spearman, pearson, accuracy_src2tgt, f1, ...
    value: float | None
    n: int

    def __post_init__(self) -> None:
        if self.value is not None and not math.isfinite(self.value):
            object.__setattr__(self, "value", None)

    @property
    def shown(self) -> str:
        return UNDEFINED if self.value is None else f"{self.value:.2f}"


def row_key(task: str, model: str, dataset: str, split: str, lang_pair: str, metric: str,
            key_parts: Iterable[object] = ()) -> str:
    return content_key("result", task, model, dataset, split, lang_pair, metric, *key_parts)


def score_rows(scores: Sequence[Score], run_id: str, config_hash: str, key_parts: Iterable[object] = ()) -> \
        pl.DataFrame:
    """Rows for `eval/results`; the key hashes the score's identity plus `key_parts` (model id, input keys), so an
    unchanged evaluation maps to the same key and is not appended twice."""
    now = datetime.now(UTC)
    parts = list(key_parts)
    rows = [{"key": row_key(s.task, s.model, s.dataset, s.split, s.lang_pair, s.metric, parts),
             "run_id": run_id, "created_at": now, "task": s.task, "model": s.model, "dataset": s.dataset,
             "split": s.split, "lang_pair": s.lang_pair, "metric": s.metric, "value": s.value, "n": s.n,
             "config_hash": config_hash} for s in scores]
    return pl.DataFrame(rows, schema={
        "key": pl.String, "run_id": pl.String, "created_at": pl.Datetime("us", "UTC"), "task": pl.String,
        "model": pl.String, "dataset": pl.String, "split": pl.String, "lang_pair": pl.String, "metric": pl.String,
        "value": pl.Float64, "n": pl.Int64, "config_hash": pl.String})
