"""Bi-encoder kNN augmentation: top-k cosine neighbours with faiss, turned into weak-labelled silver pairs.

Augmented SBERT and PEAR sample unlabelled pairs by nearest-neighbour search over bi-encoder embeddings, so the
silver set holds mostly similar pairs instead of the near-random pairs that uniform sampling gives. A scorer (the
bi-encoder cosine by default, a cross-encoder later) then gives each pair a weak label.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import faiss
import numpy as np
import polars as pl

from amrsim.warehouse import FAILED, OK, content_key

KINDS = ("exact", "hnsw", "ivf")
HNSW_EF_CONSTRUCTION = 200
IVF_MIN_POINTS_PER_LIST = 39  # below this faiss k-means warns and its centroids get noisy
DEFAULT_CHUNK = 8192  # query rows per faiss call: results stay (chunk, k+1), never (n, n)
SCORE_BATCH = 10_000  # pairs per scorer call: a failure fails only its batch

_NORMALISE_ROWS = 65_536  # rows per float64 pass in normalise(), to bound its scratch memory

PAIR_SCHEMA: dict[str, Any] = {
    "key": pl.String,
    "sentence1_key": pl.String,
    "sentence2_key": pl.String,
    "rank": pl.Int64,
    "cosine": pl.Float64,
    "weak_label": pl.Float64,
    "scorer": pl.String,
    "k": pl.Int64,
    "index_kind": pl.String,
    "status": pl.String,
    "error": pl.String,
}


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown index kind {kind!r}; expected one of {', '.join(KINDS)}")


def _check_positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def normalise(vectors: np.ndarray) -> np.ndarray:
    """A float32 copy of `vectors` with unit-L2 rows, so inner product is cosine; bad rows raise ValueError."""
    x = np.asarray(vectors)
    if x.ndim != 2:
        raise ValueError(f"vectors must be a 2-D array (n, dim), got shape {x.shape}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"vectors is empty (shape {x.shape})")
    out = np.empty(x.shape, dtype=np.float32)
    for start in range(0, x.shape[0], _NORMALISE_ROWS):
        # float64 so large finite float32 values do not overflow the squared norm
        block = x[start : start + _NORMALISE_ROWS].astype(np.float64)
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            raise ValueError(f"vectors row {start + int(np.argmin(finite))} holds NaN or inf")
        norms = np.linalg.norm(block, axis=1)
        nonzero = norms > 0
        if not nonzero.all():
            raise ValueError(f"vectors row {start + int(np.argmin(nonzero))} is a zero vector (cosine undefined)")
        out[start : start + len(block)] = block / norms[:, None]
    return out


def default_nlist(n: int) -> int:
    """IVF list count: about 4*sqrt(n), capped so each list has >= 39 training points, and at least 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // IVF_MIN_POINTS_PER_LIST))


def _build(
    x: np.ndarray,
    kind: str,
    *,
    hnsw_m: int = 32,
    ef_search: int = 128,
    ef_construction: int = HNSW_EF_CONSTRUCTION,
    ivf_nlist: int | None = None,
    ivf_nprobe: int = 32,  # 0.94 recall@10 at 100k sentences (16: 0.90), bench_knn.py --sweep
    seed: int = 0,
) -> faiss.Index:
    """Index already-normalised float32 rows `x` for inner-product search."""
    _check_kind(kind)
    n, d = x.shape
    if kind == "exact":
        index = faiss.IndexFlatIP(d)
        index.add(x)
        return index
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, _check_positive("hnsw_m", hnsw_m), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = _check_positive("ef_construction", ef_construction)
        index.add(x)
        index.hnsw.efSearch = _check_positive("ef_search", ef_search)
        return index
    nlist = default_nlist(n) if ivf_nlist is None else _check_positive("ivf_nlist", ivf_nlist)
    if nlist > n:
        raise ValueError(f"ivf_nlist={nlist} exceeds the {n} vectors to train on")
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = int(seed)  # k-means init and subsampling: same seed, same lists
    index.train(x)
    index.add(x)
    index.nprobe = min(_check_positive("ivf_nprobe", ivf_nprobe), nlist)
    return index


