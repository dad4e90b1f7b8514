"""S3BERT's two losses (reference code: flipz357/S3BERT):

- decomposition: for every aspect, a learnable scale times the similarity of the two sentences' sub-embeddings
  regresses the (min-max normalised) metric value of the pair (MSE);
- consistency: the in-batch sentence1 x sentence2 cosine matrix of the student regresses that of the frozen teacher,
  so the full embedding keeps its similarity ratings."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

CONSISTENCY_SCALE = 5.0  # the reference's MultipleConsistencyLoss multiplies both cosine matrices by 5
SIMILARITIES = ("cosine", "manhattan")


def sub_similarity(a: torch.Tensor, b: torch.Tensor, similarity: str = "cosine") -> torch.Tensor:
    """Row-wise similarity of two (batch, d) sub-embeddings: cosine, or the reference's training default
    `1 - L1 distance` ('manhattan')."""
    import torch.nn.functional as F  # noqa: N812

    if similarity == "cosine":
        return F.cosine_similarity(a, b, dim=-1, eps=1e-8)
    if similarity == "manhattan":
        return 1.0 - (a - b).abs().sum(-1)
    raise ValueError(f"similarity '{similarity}' unknown; use one of {', '.join(SIMILARITIES)}")


class DecompositionLoss:
    """MSE between scale_a * sim(u[:, a], v[:, a]) and target_a, over all pairs and aspects; the per-aspect `scales`
    are a learnable parameter (init 1), as the reference's `score_bias`. Aspect a is dims [a * aspect_dim,
    (a + 1) * aspect_dim)."""

    def __init__(self, n_aspects: int, aspect_dim: int = 16, similarity: str = "cosine", device: str = "cpu"):
        import torch

        if similarity not in SIMILARITIES:
            raise ValueError(f"similarity '{similarity}' unknown; use one of {', '.join(SIMILARITIES)}")
        self.n_aspects, self.aspect_dim, self.similarity = n_aspects, aspect_dim, similarity
        self.scales = torch.nn.Parameter(torch.ones(n_aspects, device=device))

    def predict(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(batch, n_aspects): scaled sub-embedding similarities."""
        import torch

        d = self.aspect_dim
        sims = [sub_similarity(u[:, a * d:(a + 1) * d], v[:, a * d:(a + 1) * d], self.similarity)
                for a in range(self.n_aspects)]
        return torch.stack(sims, dim=1) * self.scales

    def __call__(self, u: torch.Tensor, v: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F  # noqa: N812

        return F.mse_loss(self.predict(u, v), targets)


def _cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F  # noqa: N812

    return F.normalize(a, dim=-1, eps=1e-12) @ F.normalize(b, dim=-1, eps=1e-12).T


def consistency_loss(student_a: torch.Tensor, teacher_a: torch.Tensor, student_b: torch.Tensor | None = None,
                     teacher_b: torch.Tensor | None = None, *, scale: float = CONSISTENCY_SCALE) -> torch.Tensor:
    """MSE between the student's and the teacher's in-batch cosine matrices of full embeddings, both times `scale`:
    a x b (sentence1s x sentence2s, as in training) when the b sides are given, else a x a."""
    import torch.nn.functional as F  # noqa: N812

    if (student_b is None) != (teacher_b is None):
        raise ValueError("consistency_loss: give both student_b and teacher_b, or neither")
    sb = student_a if student_b is None else student_b
    tb = teacher_a if teacher_b is None else teacher_b
    return F.mse_loss(_cosine_matrix(student_a, sb) * scale, _cosine_matrix(teacher_a, tb) * scale)

