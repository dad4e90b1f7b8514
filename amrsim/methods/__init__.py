"""Training methods. Each is a package `amrsim/methods/<name>/`: `train.py` (its model, loss and training loop),
`run.py` (the pipeline entry) and, where it has them, `data.py` / `encoder.py`. The registry names each `run.py`, a
light module (torch is imported inside its functions, so validating a config stays fast) with:

- `Params`: a strict pydantic model of the method's `train: - method: <name>  params: {...}` entry;
- `train(cfg, pipeline, params: Params, run_id) -> dict`: reads pinned warehouse tables, trains, writes
  `warehouse/models/<name>/<run_id>/` (`amrsim.stages.train.common`) and returns a stage summary.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from pydantic import BaseModel

# name -> module holding Params and train; imported on first use
METHODS: dict[str, str] = {
    "s3bert": "amrsim.stages.train.s3bert",
    "mse_amr": "amrsim.stages.train.mse_amr",
    "dueam": "amrsim.stages.train.dueam",
    "pear": "amrsim.stages.train.pear",
    "meaning": "amrsim.stages.train.meaning",
}


def reexport_lazily(package: str, modules: Sequence[str]) -> Callable[[str], Any]:
    """A module `__getattr__` for a method package: `amrsim.methods.<name>.X` is X of the first of `modules` (its
    submodules, or dotted module names) that has it, imported on first use. Keeps the names of the flat modules
    the packages replaced (`amrsim.methods.pear.CrossEncoder`, `amrsim.methods.s3bert.train_s3bert`) working
    without importing torch when the package is."""

    def __getattr__(name: str) -> Any:  # noqa: N807 (PEP 562 module __getattr__)
        if not name.startswith("__"):
            for module in modules:
                found = importlib.import_module(module if "." in module else f"{package}.{module}")
                if hasattr(found, name):
                    return getattr(found, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def _module(name: str) -> ModuleType:
    if name not in METHODS:
        raise KeyError(f"unknown training method '{name}'; available: {', '.join(sorted(METHODS))}")
    return importlib.import_module(METHODS[name])


def method_params(name: str, params: dict[str, Any] | BaseModel | None) -> BaseModel:
    """The method's validated parameters (pydantic ValidationError names the bad key)."""
    model = _module(name).Params
    if isinstance(params, model):
        return params
    return model(**(params.model_dump() if isinstance(params, BaseModel) else params or {}))