def build_index(
    vectors: np.ndarray,
    kind: str = "exact",
    *,
    hnsw_m: int = 32,
    ef_search: int = 128,
    ef_construction: int = HNSW_EF_CONSTRUCTION,
    ivf_nlist: int | None = None,
    ivf_nprobe: int = 32,
    seed: int = 0,
) -> faiss.Index:
    """A faiss inner-product index over L2-normalised copies of `vectors` (so scores are cosines).

    kind: "exact" (IndexFlatIP), "hnsw" (IndexHNSWFlat) or "ivf" (IndexIVFFlat, k-means trained on the vectors).
    """
    _check_kind(kind)
    return _build(normalise(vectors), kind, hnsw_m=hnsw_m, ef_search=ef_search, ef_construction=ef_construction,
                  ivf_nlist=ivf_nlist, ivf_nprobe=ivf_nprobe, seed=seed)


def _drop_self(d: np.ndarray, i: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop each row's own id from its k+1 results, or its last result where the id is absent."""
    m, kk = i.shape
    is_self = i == rows[:, None]
    drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), kk - 1)
    keep = np.ones(i.shape, dtype=bool)
    keep[np.arange(m), drop] = False
    return d[keep].reshape(m, kk - 1), i[keep].reshape(m, kk - 1)


