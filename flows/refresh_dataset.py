"""refresh-dataset flow: ingest every dataset of a pipeline, then the derived stages (translate, parse, encode,
kNN augmentation, AMR metrics)."""

from __future__ import annotations

from typing import Any

from prefect import flow

from amrsim.warehouse.lineage import new_run_id
from flows.common import load
from tasks.augment import augment
from tasks.encode import encode
from tasks.ingest import ingest
from tasks.metrics import metrics
from tasks.parse import parse
from tasks.translate import translate


@flow(name="refresh-dataset", validate_parameters=True)
def refresh_dataset(pipeline: str | None = None, config: str = "pipelines.yaml",
                    overrides: dict[str, Any] | None = None, run_id: str | None = None) -> list[dict[str, Any]]:
    cfg, name = load(config, pipeline, overrides)
    run_id = run_id or new_run_id()
    pipe = cfg.project.pipelines[name]
    stages = [ingest(cfg, name, ds, run_id) for ds in pipe.datasets]
    stages += [translate(cfg, name, ds, run_id) for ds in pipe.translate_datasets()]
    stages += [parse(cfg, name, ds, run_id) for ds in pipe.parse_datasets()]
    for ds in pipe.encode_datasets():
        for encoder in pipe.encode.encoders if pipe.encode else []:
            stages.append(encode(cfg, name, ds, encoder, run_id))
    if pipe.augment:
        stages += [augment(cfg, name, ds, run_id) for ds in pipe.augment.datasets]
    if pipe.metrics:
        for ds in pipe.metrics.datasets:
            stages.append(metrics(cfg, name, ds, run_id))
    return stages
