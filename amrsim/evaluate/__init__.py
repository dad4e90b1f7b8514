"""The evaluators: pure functions of vectors and scores (STS correlations, bitext retrieval, transfer classifiers,
aspect correlations) returning `Score`s, and the one `Evaluator` protocol that training (dev selection) and
evaluation share. Reading the warehouse and storing results is the evaluate stage's (`amrsim.stages.evaluate`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["UNDEFINED", "DevScore", "Evaluator", "Score"]

UNDEFINED = "undefined"  # how a None value is printed: e.g. Spearman of constant predictions


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


@dataclass(frozen=True)
class Score:
    """One evaluation number; `value` is None when the metric is undefined for the input (never 0 or NaN)."""

    task: str  # sts | bitext | bucc | transfer | aspects
    model: str  # encoder name as given (minilm, muse, hf:..., <method>:<run id|latest>)
    dataset: str
    split: str
    lang_pair: str  # "en-de", "deu-eng", "en" (transfer: the evaluation language), aspect name for aspects
    metric: str  # spearman, pearson, accuracy_src2tgt, f1, ...
    value: float | None
    n: int

    def __post_init__(self) -> None:
        if self.value is not None and not math.isfinite(self.value):
            object.__setattr__(self, "value", None)

    @property
    def shown(self) -> str:
        return UNDEFINED if self.value is None else f"{self.value:.2f}"
