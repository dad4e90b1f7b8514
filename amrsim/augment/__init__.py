"""Data augmentation: cheap silver sentence pairs from bi-encoder nearest neighbours (Augmented SBERT / PEAR kNN)."""

from amrsim.augment.knn import (
    KINDS,
    CallableScorer,
    CosineScorer,
    Scorer,
    augment_pairs,
    build_index,
    knn,
    normalise,
    recall_at_k,
    search,
)

__all__ = [
    "KINDS",
    "CallableScorer",
    "CosineScorer",
    "Scorer",
    "augment_pairs",
    "build_index",
    "knn",
    "normalise",
    "recall_at_k",
    "search",
]
