"""DuEAM's target distance, the anchor's Word Mover's Distance, and its loss L = L_A - lam * L_B."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

LAMBDA = 0.003  # the paper's weight of L_B


class EmptyTokensError(ValueError):
    """A sentence has no token left after tokenisation (special tokens removed): WMD is undefined for it."""


def token_weights(x: np.ndarray, mode: str = "uniform") -> np.ndarray:
    """Mass of each token: `uniform` 1/n, or `norm` proportional to its vector's L2 norm (uniform if all are 0)."""
    n = len(x)
    if mode not in ("uniform", "norm"):
        raise ValueError(f"token weights '{mode}' unknown; use one of uniform, norm")
    norms = np.linalg.norm(np.asarray(x, dtype=np.float64), axis=1) if mode == "norm" else np.zeros(n)
    return norms / norms.sum() if norms.sum() > 0 else np.full(n, 1.0 / n)


def wmd(x: np.ndarray, y: np.ndarray, weights: str = "uniform", normalize: bool = True) -> float:
    """Word Mover's Distance between token embeddings (n, d) and (m, d): `ot.emd2` with Euclidean cost, on
    L2-normalised token vectors when `normalize` (the weights are taken before). Never negative."""
    import ot

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"wmd: expected (n, d) and (m, d) token embeddings, got {x.shape} and {y.shape}")
    if not len(x) or not len(y):
        raise EmptyTokensError(f"wmd: a sentence has no tokens ({len(x)} and {len(y)}); WMD is undefined")
    a, b = token_weights(x, weights), token_weights(y, weights)
    if normalize:
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        y = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    return max(0.0, float(ot.emd2(a, b, ot.dist(x, y, metric="euclidean"))))


def anchor_loss(s: torch.Tensor, t: torch.Tensor, wmd_st: torch.Tensor) -> torch.Tensor:
    """L_A = mean |exp(-||s' - t'||_2) - exp(-WMD(s, t))| over the batch."""
    import torch

    d = torch.linalg.vector_norm(s - t, dim=-1)  # its gradient at d = 0 (identical embeddings) is 0, not NaN
    return (torch.exp(-d) - torch.exp(-wmd_st.to(d.dtype))).abs().mean()


def cosine_term(s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """L_B = mean cos(s', t') over the batch."""
    import torch.nn.functional as F  # noqa: N812

    return F.cosine_similarity(s, t, dim=-1, eps=1e-8).mean()


def dueam_loss(s: torch.Tensor, t: torch.Tensor, wmd_st: torch.Tensor, lam: float = LAMBDA
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(L, L_A, L_B) with L = L_A - lam * L_B."""
    la, lb = anchor_loss(s, t, wmd_st), cosine_term(s, t)
    return la - lam * lb, la, lb
