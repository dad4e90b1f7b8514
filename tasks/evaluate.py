"""Evaluation tasks: STS on the pipeline's pair datasets, results appended to eval/results."""

from __future__ import annotations

import polars as pl
from prefect import task

from amrsim.config import LoadedConfig
from amrsim.stages import sts_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS


@task(name="evaluate-sts", **TASK_OPTIONS)
def evaluate_sts(cfg: LoadedConfig, pipeline: str, run_id: str) -> tuple[dict[str, object], pl.DataFrame]:
    pipe = cfg.project.pipelines[pipeline]
    assert pipe.evaluate and pipe.evaluate.sts
    enc = pipe.encode
    run, results = sts_stage(Warehouse(cfg.warehouse_root), pipeline, pipe.evaluate.sts, run_id,
                             batch_size=enc.batch_size if enc else 64, device=enc.device if enc else "auto")
    return run.summary(), results
