"""Augment task: kNN silver pairs of a pairs dataset (`augmented_pairs`)."""

from __future__ import annotations

from prefect import task

from amrsim.config import Pipeline
from amrsim.stages.augment import augment_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS, told


@task(name="augment", **TASK_OPTIONS)
def augment(pipe: Pipeline, dataset: str, run_id: str) -> dict[str, object]:
    cfg = pipe.spec.augment
    assert cfg is not None
    return told(f"augment {dataset}", lambda: augment_stage(Warehouse(pipe.warehouse_root), pipe.name, dataset, cfg,
                                                             run_id).summary())
