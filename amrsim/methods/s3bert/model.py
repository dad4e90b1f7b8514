"""The S3BERT model: a sentence-transformers student whose embedding is cut into `n_aspects` consecutive
sub-embeddings of `aspect_dim` dims (one per AMR metric, the paper's feature order) and a residual; a frozen copy of
the starting model as teacher; the layout a run records, and the explanations read from it."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from amrsim.methods.training import autocast, st_embed
from amrsim.metrics.aspects import S3BERT_ASPECTS as _METRIC_ASPECTS

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer
    from torch import nn

# The paper's features in its code's order (config.FEATURES of flipz357/S3BERT) -> amr_metrics columns
PAPER_FEATURES: dict[str, str] = dict(_METRIC_ASPECTS)
S3BERT_ASPECTS: list[str] = list(PAPER_FEATURES.values())
RESIDUAL = "residual"
_LAYER = re.compile(r"(?:^|\.)(?:layer|layers|block)\.(\d+)\.")


def aspect_layout(dim: int, n_aspects: int = 15, aspect_dim: int = 16) -> dict[str, tuple[int, int]]:
    """amr_metrics column -> [start, end) of its sub-embedding, first `n_aspects` of the paper's order, then
    `residual` -> the rest (at least 1 dim: it carries what no metric explains)."""
    if not 1 <= n_aspects <= len(S3BERT_ASPECTS):
        raise ValueError(f"n_aspects must be 1..{len(S3BERT_ASPECTS)} (the paper's features), got {n_aspects}")
    if aspect_dim < 1:
        raise ValueError(f"aspect_dim must be >= 1, got {aspect_dim}")
    used = n_aspects * aspect_dim
    if dim <= used:
        raise ValueError(f"embedding dim {dim} is too small for {n_aspects} aspects x {aspect_dim} dims = {used} "
                         "plus a residual of at least 1 dim; use fewer aspects or a smaller aspect_dim")
    layout = {name: (i * aspect_dim, (i + 1) * aspect_dim) for i, name in enumerate(S3BERT_ASPECTS[:n_aspects])}
    layout[RESIDUAL] = (used, dim)
    return layout


def saved_layout(layout: Mapping[str, tuple[int, int]], scales: Sequence[float]) -> dict[str, Any]:
    """What a run records (model.json, and its sentence-transformers config under `s3bert`): the aspects' spans,
    the residual's and the learned per-aspect scales."""
    aspects = {name: list(span) for name, span in layout.items() if name != RESIDUAL}
    return {"aspects": aspects, RESIDUAL: list(layout[RESIDUAL]),
            "aspect_scales": dict(zip(aspects, scales, strict=True))}


def layout_from_meta(meta: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """The layout a trained model's model.json records (aspects, then residual), for `explain`."""
    layout = {name: (int(s), int(e)) for name, (s, e) in (meta.get("aspects") or {}).items()}
    if meta.get(RESIDUAL):
        s, e = meta[RESIDUAL]
        layout[RESIDUAL] = (int(s), int(e))
    return layout


class _Encodes(Protocol):
    def encode(self, texts: list[str]) -> Any: ...


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))


def explain(model: _Encodes, text1: str, text2: str, layout: Mapping[str, tuple[int, int]]) -> dict[str, float]:
    """`overall` (cosine of the full embeddings), then the cosine of each layout entry's sub-embedding (raw
    cosines: the learned per-aspect scales are in model.json)."""
    emb = np.asarray(model.encode([text1, text2]), dtype=np.float64)
    out = {"overall": _cos(emb[0], emb[1])}
    for name, (start, end) in layout.items():
        if not 0 <= start < end <= emb.shape[1]:
            raise ValueError(f"layout '{name}' [{start}, {end}) does not fit the {emb.shape[1]}-dim embedding")
        out[name] = _cos(emb[0, start:end], emb[1, start:end])
    return out


def contributions(emb1: np.ndarray, emb2: np.ndarray, layout: Mapping[str, tuple[int, int]]) -> dict[str, float]:
    """How much each sub-embedding adds to the overall cosine: a_k.b_k / (|a||b|); over a layout that covers the
    embedding (aspects + residual) they sum to the overall cosine."""
    a, b = np.asarray(emb1, dtype=np.float64), np.asarray(emb2, dtype=np.float64)
    denom = max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
    return {name: float(a[s:e] @ b[s:e] / denom) for name, (s, e) in layout.items()}


def freeze_except_last_layers(model: nn.Module, n: int) -> list[int]:
    """requires_grad only for parameters of the last `n` numbered transformer layers (embeddings, pooler and any
    other module stay frozen, as the reference does); returns the trainable layer ids."""
    ids = sorted({int(m.group(1)) for name, _ in model.named_parameters() if (m := _LAYER.search(name))})
    if not ids:
        raise ValueError("no numbered transformer layers (*.layer.N.*) found in the model to unfreeze")
    keep = set(ids[-n:])
    for name, param in model.named_parameters():
        m = _LAYER.search(name)
        param.requires_grad = bool(m and int(m.group(1)) in keep)
    return sorted(keep)


class Teacher:
    """A frozen eval-mode copy of the starting model. Its embedding of a sentence never changes, so each is computed
    once (a sentence recurs in its pair, in a negative and in every epoch).

    A sentence's embedding is computed in a batch fixed before training: `texts` (every sentence the run will ask
    for) sorted by (length, text) and cut into batches of `batch_size`; asking for one computes its whole batch. A
    transformer's output for a sentence depends, in the last bits, on the batch it runs in (the padded length, the
    matmul's shape), so batching whatever a training step happens to miss made a resumed run's targets differ from
    an uninterrupted one's (the cache starts empty at the resume point). A sentence outside `texts` runs alone."""

    def __init__(self, student: SentenceTransformer, device: str, texts: Sequence[str] = (), batch_size: int = 64):
        self.model, self.device = copy.deepcopy(student).eval(), device
        for p in self.model.parameters():
            p.requires_grad = False
        self.cache: dict[str, torch.Tensor] = {}
        ordered = sorted(dict.fromkeys(texts), key=lambda t: (len(t), t))
        size = max(1, batch_size)
        self.batches = [ordered[i:i + size] for i in range(0, len(ordered), size)]
        self.batch_of = {t: k for k, batch in enumerate(self.batches) for t in batch}

    def __call__(self, texts: list[str]) -> torch.Tensor:
        import torch

        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for k in dict.fromkeys(self.batch_of[t] for t in missing if t in self.batch_of):
            self._embed(self.batches[k])
        for t in missing:
            if t not in self.batch_of:
                self._embed([t])
        return torch.stack([self.cache[t] for t in texts])

    def _embed(self, texts: list[str]) -> None:
        import torch

        with torch.no_grad(), autocast(self.device):
            emb = st_embed(self.model, texts, self.device)
        self.cache.update(zip(texts, emb, strict=True))
