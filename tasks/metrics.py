"""Metrics task: AMR graph metrics for a dataset's graph pairs, batches spread with the Ray helper."""

from __future__ import annotations

from functools import partial

from prefect import task

from amrsim.config import Pipeline
from amrsim.console import progress_bar
from amrsim.metrics.engine import PairScorer, score_pairs
from amrsim.stages.metrics import metrics_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS, spread, told
from tasks.ray_map import ray_wanted


@task(name="metrics", **TASK_OPTIONS)
def metrics(pipe: Pipeline, dataset: str, run_id: str) -> dict[str, object]:
    return told(f"metrics {dataset}", partial(_metrics, pipe, dataset, run_id))


def _metrics(pipe: Pipeline, dataset: str, run_id: str) -> dict[str, object]:
    m = pipe.spec.metrics
    assert m is not None
    options, wh = m.options(), Warehouse(pipe.warehouse_root)
    # the ok pairs bound the work; the stage plans it exactly once it has counted the pairs with both graphs
    with progress_bar(wh.count(dataset, "pairs", status="ok"), f"metrics {dataset}", unit="pairs") as advance:
        progress = {"on_progress": advance, "on_plan": advance.plan}
        if ray_wanted(pipe.spec.ray):
            score = spread(pipe, partial(score_pairs, options=options))
            return metrics_stage(wh, pipe.name, dataset, options, run_id, score, m.commit_rows, **progress).summary()
        with PairScorer(options) as scorer:  # without Ray: local processes where they pay off, one pool for all chunks
            return metrics_stage(wh, pipe.name, dataset, options, run_id, scorer, m.commit_rows,
                                 **progress).summary()
