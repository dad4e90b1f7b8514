"""Augment task: kNN silver pairs of a pairs dataset (`augmented_pairs`)."""

from __future__ import annotations

from prefect import task

from amrsim.config import LoadedConfig
from amrsim.stages.augment import augment_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS


@task(name="augment", **TASK_OPTIONS)
def augment(cfg: LoadedConfig, pipeline: str, dataset: str, run_id: str) -> dict[str, object]:
    aug = cfg.project.pipelines[pipeline].augment
    assert aug is not None
    return augment_stage(Warehouse(cfg.warehouse_root), pipeline, dataset, aug, run_id).summary()
