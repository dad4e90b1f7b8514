"""Training methods. Each registers `amrsim/methods/<name>_run.py`, a light module (torch is imported inside its
functions, so validating a config stays fast) with:

- `Params`: a strict pydantic model of the method's `train: - method: <name>  params: {...}` entry;
- `train(cfg, pipeline, params: Params, run_id) -> dict`: reads pinned warehouse tables, trains, writes
  `warehouse/models/<name>/<run_id>/` (`amrsim.methods.common`) and returns a stage summary.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pydantic import BaseModel

# name -> module holding Params and train; imported on first use
METHODS: dict[str, str] = {
    "s3bert": "amrsim.methods.s3bert_run",
    "mse_amr": "amrsim.methods.mse_amr_run",
    "dueam": "amrsim.methods.dueam_run",
    "pear": "amrsim.methods.pear_run",
    "meaning": "amrsim.methods.meaning_run",
}


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
    """train(cfg, pipeline, params, run_id) -> summary; params may be a dict (validated here) or the Params model."""
    module = _module(name)

    def run(cfg: Any, pipeline: str, params: dict[str, Any] | BaseModel | None, run_id: str) -> dict[str, Any]:
        from amrsim.methods.common import finished_run_with, request_key, write_request

        checked = method_params(name, params)
        key = request_key(cfg, pipeline, name, checked)
        done = finished_run_with(cfg, name, key)
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
