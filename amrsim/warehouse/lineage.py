"""Lineage: one row per stage run and output table in `<root>/meta/lineage`, so every table version has a cause."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

import polars as pl

import amrsim
from amrsim.secrets import redact, redact_obj
from amrsim.warehouse.store import BrokenTable, Warehouse

META = "meta"
BATCH_BUDGET = "batch_budget"  # a generator's GPU batch budget, carried per row from the workers to the stage


@lru_cache(maxsize=1)
def code_version() -> str:
    """Package version plus the git commit (and '+dirty') when running from a checkout."""
    version = amrsim.__version__
    repo = Path(amrsim.__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return f"{version}+g{sha}{'.dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        return version


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


@dataclass
class StageRun:
    """Counts a stage fills in while it runs; recorded as lineage rows when the stage ends."""

    run_id: str
    pipeline: str
    stage: str
    dataset: str
    config_hash: str
    input_versions: dict[str, int | None] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)  # tables written, in order
    rows_in: int = 0
    rows_computed: int = 0
    rows_failed: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    status: str = "ok"
    error: str | None = None
    settings: dict[str, object] = field(default_factory=dict)  # chosen at run time, e.g. {"batch_budget": [...]}
    notes: list[str] = field(default_factory=list)  # warnings for the user beside the counts (ingest's failed rows)

    def wrote(self, table: str, changed: object = True) -> None:
        """Note that the stage changed `table` (listed once, in order), if `changed`."""
        if changed and table not in self.outputs:
            self.outputs.append(table)

    def take_budgets(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` without its `batch_budget` column (the GPU batch budgets its generators used, per row; null on
        the CPU), whose distinct values go to `settings["batch_budget"]`."""
        if BATCH_BUDGET not in frame.columns:
            return frame
        used = sorted(int(v) for v in frame[BATCH_BUDGET].drop_nulls().unique().to_list())
        if used:
            self.settings[BATCH_BUDGET] = sorted({*self.settings.get(BATCH_BUDGET, []), *used})  # type: ignore[misc]
        return frame.drop(BATCH_BUDGET)

    def summary(self) -> dict[str, object]:
        counts = {"stage": self.stage, "dataset": self.dataset, "rows_in": self.rows_in,
                  "computed": self.rows_computed, "failed": self.rows_failed, "rows_out": self.rows_out,
                  "seconds": round(self.seconds, 2), "status": self.status}
        return counts | ({"notes": self.notes} if self.notes else {})


@contextmanager
def record_stage(wh: Warehouse, run: StageRun) -> Iterator[StageRun]:
    """Time a stage and append its lineage rows, also when it raises (status 'error')."""
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    try:
        yield run
    except BaseException as e:
        # masked before the cut, so a token split at the cut is not left half visible
        run.status, run.error = "error", (redact(f"{type(e).__name__}: {e}") or "")[:2000]
        raise
    finally:
        run.seconds = time.perf_counter() - t0
        rows = []
        error, inputs = redact(run.error), json.dumps(redact_obj(run.input_versions), sort_keys=True)
        for table in run.outputs or [""]:
            try:
                output_version = wh.version(run.dataset, table) if table else None
            except BrokenTable:  # the stage's own error names the table; its lineage row is still recorded
                output_version = None
            rows.append({
                "run_id": run.run_id, "pipeline": run.pipeline, "stage": run.stage, "dataset": run.dataset,
                "table": table, "input_versions": inputs,
                "output_version": output_version,
                "config_hash": run.config_hash, "code_version": code_version(), "rows_in": run.rows_in,
                "rows_computed": run.rows_computed, "rows_failed": run.rows_failed, "rows_out": run.rows_out,
                "seconds": run.seconds, "started_at": started, "status": run.status, "error": error,
                "settings": json.dumps(run.settings, sort_keys=True) if run.settings else None,
            })
        wh.append(META, "lineage", pl.DataFrame(rows, schema_overrides={"output_version": pl.Int64}))


def last_runs(wh: Warehouse, limit: int = 10) -> pl.DataFrame:
    frame = wh.read(META, "lineage")
    if not frame.height:
        return frame
    return frame.sort("started_at", descending=True).head(limit)
