"""AMR aspect evaluation (S3BERT Table 1): how well an encoder's similarity predicts each AMR metric aspect.

For every aspect column of `amr_metrics` the prediction is the cosine of the encoder's sub-embedding for that aspect
(a decomposed model's `model.json` lists `aspects: {name: [start, end]}`), or the cosine of the whole embedding for
an encoder without one (the paper's SBERT baseline row). Score: Spearman x 100 of prediction vs metric target.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from amrsim.evaluate import Score
from amrsim.evaluate.sts import correlations, cosine
from amrsim.metrics.aspects import metric_columns

__all__ = ["ASPECT_COLUMNS", "aspect_scores"]

# the aspects S3BERT decomposes into (its Table 1), by amr_metrics column; smatch precision/recall are redundant
ASPECT_COLUMNS = [c for c in metric_columns() if c not in ("smatch_precision", "smatch_recall")]


def aspect_scores(model: str, dataset: str, split: str, metrics: pl.DataFrame, vectors1: np.ndarray,
                  vectors2: np.ndarray, slices: dict[str, tuple[int, int]] | None = None,
                  aspects: Sequence[str] | None = None) -> list[Score]:
    """`metrics` rows align with vectors1/vectors2 (the pair's two sentences). An aspect whose column is all null
    (not computed) is skipped; one whose predictions or targets are constant is reported undefined."""
    if len(metrics) != len(vectors1) or len(vectors1) != len(vectors2):
        raise ValueError(f"aspect evaluation: {len(metrics)} metric rows but {len(vectors1)} / {len(vectors2)} "
                         "vectors")
    slices = slices or {}
    for name, (_, end) in slices.items():
        if end > vectors1.shape[1]:
            raise ValueError(f"aspect '{name}' slice ends at {end} but the embedding has {vectors1.shape[1]} dims")
    whole = cosine(vectors1, vectors2)
    scores = []
    for aspect in aspects or ASPECT_COLUMNS:
        if aspect not in metrics.columns:
            raise ValueError(f"aspect '{aspect}' is not an amr_metrics column; known: {', '.join(ASPECT_COLUMNS)}")
        target = metrics[aspect].cast(pl.Float64)
        keep = target.is_not_null().to_numpy()
        if not keep.any():
            continue
        if aspect in slices:
            start, end = slices[aspect]
            pred = cosine(vectors1[:, start:end], vectors2[:, start:end])
        else:
            pred = whole
        corr = correlations(pred[keep], target.to_numpy()[keep])
        scores.append(Score("aspects", model, dataset, split, aspect, "spearman", corr["spearman"], int(keep.sum())))
    return scores
