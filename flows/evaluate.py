"""evaluate flow: the pipeline's evaluations, then the report; returns stage summaries, result rows, report path."""

from __future__ import annotations

from typing import Any

import polars as pl
from prefect import flow

from amrsim.warehouse.lineage import new_run_id
from flows.common import Overrides, load, publish_summary
from tasks.evaluate import evaluate_others, evaluate_sts, write_report


@flow(name="evaluate", validate_parameters=True)
def evaluate(pipeline: str | None = None, config: str = "pipelines.yaml",
             overrides: Overrides = None, run_id: str | None = None) -> dict[str, Any]:
    cfg, name = load(config, pipeline, overrides)
    pipe = cfg.section(name)
    run_id = run_id or new_run_id()
    ev = pipe.spec.evaluate
    stages, results, tables, notes, report = [], [], {}, [], None
    if ev and ev.sts:
        summary, rows = evaluate_sts(pipe, run_id)
        stages.append(summary)
        results.append(rows)
    if ev and (ev.bitext or ev.transfer or ev.aspects):
        tables, notes = evaluate_others(pipe, run_id)
    if ev and ev.report:
        report = write_report(pipe)
    publish_summary("evaluate", name, run_id, stages)
    frame = pl.concat(results, how="vertical_relaxed") if results else pl.DataFrame()
    return {"stages": stages, "results": frame, "tables": tables, "notes": notes, "report": report}
