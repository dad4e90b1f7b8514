"""Training in the pipeline: one module per method (`stages/train/<name>.py`: read the pinned warehouse tables, call
the method's core in `amrsim.methods.<name>`, write `warehouse/models/<name>/<run_id>/`) on `common.py`'s skeleton
`TrainingStage` (`common.py` also: run directories, lineage, incremental reruns); model cards are
`amrsim.stages.evaluate.card`'s. `STAGES` (method -> its stage) is built from the registered `MethodSpec`s: a spec's
own `stage`, else the stage module of this package that declares the method (`LAYER_STAGES`: the methods package sits
below this layer and cannot name it)."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from amrsim.config import Pipeline
from amrsim.files import own_tree
from amrsim.methods import Derived, Stage, method_params, method_spec, specs
from amrsim.stages.evaluate.card import refresh_cards
from amrsim.stages.train import dueam, meaning, mse_amr, pear, s3bert
from amrsim.stages.train.common import (
    check_run_name,
    finished_run_with,
    forget_started_run,
    is_unfinished,
    record_started_params,
    request_key,
    run_dir,
    write_request,
)
from amrsim.warehouse import Warehouse
from amrsim.warehouse.lock import run_lock

# the stage modules of this layer (`train(pipe, params, run_id) -> summary`), by the method each declares (`METHOD`);
# a method whose spec brings its own `stage` (one outside amrsim) needs no entry
LAYER_STAGES: dict[str, ModuleType] = {m.METHOD: m for m in (s3bert, mse_amr, dueam, pear, meaning)}

__all__ = ["LAYER_STAGES", "STAGES", "stage_of", "train_method"]


def stage_of(method: str) -> Stage:
    """The stage that trains `method` in the pipeline (`train(pipe, params, run_id) -> summary`)."""
    spec = method_spec(method)
    if spec.stage is not None:
        return spec.stage
    if spec.name not in LAYER_STAGES:
        raise KeyError(f"training method '{method}' has no pipeline stage: give its MethodSpec a `stage`, or add its "
                       f"module in amrsim/stages/train/ to LAYER_STAGES")
    return LAYER_STAGES[spec.name].train  # read when called: a test may replace a module's `train`


# method name -> its stage, for every registered method (built from the specs each time it is read)
STAGES: Mapping[str, Stage] = Derived(lambda: {s.name: stage_of(s.name) for s in specs()})


def train_method(pipe: Pipeline, method: str, params: dict[str, Any] | BaseModel | None, run_id: str,
                 reuse: bool = True) -> dict[str, Any]:
    """Train `method` with `params` (a dict, validated here, or its Params) as run `run_id`; returns the stage
    summary. A finished run of the same request (method, params, input table versions) is reused unless `reuse`
    is False (a rerun to measure run-to-run variation, say). An interrupted `run_id` (a checkpoint, no model.json)
    is resumed, never replaced by another finished run. One training per run id at a time: a second one raises
    RunBusy naming the holder."""
    checked = method_params(method, params)
    check_run_name(method, run_id)
    wh = Warehouse(pipe.warehouse_root)
    with run_lock(wh.models_root, method, run_id):
        key = request_key(wh, method, checked)
        done = finished_run_with(wh, method, key, prefer=run_id) \
            if reuse and not is_unfinished(wh, method, run_id) else None
        if done is not None:  # same method, params and input table versions: nothing to train (incremental rerun)
            return done
        resuming = is_unfinished(wh, method, run_id)
        out_dir = run_dir(wh, method, run_id)
        own_tree(out_dir)  # before any work: nothing planted that a save would write through
        recorded = not resuming and not (out_dir / "model.json").exists()
        if recorded:  # a new run: the params it starts with, which a resume of it keeps
            record_started_params(wh, method, run_id, checked)
        try:
            summary = stage_of(method)(pipe, checked, run_id)
        except BaseException:
            if recorded:  # failed before its first checkpoint: nothing to resume, no run directory left for it
                forget_started_run(wh, method, run_id)
            raise
        if summary.get("status") == "ok":
            write_request(wh, method, run_id, key, summary, checked)
            refresh_cards(wh, summary.get("models") or [summary["model"]])
    return summary
