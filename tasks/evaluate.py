"""Evaluation tasks: STS on the pipeline's pair datasets, the other configured evaluations, and the report."""

from __future__ import annotations

import polars as pl
from prefect import task

from amrsim.config import Pipeline
from amrsim.console import log
from amrsim.stages.evaluate import pipeline_sts, run_suite
from amrsim.stages.evaluate import write_report as render_report
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS, told


@task(name="evaluate-sts", **TASK_OPTIONS)
def evaluate_sts(pipe: Pipeline, run_id: str) -> tuple[dict[str, object], pl.DataFrame]:
    def work() -> tuple[dict[str, object], pl.DataFrame]:
        run, results = pipeline_sts(Warehouse(pipe.warehouse_root), pipe, run_id)
        return run.summary(), results

    return told("evaluate sts", work)


@task(name="evaluate-suite", **TASK_OPTIONS)
def evaluate_others(pipe: Pipeline, run_id: str) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """bitext, transfer and aspects as configured (STS runs in its own task)."""
    out = told("evaluate suite", lambda: run_suite(Warehouse(pipe.warehouse_root), pipe, run_id=run_id, sts=False,
                                                   report=False))
    for note in out.notes:  # rows left out, evaluations skipped: printed after the tables by `amrsim run`
        log.warning("%s", note)
    return out.tables, out.notes


@task(name="report", **TASK_OPTIONS)
def write_report(pipe: Pipeline) -> str:
    return told("report", lambda: str(render_report(Warehouse(pipe.warehouse_root)).html))
