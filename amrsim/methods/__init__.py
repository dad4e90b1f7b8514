"""Training methods (MSE-AMR, S3BERT, DuEAM, PEAR, meaning embeddings) register here as their issues land."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# name -> train(cfg, pipeline, params, run_id) -> summary dict; filled by each method module
METHODS: dict[str, Callable[..., dict[str, Any]]] = {}


def get_method(name: str) -> Callable[..., dict[str, Any]]:
    if name not in METHODS:
        available = ", ".join(sorted(METHODS)) or "none registered yet"
        raise KeyError(f"unknown training method '{name}'; available: {available}")
    return METHODS[name]