def search(
    index: faiss.Index,
    queries: np.ndarray,
    k: int,
    *,
    exclude_self: bool = True,
    chunk_size: int = DEFAULT_CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (scores float32, ids int64) of unit-norm `queries` in `index`, chunk by chunk; -1 / NaN where missing.

    With exclude_self, query row i is item i of the index and is left out of its own neighbours.
    """
    k = _check_positive("k", k)
    chunk_size = _check_positive("chunk_size", chunk_size)
    q = np.ascontiguousarray(queries, dtype=np.float32)
    n = q.shape[0]
    if exclude_self and n != index.ntotal:
        raise ValueError(f"exclude_self needs one query per indexed vector: {n} queries, {index.ntotal} indexed")
    scores = np.full((n, k), np.nan, dtype=np.float32)
    ids = np.full((n, k), -1, dtype=np.int64)
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        d, i = index.search(q[start:stop], k + 1 if exclude_self else k)
        if exclude_self:
            d, i = _drop_self(d, i, np.arange(start, stop))
        missing = i < 0
        # rounding can put a unit-vector dot product a hair outside [-1, 1]
        scores[start:stop] = np.where(missing, np.nan, np.clip(d, -1.0, 1.0))
        ids[start:stop] = np.where(missing, -1, i)
    return scores, ids


def knn(
    vectors: np.ndarray,
    k: int,
    kind: str = "exact",
    exclude_self: bool = True,
    *,
    chunk_size: int = DEFAULT_CHUNK,
    **index_options: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k cosine neighbours of every row: (scores float32 (n, k), indices int64 (n, k)), -1 / NaN where missing.

    The row itself is excluded; an identical vector at another index is a legitimate neighbour.
    index_options go to build_index (hnsw_m, ef_search, ef_construction, ivf_nlist, ivf_nprobe, seed).
    """
    _check_kind(kind)
    _check_positive("k", k)
    x = normalise(vectors)
    index = _build(x, kind, **index_options)
    return search(index, x, k, exclude_self=exclude_self, chunk_size=chunk_size)


def recall_at_k(approx_indices: np.ndarray, exact_indices: np.ndarray) -> float:
    """Mean over rows of |approx ∩ exact| / |valid exact| (-1 is not a neighbour); NaN when no row has any."""
    a = np.asarray(approx_indices)
    e = np.asarray(exact_indices)
    if a.ndim != 2 or e.ndim != 2 or a.shape[0] != e.shape[0]:
        raise ValueError(f"need two (n, k) index arrays with the same n, got {a.shape} and {e.shape}")
    valid = e >= 0
    found = (e[:, :, None] == a[:, None, :]).any(axis=2) & valid
    n_valid = valid.sum(axis=1)
    rows = n_valid > 0
    if not rows.any():
        return float("nan")
    return float(np.mean(found.sum(axis=1)[rows] / n_valid[rows]))


@runtime_checkable
class Scorer(Protocol):
    """Gives weak labels to pairs of row indices into the vectors / keys handed to augment_pairs."""

    name: str

    def score(self, pairs: list[tuple[int, int]]) -> np.ndarray: ...


class CosineScorer:
    """The bi-encoder's own cosine as weak label; augment_pairs reuses the kNN scores instead of calling score()."""

    def __init__(self, encoder: str = "biencoder", vectors: np.ndarray | None = None) -> None:
        self.encoder = encoder
        self.name = f"cosine:{encoder}"
        self._unit = None if vectors is None else normalise(vectors)

    def score(self, pairs: list[tuple[int, int]]) -> np.ndarray:
        """Cosines of the given index pairs (needs `vectors` at construction)."""
        if self._unit is None:
            raise ValueError("CosineScorer.score needs the vectors: CosineScorer(encoder, vectors=...)")
        idx = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        out = np.empty(len(idx), dtype=np.float64)
        for start in range(0, len(idx), SCORE_BATCH):
            block = idx[start : start + SCORE_BATCH]
            a = self._unit[block[:, 0]].astype(np.float64)
            b = self._unit[block[:, 1]].astype(np.float64)
            out[start : start + len(block)] = np.einsum("ij,ij->i", a, b)
        return np.clip(out, -1.0, 1.0)


@dataclass(frozen=True)
class CallableScorer:
    """Wraps fn(index pairs) -> labels under a name (e.g. a cross-encoder over the pairs' texts)."""

    name: str
    fn: Callable[[list[tuple[int, int]]], Any]

    def score(self, pairs: list[tuple[int, int]]) -> np.ndarray:
        return np.asarray(self.fn(pairs), dtype=np.float64)


def _label(scorer: Scorer, pairs: list[tuple[int, int]]) -> tuple[np.ndarray, list[str | None]]:
    """Weak labels for one batch, with a per-row error (None when fine); never raises on scorer faults."""
    n = len(pairs)
    labels = np.full(n, np.nan)
    try:
        out = np.asarray(scorer.score(pairs), dtype=np.float64)
    except Exception as exc:  # any scorer fault becomes failed rows, not a crashed batch job
        return labels, [f"scorer {scorer.name!r} raised {type(exc).__name__}: {exc}"] * n
    if out.shape != (n,):
        return labels, [f"scorer {scorer.name!r} returned shape {out.shape} for {n} pairs"] * n
    bad = ~np.isfinite(out)
    errors = [f"scorer {scorer.name!r} returned a non-finite label ({v})" if b else None
              for v, b in zip(out, bad, strict=True)]
    return np.where(bad, np.nan, out), errors


def _sorted_pairs(pairs: Iterable[tuple[str, str]]) -> pl.DataFrame:
    rows = [(a, b) if a <= b else (b, a) for a, b in pairs]
    return pl.DataFrame(rows, schema={"sentence1_key": pl.String, "sentence2_key": pl.String}, orient="row")


def augment_pairs(
    keys: Sequence[str],
    vectors: np.ndarray,
    k: int,
    labelled: set[tuple[str, str]] | None = None,
    kind: str = "exact",
    scorer: Scorer | None = None,
    *,
    chunk_size: int = DEFAULT_CHUNK,
    score_batch_size: int = SCORE_BATCH,
    **index_options: Any,
) -> pl.DataFrame:
    """Silver pairs from each sentence's top-k neighbours, one row per unordered pair, weak-labelled by `scorer`.

    keys[i] names vectors[i]. Pairs in `labelled` (either order) are left out, being gold already. Rows are sorted
    by (sentence1_key, sentence2_key) with sentence1_key < sentence2_key; rank is the best rank the pair was found
    at. A scorer that raises or returns the wrong shape marks its batch's rows status "failed" with the reason.
    """
    _check_kind(kind)
    k = _check_positive("k", k)
    score_batch_size = _check_positive("score_batch_size", score_batch_size)
    keys = list(keys)
    n_rows = np.asarray(vectors).shape[0] if np.ndim(vectors) else 0
    if len(keys) != n_rows:
        raise ValueError(f"{len(keys)} keys for {n_rows} vectors")
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise ValueError(f"duplicate sentence key {key!r}")
        seen.add(key)
    scorer = scorer if scorer is not None else CosineScorer()

    scores, ids = knn(vectors, k, kind, exclude_self=True, chunk_size=chunk_size, **index_options)
    n = len(keys)
    left = np.repeat(np.arange(n, dtype=np.int64), k)
    right = ids.ravel()
    ok = (right >= 0) & (right != left)
    key_series = pl.Series("key", keys, dtype=pl.String)
    df = pl.DataFrame({
        "query": left[ok],
        "other": right[ok],
        "rank": np.tile(np.arange(1, k + 1, dtype=np.int64), n)[ok],
        "cosine": scores.ravel()[ok].astype(np.float64),
    })
    df = df.with_columns(kq=key_series.gather(df["query"]), ko=key_series.gather(df["other"]))
    q_first = pl.col("kq") <= pl.col("ko")
    df = df.select(
        sentence1_key=pl.when(q_first).then(pl.col("kq")).otherwise(pl.col("ko")),
        sentence2_key=pl.when(q_first).then(pl.col("ko")).otherwise(pl.col("kq")),
        i1=pl.when(q_first).then(pl.col("query")).otherwise(pl.col("other")),
        i2=pl.when(q_first).then(pl.col("other")).otherwise(pl.col("query")),
        rank=pl.col("rank"),
        cosine=pl.col("cosine"),
        query=pl.col("query"),
    )
    if labelled:
        df = df.join(_sorted_pairs(labelled), on=["sentence1_key", "sentence2_key"], how="anti")
    df = (df.sort(["sentence1_key", "sentence2_key", "rank", "query"])
          .unique(subset=["sentence1_key", "sentence2_key"], keep="first", maintain_order=True))

    pairs = list(zip(df["i1"].to_list(), df["i2"].to_list(), strict=True))
    if isinstance(scorer, CosineScorer):
        weak = df["cosine"].to_numpy().copy()
        errors: list[str | None] = [None] * len(pairs)
    else:
        weak = np.full(len(pairs), np.nan)
        errors = [None] * len(pairs)
        for start in range(0, len(pairs), score_batch_size):
            batch = pairs[start : start + score_batch_size]
            labels, errs = _label(scorer, batch)
            weak[start : start + len(batch)] = labels
            errors[start : start + len(batch)] = errs

    s1 = df["sentence1_key"].to_list()
    s2 = df["sentence2_key"].to_list()
    return pl.DataFrame({
        "key": [content_key("augmented_pair", [a, b], scorer.name, k, kind) for a, b in zip(s1, s2, strict=True)],
        "sentence1_key": s1,
        "sentence2_key": s2,
        "rank": df["rank"],
        "cosine": df["cosine"],
        "weak_label": [None if e is not None else float(w) for w, e in zip(weak, errors, strict=True)],
        "scorer": [scorer.name] * len(pairs),
        "k": [k] * len(pairs),
        "index_kind": [kind] * len(pairs),
        "status": [OK if e is None else FAILED for e in errors],
        "error": errors,
    }, schema=PAIR_SCHEMA)
