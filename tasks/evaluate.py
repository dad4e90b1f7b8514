"""Evaluation tasks: STS on the pipeline's pair datasets, the other configured evaluations, and the report."""

from __future__ import annotations

import polars as pl
from prefect import task

from amrsim.config import Pipeline
from amrsim.stages.evaluate import pipeline_sts, run_suite
from amrsim.stages.evaluate import write_report as render_report
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS


@task(name="evaluate-sts", **TASK_OPTIONS)
def evaluate_sts(pipe: Pipeline, run_id: str) -> tuple[dict[str, object], pl.DataFrame]:
    run, results = pipeline_sts(Warehouse(pipe.warehouse_root), pipe, run_id)
    return run.summary(), results


@task(name="evaluate-suite", **TASK_OPTIONS)
def evaluate_others(pipe: Pipeline, run_id: str) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """bitext, transfer and aspects as configured (STS runs in its own task)."""
    out = run_suite(Warehouse(pipe.warehouse_root), pipe, run_id=run_id, sts=False, report=False)
    return out.tables, out.notes


@task(name="report", **TASK_OPTIONS)
def write_report(pipe: Pipeline) -> str:
    return str(render_report(Warehouse(pipe.warehouse_root)).html)
