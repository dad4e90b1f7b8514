"""What every training method shares: where a run lives, what it was trained on, how it reports."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel

from amrsim.config import Pipeline
from amrsim.encoders import resolves_inside
from amrsim.errors import ConfigError, WarehouseError
from amrsim.files import atomic_json, atomic_write
from amrsim.methods.portable import portable_record
from amrsim.secrets import redact_obj
from amrsim.warehouse import OK, Warehouse
from amrsim.warehouse.keys import config_hash, content_key
from amrsim.warehouse.lineage import StageRun, record_stage

METHOD_RE = re.compile(r"^[a-z][a-z0-9_]*$")
# run ids become directories under warehouse/models/<method>/: no '/', no '..', nothing hidden
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
SAMPLED_OUT = "over max_pairs (sampled out)"  # rows left out by a `max_pairs` sample: a choice, not a failure


def check_run_name(method: str, run_id: str) -> None:
    """Method names and run ids are single path components (`--run-id ../../x` cannot leave the models root)."""
    if not METHOD_RE.fullmatch(method):
        raise WarehouseError(f"invalid method name '{method}': must match {METHOD_RE.pattern}")
    if not RUN_ID_RE.fullmatch(run_id):
        raise WarehouseError(f"invalid run id '{run_id}': must match {RUN_ID_RE.pattern} (letters, digits, '_', "
                             f"'-', '.'; no '/')")


def run_dir(wh: Warehouse, method: str, run_id: str) -> Path:
    """`<models root>/<method>/<run_id>`, checked to lie inside the models root (also through symlinks)."""
    check_run_name(method, run_id)
    path = wh.models_root / method / run_id

    if not resolves_inside(wh.models_root, path):
        raise WarehouseError(f"model directory '{method}/{run_id}' resolves outside {wh.models_root}")
    return path


def table_versions(wh: Warehouse, datasets: Iterable[str], tables: Iterable[str]) -> dict[str, int | None]:
    """`<dataset>.<table>` -> Delta version read: pins a model to the exact data it saw (recorded in model.json)."""
    tables = list(tables)
    return {f"{d}.{t}": wh.version(d, t) for d in datasets for t in tables if wh.exists(d, t)}


def read_pinned(wh: Warehouse, versions: dict[str, int | None], dataset: str, table: str,
                split: str | None = None) -> pl.DataFrame:
    """`dataset.table` at the version the run pinned (`versions`; else the latest), the rows of `split` (None: all)."""
    frame = wh.read(dataset, table, version=versions.get(f"{dataset}.{table}"))
    return frame.filter(pl.col("split") == split) if split else frame


def score_range(pipe: Pipeline, dataset: str, pairs: Callable[[], pl.DataFrame], error: str) -> tuple[float, float]:
    """A dataset's gold range: its `score_range` in the config, else the least and greatest score of its ok pairs
    (`pairs()`, read only then); a ConfigError saying `error` where they give no range."""
    ds = pipe.spec.datasets.get(dataset)
    if ds is not None and ds.score_range is not None:
        return float(ds.score_range[0]), float(ds.score_range[1])
    scores = pairs().filter(pl.col("status") == OK)["score"].drop_nulls()
    if scores.len() < 2 or scores.min() == scores.max():
        raise ConfigError(error)
    return float(scores.min()), float(scores.max())  # type: ignore[arg-type]


def sampled(frame: pl.DataFrame, cap: int | None, seed: int, left_out: dict[str, int] | None = None,
            reason: str = SAMPLED_OUT) -> pl.DataFrame:
    """`frame`, or a seeded sample of `cap` of its rows; the rows left out are counted under `reason` in `left_out`."""
    if cap is None or frame.height <= cap:
        return frame
    if left_out is not None:
        left_out[reason] = left_out.get(reason, 0) + frame.height - cap
    return frame.sample(cap, seed=seed, shuffle=True)


def _interrupted(path: Path) -> bool:
    """A checkpoint and no finished model: no model.json, or one whose metrics say `completed: false` (MSE-AMR
    writes the weights it has when stopped early)."""
    if not (path.is_dir() and any((path / c).exists() for c in ("checkpoint", "checkpoint.old"))):
        return False
    try:
        meta = json.loads((path / "model.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    metrics = meta.get("metrics") if isinstance(meta, dict) else None
    return isinstance(metrics, dict) and metrics.get("completed") is False


def unfinished_runs(wh: Warehouse, method: str) -> list[str]:
    """Run ids of `method` with a checkpoint but no model.json (interrupted), newest first."""
    root = wh.models_root / method
    if not root.is_dir():
        return []
    runs = [d for d in root.iterdir() if _interrupted(d)]
    return [d.name for d in sorted(runs, key=lambda d: d.stat().st_mtime, reverse=True)]


def is_unfinished(wh: Warehouse, method: str, run_id: str) -> bool:
    """Whether run `method:run_id` was interrupted (a checkpoint, no model.json): training it again resumes it."""
    return _interrupted(run_dir(wh, method, run_id))


def add_to_model_json(model_dir: Path, extra: dict[str, Any]) -> None:
    """Merge `extra` into a finished run's model.json (atomically)."""
    path = model_dir / "model.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta.update(portable_record(redact_obj(extra), model_dir))
    atomic_json(path, meta)


