"""evaluate flow: the pipeline's evaluation stages; returns stage summaries and the results rows."""

from __future__ import annotations

from typing import Any

import polars as pl
from prefect import flow

from amrsim.warehouse.lineage import new_run_id
from flows.common import load
from tasks.evaluate import evaluate_sts


@flow(name="evaluate", validate_parameters=True)
def evaluate(pipeline: str | None = None, config: str = "pipelines.yaml",
             overrides: dict[str, Any] | None = None, run_id: str | None = None) -> dict[str, Any]:
    cfg, name = load(config, pipeline, overrides)
    run_id = run_id or new_run_id()
    pipe = cfg.project.pipelines[name]
    stages, results = [], []
    if pipe.evaluate and pipe.evaluate.sts:
        summary, rows = evaluate_sts(cfg, name, run_id)
        stages.append(summary)
        results.append(rows)
    frame = pl.concat(results, how="vertical_relaxed") if results else pl.DataFrame()
    return {"stages": stages, "results": frame}
