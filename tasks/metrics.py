"""Metrics task: AMR graph metrics for a dataset's graph pairs, batches spread with the Ray helper."""

from __future__ import annotations

from functools import partial

from prefect import task

from amrsim.config import LoadedConfig
from amrsim.metrics.engine import MetricsOptions, PairScorer, score_pairs
from amrsim.stages.metrics import metrics_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS
from tasks.ray_map import map_batches, ray_wanted


def options_for(cfg: LoadedConfig, pipeline: str) -> MetricsOptions:
    m = cfg.project.pipelines[pipeline].metrics
    assert m is not None
    return m.options()


@task(name="metrics", **TASK_OPTIONS)
def metrics(cfg: LoadedConfig, pipeline: str, dataset: str, run_id: str) -> dict[str, object]:
    options = options_for(cfg, pipeline)
    ray_cfg = cfg.project.pipelines[pipeline].ray
    commit_rows = cfg.project.pipelines[pipeline].metrics.commit_rows  # type: ignore[union-attr]
    wh = Warehouse(cfg.warehouse_root)
    if ray_wanted(ray_cfg):
        score = partial(map_batches, partial(score_pairs, options=options), cfg=ray_cfg, run_dir=cfg.run_dir)
        return metrics_stage(wh, pipeline, dataset, options, run_id, score, commit_rows).summary()
    with PairScorer(options) as scorer:  # without Ray: local processes where they pay off, one pool for all chunks
        return metrics_stage(wh, pipeline, dataset, options, run_id, scorer, commit_rows).summary()
