"""The evaluators: pure functions of vectors and scores (STS correlations, bitext retrieval, transfer classifiers,
aspect correlations), and the one `Evaluator` protocol that training (dev selection) and evaluation share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["DevScore", "Evaluator"]


class Evaluator(Protocol):
    """A score of the model as it is now (None when it cannot be computed); `greater_is_better` says which way the
    best model lies. Training calls it to select a checkpoint; the evaluation suite runs the same evaluators after."""

    greater_is_better: bool

    def __call__(self) -> float | None: ...


@dataclass
class DevScore:
    """An `Evaluator` from a function: `DevScore(dev_loss, greater_is_better=False)`."""

    score: Callable[[], float | None]
    greater_is_better: bool = True

    def __call__(self) -> float | None:
        return self.score()
