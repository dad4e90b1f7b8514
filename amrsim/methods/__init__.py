"""The training core: data in, data out. `training.py` holds the one `Trainer`, `TrainingArgs` and the run files
(checkpoints, model.json); `portable.py` makes run directories load with sentence-transformers; `loaders.py` loads
any encoder by name, every method's trained runs included. One package per method (`params`, `model`, `loss`,
`train`, and `data` where needed). `METHODS` maps each method's name to its `Params`, what `pipelines.yaml`'s
`train:` entries are validated with; the pipeline entries are `amrsim.stages.train`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from amrsim.methods.dueam.params import Params as DueamParams
from amrsim.methods.meaning.params import Params as MeaningParams
from amrsim.methods.mse_amr.params import Params as MseAmrParams
from amrsim.methods.pear.params import Params as PearParams
from amrsim.methods.s3bert.params import Params as S3bertParams
from amrsim.methods.training import MethodParams, TrainingArgs

__all__ = ["METHODS", "MethodParams", "TrainingArgs", "method_params"]

METHODS: dict[str, type[MethodParams]] = {"s3bert": S3bertParams, "mse_amr": MseAmrParams, "dueam": DueamParams,
                                          "pear": PearParams, "meaning": MeaningParams}


def method_params(name: str, params: dict[str, Any] | BaseModel | None) -> MethodParams:
    """The method's validated parameters (pydantic ValidationError names the bad key)."""
    if name not in METHODS:
        raise KeyError(f"unknown training method '{name}'; available: {', '.join(sorted(METHODS))}")
    model = METHODS[name]
    if isinstance(params, model):
        return params
    return model(**(params.model_dump() if isinstance(params, BaseModel) else params or {}))
