"""train flow: run one method (or each `train` entry of the pipeline) on pinned warehouse tables."""

from __future__ import annotations

from typing import Any

from prefect import flow

from amrsim.warehouse.lineage import new_run_id
from flows.common import load
from tasks.train import train as train_task


@flow(name="train", validate_parameters=True)
def train(method: str | None = None, pipeline: str | None = None, config: str = "pipelines.yaml",
          overrides: dict[str, Any] | None = None, run_id: str | None = None) -> list[dict[str, Any]]:
    cfg, name = load(config, pipeline, overrides)
    run_id = run_id or new_run_id()
    entries = cfg.project.pipelines[name].train
    jobs = [(method, {})] if method else [(t.method, t.params) for t in entries]
    return [train_task(cfg, name, m, params, run_id) for m, params in jobs]
