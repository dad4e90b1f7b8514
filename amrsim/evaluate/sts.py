"""STS evaluation: Spearman and Pearson x 100 of cosine similarity (or a cross-encoder's pair scores) against
gold scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from amrsim.evaluate import Score

# scipy is imported inside the functions: importing this module must stay cheap

__all__ = ["StsEvaluator", "correlations", "cosine", "is_constant", "sts_scores"]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return np.einsum("ij,ij->i", a, b)


@dataclass
class StsEvaluator:
    """Spearman x 100 of the cosine of `encode(texts1)` and `encode(texts2)` against `gold` (None when undefined):
    the STS evaluator, for dev selection during training and for evaluation after it."""

    texts1: Sequence[str]
    texts2: Sequence[str]
    gold: np.ndarray
    encode: Callable[[list[str]], np.ndarray]
    greater_is_better: bool = True

    def __call__(self) -> float | None:
        return correlations(cosine(self.encode(list(self.texts1)), self.encode(list(self.texts2))),
                            self.gold)["spearman"]


# float32 keeps 24 bits (eps 1.2e-7); a cosine sums hundreds of float32 products, so identical inputs differ by a
# few ulps. Values whose spread is at most 1e-6 of their magnitude carry only that noise, and ranking noise would give
# a correlation that is a number (Spearman 9.06 for sentence2 == sentence1) instead of undefined.
CONSTANT_RTOL = 1e-6


def is_constant(values: np.ndarray) -> bool:
    """True when `values` do not vary beyond float32 rounding: np.ptp <= CONSTANT_RTOL * max |value|."""
    values = np.asarray(values, dtype=np.float64)
    return bool(np.ptp(values) <= CONSTANT_RTOL * np.abs(values).max()) if values.size else True


def correlations(pred: np.ndarray, gold: np.ndarray) -> dict[str, float | None]:
    """spearman and pearson, both x 100; None (undefined) when either side is constant (up to float32 rounding, see
    `is_constant`) or has a NaN."""
    pred, gold = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if (len(pred) < 2 or not (np.isfinite(pred).all() and np.isfinite(gold).all())
            or is_constant(pred) or is_constant(gold)):
        return {"spearman": None, "pearson": None}
    from scipy.stats import pearsonr, spearmanr  # scipy.stats costs ~0.9 s to import: only when scoring

    return {"spearman": float(spearmanr(pred, gold)[0] * 100), "pearson": float(pearsonr(pred, gold)[0] * 100)}


def sts_scores(model: str, dataset: str, split: str | None, lang_pair: str, pred: np.ndarray,
               gold: np.ndarray) -> list[Score]:
    """`correlations` of one (dataset, split, language pair) as Scores (task "sts", split None -> "all")."""
    return [Score("sts", model, dataset, split or "all", lang_pair, metric, value, len(gold))
            for metric, value in correlations(pred, gold).items()]
