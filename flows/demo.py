"""demo flow: refresh-dataset -> train (the pipeline's train entries, if any) -> evaluate, one run id."""

from __future__ import annotations

from typing import Any

from prefect import flow

from amrsim.warehouse.lineage import new_run_id
from flows.common import Overrides, ended, load, publish_summary
from flows.evaluate import evaluate
from flows.refresh_dataset import refresh_dataset
from flows.train import train


@flow(name="demo", validate_parameters=True)
def demo(pipeline: str | None = None, config: str = "pipelines.yaml",
         overrides: Overrides = None) -> dict[str, Any]:
    cfg, name = load(config, pipeline, overrides)  # fail on a bad config before any subflow starts
    run_id = new_run_id()
    stages = list(refresh_dataset(name, config, overrides, run_id))
    if cfg.section(name).spec.train:
        stages += train(None, name, config, overrides, run_id, refresh=False)
    evaluated = evaluate(name, config, overrides, run_id)
    stages += evaluated["stages"]
    publish_summary("demo", name, run_id, stages)
    return ended({"run_id": run_id, "stages": stages, "results": evaluated["results"],  # type: ignore[return-value]
                  "tables": evaluated["tables"], "notes": evaluated["notes"], "report": evaluated["report"]}, stages)
