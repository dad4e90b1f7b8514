"""The `eval/results` table: one row per `Score`, keyed on its identity and inputs, the latest row per result, and
older tables brought up to date."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from amrsim.encoders import is_latest_name, list_trained, models_root_default, parse_name, run_name
from amrsim.evaluate import UNDEFINED, Score
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.schemas import SCHEMAS

EVAL = "eval"
RESULTS = "results"
GROUP = ["task", "model", "dataset", "split", "lang_pair", "metric"]  # one result; its latest row counts
REQUIRED = ("model", "dataset", "split", "lang_pair", "metric", "value")

# the one results schema (amrsim.warehouse.schemas) as polars dtypes, for frames built or read here
RESULT_SCHEMA: dict[str, pl.DataType] = dict(pl.from_arrow(SCHEMAS[RESULTS].empty_table()).schema)  # type: ignore[union-attr]


def row_key(task: str, model: str, dataset: str, split: str, lang_pair: str, metric: str,
            key_parts: Iterable[object] = ()) -> str:
    return content_key("result", task, model, dataset, split, lang_pair, metric, *key_parts)


def score_rows(scores: Sequence[Score], run_id: str, config_hash: str, key_parts: Iterable[object] = (),
               models_root: Path | str | None = None) -> pl.DataFrame:
    """Rows for `eval/results`; the key hashes the score's identity plus `key_parts` (model id, input keys), so an
    unchanged evaluation maps to the same key and is not appended twice. `model` names the run a trained model's
    `<method>:latest` resolves to (under `models_root`); `model_requested` keeps the name asked for."""
    now = datetime.now(UTC)
    parts = list(key_parts)
    names = {s.model: run_name(s.model, models_root) for s in scores}
    rows = [{"key": row_key(s.task, names[s.model], s.dataset, s.split, s.lang_pair, s.metric, parts),
             "run_id": run_id, "created_at": now, "task": s.task, "model": names[s.model], "dataset": s.dataset,
             "split": s.split, "lang_pair": s.lang_pair, "metric": s.metric, "value": s.value, "n": s.n,
             "config_hash": config_hash, "model_requested": s.model} for s in scores]
    return pl.DataFrame(rows, schema=RESULT_SCHEMA)


def stored_rows(wh: Warehouse, keys: Sequence[str]) -> pl.DataFrame | None:
    """The stored result rows with these keys, or None unless every one is there (then nothing is recomputed)."""
    found = wh.read(EVAL, RESULTS).filter(pl.col("key").is_in(list(keys)))
    return found if keys and found.height == len(keys) else None


def latest_results(results: pl.DataFrame) -> pl.DataFrame:
    """The most recent row (by created_at) of each (task, model, dataset, split, lang_pair, metric), with the
    standard results columns: a missing `task` is inferred (only STS wrote results before it existed), other
    missing columns are null, NaN values become null (undefined). Sorted by the group columns."""
    missing = [c for c in REQUIRED if c not in results.columns]
    if results.height == 0 and missing:
        return pl.DataFrame(schema=RESULT_SCHEMA)
    if missing:
        raise ValueError(f"results frame lacks required columns: {', '.join(missing)}")
    frame = results.with_row_index("_order")
    for name, dtype in RESULT_SCHEMA.items():
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=dtype).alias(name))
    inferred = pl.when(pl.col("metric").is_in(["spearman", "pearson"])).then(pl.lit("sts")).otherwise(
        pl.lit("unknown"))
    frame = frame.with_columns(
        pl.coalesce(pl.col("task").cast(pl.String), inferred).alias("task"),
        pl.col("value").cast(pl.Float64).fill_nan(None).alias("value"),
    )
    frame = frame.sort(["created_at", "_order"], nulls_last=False).unique(subset=GROUP, keep="last",
                                                                           maintain_order=True)
    return frame.select(list(RESULT_SCHEMA)).sort(GROUP)


def fmt_value(value: float | None, metric: str = "") -> str:
    """How a result prints: 2 decimals (scores are x 100), `undefined` for null/NaN, never 0 or nan."""
    if value is None or not math.isfinite(value):
        return UNDEFINED
    if metric in ("C", "threshold"):
        return f"{value:.4g}"
    return f"{value:.2f}"


def run_at(name: str, when: datetime | None, models_root: Path | str | None = None) -> str | None:
    """The run `<method>:latest` named at time `when`: the newest run created at or before it (None if none)."""
    root = Path(models_root) if models_root is not None else models_root_default()
    method = parse_name(name).method
    best = None
    for run in list_trained(root).get(method, []):  # oldest first
        created = json.loads((root / method / run / "model.json").read_text(encoding="utf-8")).get("created_at")
        try:
            stamp = datetime.fromisoformat(str(created))
        except ValueError:
            continue
        stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
        if when is None or stamp <= when:
            best = f"{method}:{run}"
    return best


def migrate_results(wh: Warehouse) -> tuple[int, int]:
    """Bring an `eval/results` table written before result rows named their run up to date, in one commit: adds
    `model_requested` (the name as stored) and renames `<method>:latest` rows to the run that was newest when the
    row was stored. Keys stay as they were. Returns (rows renamed, rows left as `:latest` because no run of that
    method is old enough, e.g. it was deleted); (0, 0) and no commit when there is nothing more to do."""
    counts = [0, 0]

    def change(rows: pl.DataFrame) -> pl.DataFrame | None:
        # an older table that gained the column through an append has it null on its old rows
        unnamed = rows["model_requested"].null_count() if "model_requested" in rows.columns else rows.height
        if "model_requested" not in rows.columns:
            rows = rows.with_columns(model_requested=pl.lit(None, pl.String))
        rows = rows.with_columns(pl.coalesce("model_requested", "model").alias("model_requested"))
        cache: dict[tuple[str, datetime | None], str | None] = {}
        named = []
        for model, created in zip(rows["model"].to_list(), rows["created_at"].to_list(), strict=True):
            if not is_latest_name(model):
                named.append(model)
                continue
            if (model, created) not in cache:
                cache[(model, created)] = run_at(model, created, wh.models_root)
            resolved = cache[(model, created)]
            counts[0 if resolved else 1] += 1
            named.append(resolved or model)
        if not unnamed and not counts[0]:  # migrated before; rows still `:latest` cannot be resolved
            counts[1] = 0
            return None
        return rows.with_columns(pl.Series("model", named, pl.String))

    wh.rewrite(EVAL, RESULTS, change)
    return counts[0], counts[1]