def train_summary(method: str, run_id: str, rows_in: int, rows_used: int, skipped: int, started: float,
                  completed: bool, **extra: Any) -> dict[str, Any]:
    """A stage summary (as the other stages return) plus the model name and whatever the method adds."""
    return {"stage": f"train:{method}", "dataset": "models", "rows_in": rows_in, "computed": rows_used,
            "failed": skipped, "rows_out": rows_used, "seconds": round(time.perf_counter() - started, 2),
            "status": "ok" if completed else "partial", "model": f"{method}:{run_id}", **extra}


def training_run(wh: Warehouse, pipeline: str, method: str, run_id: str, params: BaseModel) -> Any:
    """The lineage record of a training run (`meta.lineage`, stage `train:<method>`); use as a context manager and
    fill rows_in / rows_computed / input_versions."""

    check_run_name(method, run_id)  # before any lineage row or file is written
    return record_stage(wh, StageRun(run_id=run_id, pipeline=pipeline, stage=f"train:{method}", dataset="models",
                                     config_hash=config_hash(params.model_dump(mode="json"))))


class TrainingStage:
    """The skeleton of a method's stage (`train(pipe, params, run_id) -> summary`): the timer, the warehouse, the run
    directory (`out_dir`), the lineage record (`record`) and the summary. A stage checks its config, reads and trains
    inside `record`, and says what it read (`versions`), counted (`count`) and how far its core got (`done`)."""

    def __init__(self, pipe: Pipeline, method: str, run_id: str) -> None:
        self.started, self.pipe, self.method, self.run_id = time.perf_counter(), pipe, method, run_id
        self.wh = Warehouse(pipe.warehouse_root)
        self.out_dir = self.wh.models_root / method / run_id  # checked by `record`
        self.versions: dict[str, int | None] = {}  # the table versions read (lineage's input_versions)
        self.rows_in = self.rows_used = self.failed = 0
        self.rows_out: int | None = None  # None: rows_used once completed, else 0
        self.completed = False
        self.core: dict[str, Any] = {}  # the core's steps, total_steps and resumed_from (`done`), for the summary

    @contextmanager
    def record(self, params: BaseModel, datasets: Iterable[str] = (), tables: Iterable[str] = ()
               ) -> Iterator[dict[str, int | None]]:
        """The run's lineage (its versions and counts, also when it raises); yields the versions of `tables` of
        `datasets`, pinned."""
        with training_run(self.wh, self.pipe.name, self.method, self.run_id, params) as run:
            try:
                self.out_dir = run_dir(self.wh, self.method, self.run_id)
                self.versions = table_versions(self.wh, datasets, tables)
                yield self.versions
            finally:
                run.input_versions = self.versions
                run.rows_in, run.rows_computed, run.rows_failed = self.rows_in, self.rows_used, self.failed
                run.rows_out = self.rows_out if self.rows_out is not None else self.rows_used if self.completed else 0

    def count(self, rows_in: int, rows_used: int, failed: int) -> None:
        """Rows read, trained on (lineage's rows_computed) and left out for a failure."""
        self.rows_in, self.rows_used, self.failed = rows_in, rows_used, failed

    def done(self, result: dict[str, Any]) -> dict[str, Any]:
        """The core's result, returned: whether it completed; its steps, total_steps and resumed_from."""
        self.completed = result["completed"]
        self.core = {k: result[k] for k in ("steps", "total_steps", "resumed_from")}
        return result

    def summary(self, **extra: Any) -> dict[str, Any]:
        """`train_summary`: model_dir and the core's steps, then `extra` (which may replace them)."""
        return train_summary(self.method, self.run_id, self.rows_in, self.rows_used, self.failed, self.started,
                             self.completed, **{"model_dir": str(self.out_dir), **self.core, **extra})


