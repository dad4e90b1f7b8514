"""AMR aspect evaluation (S3BERT Table 1): how well an encoder's similarity predicts each AMR metric aspect.

For every aspect column of `amr_metrics` the prediction is the cosine of the encoder's sub-embedding for that aspect
(a decomposed model's `model.json` lists `aspects: {name: [start, end]}`), or the cosine of the whole embedding for
an encoder without one (the paper's SBERT baseline row). Score: Spearman x 100 of prediction vs metric target.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from amrsim.encoders import find_trained
from amrsim.evaluate.results import Score
from amrsim.evaluate.sts import correlations, cosine
from amrsim.methods.portable import method_config
from amrsim.warehouse.schemas import AMR_METRIC_COLUMNS

# the aspects S3BERT decomposes into (its Table 1), by amr_metrics column; smatch precision/recall are redundant
ASPECT_COLUMNS = [c for c in AMR_METRIC_COLUMNS if c not in ("smatch_precision", "smatch_recall")]


def aspect_slices(encoder: str, models_root: Path | None = None) -> dict[str, tuple[int, int]]:
    """A trained decomposed model's sub-embedding ranges by aspect column; {} for any other encoder."""
    if encoder in ("minilm", "muse") or encoder.startswith("hf:") or ":" not in encoder:
        return {}

    model = find_trained(encoder, models_root)
    meta = method_config(model.path, "s3bert", model.meta)
    slices = {}
    for name, span in (meta.get("aspects") or {}).items():
        if (not isinstance(span, list | tuple) or len(span) != 2 or not all(isinstance(x, int) for x in span)
                or not 0 <= span[0] < span[1]):
            raise ValueError(f"model '{encoder}': aspects.{name} must be [start, end) with 0 <= start < end, "
                             f"got {span!r}")
        slices[name] = (span[0], span[1])
    return slices


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
