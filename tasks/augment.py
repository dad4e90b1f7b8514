"""Augment task: kNN silver pairs of a pairs dataset (`augmented_pairs`)."""

from __future__ import annotations

from prefect import task

from amrsim.config import Pipeline
from amrsim.stages.augment import augment_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS


@task(name="augment", **TASK_OPTIONS)
def augment(pipe: Pipeline, dataset: str, run_id: str) -> dict[str, object]:
    assert pipe.spec.augment is not None
    return augment_stage(Warehouse(pipe.warehouse_root), pipe.name, dataset, pipe.spec.augment, run_id).summary()
