"""S3BERT's training data: texts and metric targets, as a caller hands them over (it reads the warehouse; nothing
here does): targets min-max normalised per split, negatives from swapped partners, row-by-row checks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from amrsim.errors import ConfigError
from amrsim.methods.s3bert.model import S3BERT_ASPECTS

if TYPE_CHECKING:
    import polars as pl

CONSTANT_TARGET = 0.5  # a column with no spread carries no ranking: its midpoint, not the reference's 0/0 = NaN


def normalise_targets(data: pl.DataFrame | np.ndarray, columns: Sequence[str] | None = None) -> np.ndarray:
    """Metric values -> (n, len(columns)) float32, min-max scaled per column over the rows given (one split, as the
    reference scales each split on its own). A constant column becomes 0.5. A DataFrame must hold every column
    (missing ones are a config error raised before any training); nulls/NaN are errors, not silently zero."""
    columns = list(S3BERT_ASPECTS if columns is None else columns)
    if isinstance(data, np.ndarray):
        matrix = np.asarray(data, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != len(columns):
            raise ValueError(f"S3BERT targets: expected a (rows, {len(columns)}) matrix for columns "
                             f"{', '.join(columns)}; got shape {matrix.shape}")
    else:
        missing = [c for c in columns if c not in data.columns]
        if missing:
            raise ConfigError(f"S3BERT targets: amr_metrics column(s) {', '.join(missing)} missing from the metric "
                              f"table (has: {', '.join(data.columns)}); compute those aspects before training")
        matrix = np.column_stack([data[c].cast(float).fill_null(np.nan).to_numpy() for c in columns]) \
            if len(data) else np.zeros((0, len(columns)))
    bad = [f"{c} ({int(n)} rows)" for c, n in zip(columns, (~np.isfinite(matrix)).sum(0), strict=True) if n]
    if bad:
        raise ValueError(f"S3BERT targets: null/NaN/inf metric values in {', '.join(bad)}; drop or recompute them")
    out = np.full(matrix.shape, CONSTANT_TARGET, dtype=np.float64)
    if len(matrix):
        lo, hi = matrix.min(0), matrix.max(0)
        spread = hi - lo
        varies = spread > 0
        out[:, varies] = (matrix[:, varies] - lo[varies]) / spread[varies]
    return out.astype(np.float32)


def partners(n: int, rng: np.random.Generator) -> np.ndarray:
    """For each of `n` pairs, another pair drawn uniformly (j != i): the one whose sentence2 its negative takes."""
    if n < 2:
        raise ValueError(f"with_negatives needs at least 2 pairs to swap partners, got {n}")
    return (np.arange(n) + rng.integers(1, n, size=n)) % n


def with_negatives(pairs: Sequence[tuple[str, str, Sequence[float] | np.ndarray]], rng: np.random.Generator,
                   score_pair: Callable[[int, int], Sequence[float] | np.ndarray]
                   ) -> list[tuple[str, str, np.ndarray]]:
    """The positives, then one negative per pair i: (sentence1 of i, sentence2 of its `partners` j) with targets
    `score_pair(i, j)` (graph1 of i vs graph2 of j). Raw values: normalise the extended list afterwards, as the
    reference normalises positives and negatives together."""
    drawn = partners(len(pairs), rng)
    width = len(pairs[0][2])
    out = [(s1, s2, np.asarray(t, dtype=np.float64)) for s1, s2, t in pairs]
    for i, j in enumerate(drawn.tolist()):
        targets = np.asarray(score_pair(i, j), dtype=np.float64)
        if targets.shape != (width,):
            raise ValueError(f"score_pair({i}, {j}) returned shape {targets.shape}; the pairs have {width} targets")
        out.append((pairs[i][0], pairs[j][1], targets))
    return out


def check_split(what: str, texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray,
                n_aspects: int) -> np.ndarray:
    """The targets as float32, after checking they align with the texts, have `n_aspects` columns, rows, no NaN."""
    y = np.asarray(targets, dtype=np.float32)
    if len(texts1) != len(texts2) or y.ndim != 2 or len(y) != len(texts1):
        raise ValueError(f"S3BERT {what}: {len(texts1)} sentence1s, {len(texts2)} sentence2s and targets of shape "
                         f"{y.shape}; they must align row by row")
    if y.shape[1] != n_aspects:
        raise ValueError(f"S3BERT {what}: targets have {y.shape[1]} columns but n_aspects={n_aspects}")
    if not len(y):
        raise ValueError(f"S3BERT {what}: no pairs")
    if not np.isfinite(y).all():
        raise ValueError(f"S3BERT {what}: targets contain NaN/inf (rows {np.where(~np.isfinite(y).all(1))[0][:10]})")
    return y


def fingerprint(texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray) -> str:
    """What a checkpoint was trained on: a hash of the texts and targets."""
    h = hashlib.sha256()
    h.update(json.dumps([list(texts1), list(texts2)], ensure_ascii=False).encode("utf-8"))
    h.update(np.ascontiguousarray(targets, dtype=np.float32).tobytes())
    return h.hexdigest()[:16]
