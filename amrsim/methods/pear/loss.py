"""PEAR's loss, BCE-with-logits against gold scores on 0-1, and its targets: gold normalised by the dataset's range,
optionally mixed with a base bi-encoder's cosine put on the gold scale."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def normalise_scores(scores: Sequence[float] | np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Gold scores on [lo, hi] -> [0, 1] float32 (BCE targets); values outside are clipped, NaN is an error."""
    if not hi > lo:
        raise ValueError(f"score range [{lo}, {hi}] is empty: need hi > lo")
    y = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(y).all():
        raise ValueError(f"scores contain NaN/inf at rows {np.where(~np.isfinite(y))[0][:10].tolist()}")
    return np.clip((y - lo) / (hi - lo), 0.0, 1.0).astype(np.float32)


def bce_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean BCE-with-logits of single logits against 0-1 targets (soft labels): -t log σ(z) - (1-t) log(1-σ(z))."""
    import torch.nn.functional as F  # noqa: N812

    return F.binary_cross_entropy_with_logits(logits.float().reshape(-1), targets.float().reshape(-1))


def gold_scale_line(gold: np.ndarray, cosine: np.ndarray) -> dict[str, float]:
    """The least-squares line from a bi-encoder's cosine to the 0-1 gold scale, fitted on the training pairs."""
    slope, intercept = np.polyfit(np.asarray(cosine, np.float64), np.asarray(gold, np.float64), 1)
    return {"slope": float(slope), "intercept": float(intercept)}


def on_gold_scale(cosine: np.ndarray, line: Mapping[str, float]) -> np.ndarray:
    """Cosines put on the gold scale by `gold_scale_line`'s line, clipped to [0, 1] (the ranking is the cosine's)."""
    return np.clip(line["slope"] * np.asarray(cosine, np.float64) + line["intercept"], 0.0, 1.0)


def base_targets(gold: np.ndarray, cosine: np.ndarray, weight: float) -> tuple[np.ndarray, dict[str, float]]:
    """Knowledge-preserving targets ``(1 - weight) * gold + weight * c``, c the base's cosine on the gold scale: with
    BCE, linear in the target, the same as adding ``weight / (1 - weight)`` times a BCE towards c to the gold loss.
    Returns the targets and the line."""
    gold, cosine = np.asarray(gold, np.float64), np.asarray(cosine, np.float64)
    if not 0 <= weight <= 1:
        raise ValueError(f"base target weight {weight} must lie in [0, 1]")
    if len(gold) != len(cosine) or len(gold) < 2:
        raise ValueError(f"base targets: {len(gold)} gold scores and {len(cosine)} cosines (need 2 or more, as many)")
    if cosine.std() <= 1e-9:
        raise ValueError("base targets: the base's cosine is constant on the training pairs")
    line = gold_scale_line(gold, cosine)
    mixed = np.clip((1 - weight) * gold + weight * on_gold_scale(cosine, line), 0.0, 1.0).astype(np.float32)
    return mixed, line
