"""Ingest task: sync a dataset's canonical tables with its source file."""

from __future__ import annotations

from prefect import task

from amrsim.config import LoadedConfig
from amrsim.stages.ingest import ingest_dataset
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS


@task(name="ingest", **TASK_OPTIONS)
def ingest(cfg: LoadedConfig, pipeline: str, dataset: str, run_id: str) -> dict[str, object]:
    return ingest_dataset(Warehouse(cfg.warehouse_root), cfg, pipeline, dataset, run_id).summary()