REQUEST = "request.json"  # what a finished run was asked to do: its key, for incremental reruns


def request_key(wh: Warehouse, method: str, params: BaseModel) -> str:
    """Method, params and the versions of every table of the datasets the method reads: equal keys, equal run."""
    names = {d for _, d in params.dataset_refs()}
    versions = {f"{d}.{t}": wh.version(d, t) for d, t in wh.tables() if d in names}
    return content_key("train", method, params.model_dump(mode="json"), sorted(versions.items()))


def finished_run_with(wh: Warehouse, method: str, key: str, prefer: str | None = None) -> dict[str, Any] | None:
    """The summary of a finished run of `method` made with `key` (run `prefer` first, when it is one), marked as
    reused, or None."""
    root = wh.models_root / method
    requests = sorted(root.glob(f"*/{REQUEST}"), key=lambda p: (p.parent.name != prefer, p)) if root.is_dir() else []
    for request in requests:
        saved = json.loads(request.read_text(encoding="utf-8"))
        if saved.get("key") == key and (request.parent / "model.json").exists():
            summary = {**saved["summary"], "model_dir": str(request.parent)}  # stored relative to the run
            return {**summary, "computed": 0, "failed": 0, "seconds": 0.0, "status": "ok (reused)"}
    return None


def write_request(wh: Warehouse, method: str, run_id: str, key: str, summary: dict[str, Any],
                  params: BaseModel | None = None) -> None:
    """A finished run's request.json: its request key, its summary and (given `params`) the params it trained with."""
    recorded = {"params": redact_obj(params.model_dump(mode="json"))} if params is not None else {}
    folder = run_dir(wh, method, run_id)  # the finished run's record, portable as its model.json is
    _write_json(folder / REQUEST, portable_record({"key": key, "summary": redact_obj(summary), **recorded}, folder))


# Params that say how one command runs, not what the run is: a resumed run takes them from its own command (the
# pipeline entry, then --param), never from the run's record. max_steps is where this command stops (the stored one
# would stop a resume where the first command did); device and workers are where it runs.
COMMAND_PARAMS = frozenset({"max_steps", "device", "workers"})


def record_started_params(wh: Warehouse, method: str, run_id: str, params: BaseModel) -> None:
    """Record the params run `run_id` starts with (request.json, `params`): an interrupted run resumes with them."""
    path = run_dir(wh, method, run_id)
    path.mkdir(parents=True, exist_ok=True)
    _write_json(path / REQUEST, {"params": redact_obj(params.model_dump(mode="json"))})


def forget_started_run(wh: Warehouse, method: str, run_id: str) -> None:
    """Undo `record_started_params` for a run that stopped before its first checkpoint (a config error, say): its
    request.json, and its directory when that leaves it empty."""
    path = run_dir(wh, method, run_id)
    if any((path / c).exists() for c in ("checkpoint", "checkpoint.old", "model.json")):
        return
    (path / REQUEST).unlink(missing_ok=True)
    try:
        path.rmdir()
    except OSError:  # other files (a log, a best model) stay, and so does the directory
        pass


def started_params(wh: Warehouse, method: str, run_id: str) -> dict[str, Any] | None:
    """The params run `run_id` was started with (all of them, defaults included), as its request.json records them;
    None for a run that has no record (started before amrsim recorded them)."""
    try:
        saved = json.loads((run_dir(wh, method, run_id) / REQUEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise WarehouseError(f"{run_dir(wh, method, run_id) / REQUEST}: unreadable ({e})") from None
    params = saved.get("params") if isinstance(saved, dict) else None
    return dict(params) if isinstance(params, dict) else None


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    text = json.dumps(doc, default=str) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
