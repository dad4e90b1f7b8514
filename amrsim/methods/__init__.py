"""The training core: data in, data out. `training.py` holds the one `Trainer`, `TrainingArgs` and the run files
(checkpoints, model.json); `portable.py` makes run directories load with sentence-transformers; `loaders.py` loads
any encoder by name, every method's trained runs included. One package per method (`params`, `model`, `loss`,
`train`, and `data` where needed), each declaring its `MethodSpec` once (`SPEC` in its `__init__.py`);
`registry.py` holds the specs, and `METHODS` (name -> `Params`, what `pipelines.yaml`'s `train:` entries are
validated with) and `CARDS` are built from them; the pipeline entries are `amrsim.stages.train`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from amrsim.methods.registry import CARDS, METHODS, method_spec, register, specs
from amrsim.methods.spec import CardFacts, Derived, MethodSpec, RunKind, Stage, TrainedInputs
from amrsim.methods.training import MethodParams, TrainingArgs

__all__ = ["CARDS", "METHODS", "CardFacts", "Derived", "MethodParams", "MethodSpec", "RunKind", "Stage",
           "TrainedInputs", "TrainingArgs", "method_params", "method_spec", "register", "specs"]


def method_params(name: str, params: dict[str, Any] | BaseModel | None) -> MethodParams:
    """The method's validated parameters (pydantic ValidationError names the bad key)."""
    model = method_spec(name).params
    if isinstance(params, model):
        return params
    return model(**(params.model_dump() if isinstance(params, BaseModel) else params or {}))
