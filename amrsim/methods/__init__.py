"""Training methods. Each is a package `amrsim/methods/<name>/`: `train.py` (its model, loss and training loop),
`run.py` (the pipeline entry) and, where it has them, `data.py` / `encoder.py`. The registry names each `run.py`, a
light module (torch is imported inside its functions, so validating a config stays fast) with:

- `Params`: a strict pydantic model of the method's `train: - method: <name>  params: {...}` entry;
- `train(cfg, pipeline, params: Params, run_id) -> dict`: reads pinned warehouse tables, trains, writes
  `warehouse/models/<name>/<run_id>/` (`amrsim.methods.common`) and returns a stage summary.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from amrsim.methods.common import finished_run_with, request_key, write_request

# name -> module holding Params and train; imported on first use
METHODS: dict[str, str] = {
    "s3bert": "amrsim.methods.s3bert.run",
    "mse_amr": "amrsim.methods.mse_amr.run",
    "dueam": "amrsim.methods.dueam.run",
    "pear": "amrsim.methods.pear.run",
    "meaning": "amrsim.methods.meaning.run",
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


def get_method(name: str) -> Callable[..., dict[str, Any]]:
    """train(cfg, pipeline, params, run_id, reuse=True) -> summary; params may be a dict (validated here) or the Params
    model. A finished run of the same request (method, params, input table versions) is reused unless `reuse` is
    False (a rerun to measure run-to-run variation, say)."""
    module = _module(name)

    def run(cfg: Any, pipeline: str, params: dict[str, Any] | BaseModel | None, run_id: str,
            reuse: bool = True) -> dict[str, Any]:
        checked = method_params(name, params)
        key = request_key(cfg, pipeline, name, checked)
        done = finished_run_with(cfg, name, key) if reuse else None
        if done is not None:  # same method, params and input table versions: nothing to train (incremental rerun)
            return done
        summary = module.train(cfg, pipeline, checked, run_id)
        if summary.get("status") == "ok":
            from amrsim.methods.card import refresh_cards
            from amrsim.warehouse import Warehouse

            write_request(cfg, name, run_id, key, summary)
            refresh_cards(Warehouse(cfg.warehouse_root), summary.get("models") or [summary["model"]])
        return summary

    return run
