"""Train task: run one registered method's training loop."""

from __future__ import annotations

from typing import Any

from prefect import task
from pydantic import ValidationError

from amrsim.config import Pipeline
from amrsim.errors import ConfigError
from amrsim.methods import method_params
from amrsim.stages.train import train_method
from tasks.common import TASK_OPTIONS, told


@task(name="train", **(TASK_OPTIONS | {"retries": 0}))
def train(pipe: Pipeline, method: str, params: dict[str, Any], run_id: str, reuse: bool = True) -> dict[str, object]:
    try:
        checked = method_params(method, params)
    except KeyError as e:
        raise ConfigError(f"{pipe.where}: {e.args[0]}") from None
    except ValidationError as e:
        raise ConfigError(f"{pipe.where}: train {method} params: {e}") from None
    return told(f"train {method}", lambda: train_method(pipe, method, checked, run_id, reuse))
