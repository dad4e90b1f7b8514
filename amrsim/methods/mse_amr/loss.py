"""MSE-AMR's loss: supervised SimCSE, with the released code's symmetric term."""

from __future__ import annotations

from typing import TYPE_CHECKING

# torch is imported inside the function: the loader registry imports this package

if TYPE_CHECKING:
    import torch


def simcse_loss(anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None = None,
                temperature: float = 0.05, *, symmetric: bool = False) -> torch.Tensor:
    """Supervised SimCSE: cosine of each anchor with every positive and every hard negative of the batch (b x 2b
    logits / temperature), cross-entropy with the anchor's own positive as the label. `symmetric` adds the released
    MSE-AMR code's second term (``loss_fct(cos_sim[:N, :N].T, labels)``): each positive picks its anchor among the b
    anchors. Hard-negative weight 0, as the release."""
    import torch
    import torch.nn.functional as F

    a = F.normalize(anchor.float(), dim=-1)
    p = F.normalize(positive.float(), dim=-1)
    logits = a @ p.T
    if negative is not None:
        logits = torch.cat([logits, a @ F.normalize(negative.float(), dim=-1).T], dim=1)
    logits = logits / temperature
    labels = torch.arange(a.shape[0], device=a.device)
    loss = F.cross_entropy(logits, labels)
    if symmetric:
        loss = loss + F.cross_entropy(logits[:, : a.shape[0]].T, labels)
    return loss
