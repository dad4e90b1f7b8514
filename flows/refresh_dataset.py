"""refresh-dataset flow: ingest every dataset of a pipeline, then the derived stages (translate, parse, encode,
kNN augmentation, AMR metrics)."""

from __future__ import annotations

from typing import Any

from prefect import flow

from amrsim.warehouse.lineage import new_run_id
from flows.common import Overrides, load, publish_summary
from tasks.augment import augment
from tasks.encode import encode
from tasks.ingest import ingest
from tasks.metrics import metrics
from tasks.parse import parse
from tasks.translate import translate


@flow(name="refresh-dataset", validate_parameters=True)
def refresh_dataset(pipeline: str | None = None, config: str = "pipelines.yaml",
                    overrides: Overrides = None, run_id: str | None = None) -> list[dict[str, Any]]:
    cfg, name = load(config, pipeline, overrides)
    run_id = run_id or new_run_id()
    pipe = cfg.section(name)
    spec = pipe.spec
    stages = [ingest(pipe, ds, run_id) for ds in spec.datasets]
    stages += [translate(pipe, ds, run_id) for ds in spec.translate_datasets()]
    stages += [parse(pipe, ds, run_id) for ds in spec.parse_datasets()]
    stages += [encode(pipe, ds, encoder, run_id) for ds in spec.encode_datasets()
               for encoder in (spec.encode.encoders if spec.encode else [])]
    stages += [augment(pipe, ds, run_id) for ds in (spec.augment.datasets if spec.augment else [])]
    stages += [metrics(pipe, ds, run_id) for ds in (spec.metrics.datasets if spec.metrics else [])]
    publish_summary("refresh-dataset", name, run_id, stages)
    return stages
