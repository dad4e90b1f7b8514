"""Encode task: embeddings for one dataset and encoder, only for sentences not yet cached."""

from __future__ import annotations

from prefect import task

from amrsim.config import Pipeline
from amrsim.console import progress_bar
from amrsim.stages.encode import encode_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS, told


@task(name="encode", **TASK_OPTIONS)
def encode(pipe: Pipeline, dataset: str, encoder: str, run_id: str) -> dict[str, object]:
    what = f"encode {dataset} with {encoder}"

    def work() -> dict[str, object]:
        total = Warehouse(pipe.warehouse_root).read(dataset, "sentences", columns=["key"]).height
        with progress_bar(total, what) as advance:
            return encode_stage(pipe, dataset, encoder, run_id, on_progress=advance, on_plan=advance.plan).summary()

    return told(what, work)
