"""train flow: refresh the pipeline's tables, then run one method (or each `train` entry of the pipeline)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from prefect import flow
from pydantic import BeforeValidator

from amrsim.errors import ConfigError
from amrsim.methods import METHODS
from amrsim.secrets import unseal
from amrsim.warehouse.lineage import new_run_id
from flows.common import Overrides, ended, load, publish_summary
from flows.refresh_dataset import refresh_dataset
from tasks.train import train as train_task


def _known_method(value: Any) -> Any:
    if isinstance(value, str) and value not in METHODS:
        raise ValueError(f"unknown training method '{value}'; available: {', '.join(sorted(METHODS))}")
    return value


# the registered methods, an enum in the deployments' parameter schema: the server rejects a run with another method
# before it starts (`prefect deployment run train/... --param method=nope`); a direct call fails naming the value
Method = Annotated[Literal[tuple(METHODS)], BeforeValidator(_known_method)]  # type: ignore[valid-type]


@flow(name="train", validate_parameters=True)
def train(method: Method | None = None, pipeline: str | None = None, config: str = "pipelines.yaml",
          overrides: Overrides = None, run_id: str | None = None,
          refresh: bool = True, params: Overrides = None, reuse: bool = True) -> list[dict[str, Any]]:
    """`method` given: that method with the pipeline's params for it (if it has a `train` entry for it, else the
    method's defaults); otherwise every `train` entry in order. `refresh` first brings the pipeline's tables up to
    date (incremental: a no-op when they are). A resumed run passes its `run_id`; `params` override the method's
    params (with `method` only). `reuse=False` trains even where a finished run of the same request exists."""
    if method is not None and method not in METHODS:  # train.fn(...) skips Prefect's parameter validation
        raise ConfigError(f"train: unknown training method '{method}'; available: {', '.join(sorted(METHODS))}")
    cfg, name = load(config, pipeline, overrides)
    params = unseal(params, "params")
    pipe = cfg.section(name)
    run_id = run_id or new_run_id()
    entries = pipe.spec.train
    if method:
        base = next((t.params for t in entries if t.method == method), {})
        jobs = [(method, {**base, **(params or {})})]
    else:
        jobs = [(t.method, t.params) for t in entries]
    if not jobs:
        raise ConfigError(f"{pipe.where} has no train entries; name a method")
    stages: list[dict[str, Any]] = list(refresh_dataset(name, config, overrides, run_id)) if refresh else []
    stages += [train_task(pipe, m, params, run_id, reuse) for m, params in jobs]
    publish_summary("train", name, run_id, stages)
    return ended(stages, stages)  # type: ignore[return-value]  # a State: the flow's result is its data
