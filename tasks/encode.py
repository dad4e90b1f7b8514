"""Encode task: embeddings for one dataset and encoder, only for sentences not yet cached."""

from __future__ import annotations

from prefect import task

from amrsim.config import LoadedConfig
from amrsim.console import progress_bar
from amrsim.stages.encode import encode_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS


@task(name="encode", **TASK_OPTIONS)
def encode(cfg: LoadedConfig, pipeline: str, dataset: str, encoder: str, run_id: str) -> dict[str, object]:
    wh = Warehouse(cfg.warehouse_root)
    total = wh.read(dataset, "sentences", columns=["key"]).height
    with progress_bar(total, f"encode {dataset} with {encoder}") as advance:
        return encode_stage(wh, cfg, pipeline, dataset, encoder, run_id, on_progress=advance).summary()
