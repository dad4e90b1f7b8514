"""Ingest task: sync a dataset's canonical tables with its source file."""

from __future__ import annotations

from prefect import task

from amrsim.config import Pipeline
from amrsim.stages.ingest import ingest_stage
from tasks.common import TASK_OPTIONS, told


@task(name="ingest", **TASK_OPTIONS)
def ingest(pipe: Pipeline, dataset: str, run_id: str) -> dict[str, object]:
    return told(f"ingest {dataset}", lambda: ingest_stage(pipe, dataset, run_id).summary())
