"""One evaluation number and its row in `eval/results`; every evaluator (sts, bitext, transfer, aspects) returns
`Score`s so the warehouse, the console tables and the report treat them alike."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from amrsim.encoders import list_trained, models_root_default, run_name
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.schemas import SCHEMAS

# other amrsim modules is imported inside the functions: importing this module must stay cheap and free of import cycles

if TYPE_CHECKING:
    from amrsim.warehouse.store import Warehouse

EVAL = "eval"
RESULTS = "results"
UNDEFINED = "undefined"  # how a None value is printed: e.g. Spearman of constant predictions


@dataclass(frozen=True)
class Score:
    """`value` is None when the metric is undefined for the input (never 0 or NaN standing in for it)."""

    task: str  # sts | bitext | bucc | transfer | aspects
    model: str  # encoder name as given (minilm, muse, hf:..., <method>:<run id|latest>)
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


# the one results schema (amrsim.warehouse.schemas) as polars dtypes, for frames built or read here
RESULT_SCHEMA: dict[str, pl.DataType] = dict(pl.from_arrow(SCHEMAS[RESULTS].empty_table()).schema)  # type: ignore[union-attr]


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


def store_results(wh: Warehouse, rows: pl.DataFrame) -> int:
    """Append result rows (those whose key is new) and rewrite the model cards of the trained runs they name;
    returns the rows added."""
    added = wh.append_new(EVAL, RESULTS, rows)
    if added.num_rows:
        from amrsim.stages.train.card import refresh_cards

        refresh_cards(wh, added.column("model").to_pylist())
    return added.num_rows


def run_at(name: str, when: datetime | None, models_root: Path | str | None = None) -> str | None:
    """The run `<method>:latest` named at time `when`: the newest run created at or before it (None if none)."""
    root = Path(models_root) if models_root is not None else models_root_default()
    method = name.partition(":")[0]
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
            if not model.endswith(":latest"):
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
