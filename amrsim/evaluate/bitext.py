"""Bitext mining: Tatoeba top-1 retrieval accuracy and BUCC-style ratio-margin mining (Artetxe & Schwenk 2019).

Both search with faiss `IndexFlatIP` on L2-normalised vectors (inner product = cosine), as LASER, MSE-AMR and MTEB
do. Ties are made deterministic here rather than left to faiss: faiss only proposes the nearest candidates, their
cosines are recomputed in float64 from the normalised float32 vectors (identical vectors then score identically,
whatever their position), and among exactly equal cosines the lowest index wins. faiss itself does not promise
that: on its BLAS path (here from 256 x 512 vectors) its k=1 search returned a higher index than the first equal
one for about 30% of the queries in a set with many duplicated rows, and its top-k order among ties is not by index.
Reading the Tatoeba and BUCC files is `amrsim.ingest.bitext`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl

from amrsim.evaluate import Score

# faiss, sklearn are imported inside the functions: importing this module must stay cheap

MODES = ("forward", "backward", "intersect", "max")
CANDIDATE_SCHEMA: dict[str, Any] = {"src_idx": pl.Int64, "tgt_idx": pl.Int64, "score": pl.Float64}

_TOP1_POOL = 8  # faiss candidates rescored per query for Tatoeba top-1; a wider search only where all 8 tie
_RESCORE_ROWS = 2048  # query rows per float64 rescoring pass, to bound its scratch memory (rows x k x dim)
_TIE_TOL = 1e-6  # float32 faiss scores of equal float64 cosines differ by a few ulps at most


def _normalise(vectors: np.ndarray, name: str) -> np.ndarray:
    """A C-contiguous float32 copy with unit-L2 rows (inner product = cosine); NaN/inf or zero rows raise, since
    their cosine is undefined."""
    x = np.asarray(vectors)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (rows, dim), got shape {x.shape}")
    x64 = x.astype(np.float64)
    finite = np.isfinite(x64).all(axis=1)
    if not finite.all():
        raise ValueError(f"{name} row {int(np.argmin(finite))} holds NaN or inf")
    norms = np.linalg.norm(x64, axis=1)
    if (norms == 0).any():
        raise ValueError(f"{name} row {int(np.argmax(norms == 0))} is a zero vector (cosine undefined)")
    return np.ascontiguousarray(x64 / norms[:, None], dtype=np.float32)


def _check_pair(x: np.ndarray, y: np.ndarray, xname: str, yname: str) -> tuple[np.ndarray, np.ndarray]:
    xn, yn = _normalise(x, xname), _normalise(y, yname)
    if xn.shape[1] != yn.shape[1]:
        raise ValueError(f"{xname} has dimension {xn.shape[1]} but {yname} has {yn.shape[1]}")
    return xn, yn


def _rescore(queries: np.ndarray, base: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """float64 cosine of each query row with its candidate rows `base[idx]`, in row blocks."""
    out = np.empty(idx.shape, dtype=np.float64)
    for start in range(0, len(queries), _RESCORE_ROWS):
        q = queries[start : start + _RESCORE_ROWS].astype(np.float64)
        cand = base[idx[start : start + _RESCORE_ROWS]].astype(np.float64)  # (rows, k, dim)
        out[start : start + len(q)] = np.einsum("rd,rkd->rk", q, cand)
    return out


def _knn(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(cosines float64, indices), each (len(queries), k): the k nearest `base` rows by faiss, rescored in float64
    and ordered by descending cosine, then ascending index, so equal cosines come out in a fixed order."""
    import faiss  # ~0.25 s to import: only when searching

    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    _, idx = index.search(queries, k)
    idx = idx.astype(np.int64)
    sims = _rescore(queries, base, idx)
    order = np.lexsort((idx, -sims), axis=1)
    return np.take_along_axis(sims, order, axis=1), np.take_along_axis(idx, order, axis=1)


def _top1(queries: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Index of each query's nearest `base` row: the highest float64 cosine, the lowest index among equal ones.

    faiss proposes `_TOP1_POOL` candidates; where the last of them is within _TIE_TOL of the best, a tie group may
    reach past the pool, so those (rare) queries are searched again with an 8 times wider pool, up to all rows."""
    best = np.empty(len(queries), dtype=np.int64)
    rows = np.arange(len(queries))
    pool = min(_TOP1_POOL, len(base))
    while len(rows):
        sims, idx = _knn(queries[rows], base, pool)
        best[rows] = idx[:, 0]
        if pool == len(base):
            break
        rows = rows[sims[:, -1] >= sims[:, 0] - _TIE_TOL]
        pool = min(pool * 8, len(base))
    return best


# ---------------------------------------------------------------------------------------------------------------
# Tatoeba


def tatoeba_accuracy(src_vecs: np.ndarray, tgt_vecs: np.ndarray) -> dict[str, float | None]:
    """Top-1 retrieval accuracy x 100 over row-aligned translations: src->tgt is the share of rows i whose nearest
    target (cosine) is target i, tgt->src likewise, `accuracy` their mean (the Tatoeba number LASER, MSE-AMR and
    MTEB report; error rate = 100 - accuracy). Ties go to the lowest index, so a duplicated target sentence counts
    as correct only for its first occurrence. `f1_src2tgt` / `f1_tgt2src`: MTEB's Tatoeba main score, the
    support-weighted F1 x 100 of the retrieved row ids against the gold ids. None for zero rows."""
    from sklearn.metrics import f1_score

    src, tgt = _check_pair(src_vecs, tgt_vecs, "src_vecs", "tgt_vecs")
    if len(src) != len(tgt):
        raise ValueError(f"row-aligned bitext needs equal row counts: {len(src)} source vs {len(tgt)} target")
    n = len(src)
    if n == 0:
        return dict.fromkeys(TATOEBA_METRICS)
    gold = np.arange(n)
    s2t_pred, t2s_pred = _top1(src, tgt), _top1(tgt, src)
    s2t = float(np.mean(s2t_pred == gold) * 100)
    t2s = float(np.mean(t2s_pred == gold) * 100)
    f1 = {f"f1_{d}": float(f1_score(gold, pred, average="weighted", zero_division=0) * 100)
          for d, pred in (("src2tgt", s2t_pred), ("tgt2src", t2s_pred))}
    return {"accuracy_src2tgt": s2t, "accuracy_tgt2src": t2s, "accuracy": (s2t + t2s) / 2, **f1}


TATOEBA_METRICS = ("accuracy_src2tgt", "accuracy_tgt2src", "accuracy", "f1_src2tgt", "f1_tgt2src")


def tatoeba_scores(model: str, dataset: str, src_lang: str, tgt_lang: str, src_vecs: np.ndarray,
                   tgt_vecs: np.ndarray, split: str = "test") -> list[Score]:
    """`tatoeba_accuracy` as Scores (task "bitext", lang_pair "src-tgt", n = rows)."""
    acc = tatoeba_accuracy(src_vecs, tgt_vecs)
    pair = f"{src_lang}-{tgt_lang}"
    n = int(np.asarray(src_vecs).shape[0])
    return [Score("bitext", model, dataset, split, pair, metric, acc[metric], n) for metric in TATOEBA_METRICS]


# ---------------------------------------------------------------------------------------------------------------
# BUCC: ratio-margin mining


def _candidates_frame(src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> pl.DataFrame:
    df = pl.DataFrame({"src_idx": src.astype(np.int64), "tgt_idx": tgt.astype(np.int64),
                       "score": score.astype(np.float64)}, schema=CANDIDATE_SCHEMA)
    return df.sort(["score", "src_idx", "tgt_idx"], descending=[True, False, False])


def margin_candidates(X: np.ndarray, Y: np.ndarray, k: int = 4, mode: str = "max") -> pl.DataFrame:
    """Candidate pairs (src_idx, tgt_idx, score) by ratio margin, as LASER's mine_bitexts:

    margin(x, y) = cos(x, y) / (mean cos of x with its k nearest y / 2 + mean cos of y with its k nearest x / 2),
    i.e. the sums over the neighbourhoods divided by 2k; k is capped at the other side's row count. Each source
    x scores its k nearest targets and keeps the best ("forward"), each target likewise ("backward"); "intersect"
    keeps forward pairs that are also backward pairs; "max" pools both lists and walks them by descending score,
    keeping a pair only if neither its source nor its target is taken yet (one pair per sentence, as LASER).
    Among equal margins the nearer (higher cosine), then lower index wins; equal scores in "max" keep forward
    before backward, each in row order. Rows come sorted by score descending, then src_idx, tgt_idx."""
    if mode not in MODES:
        raise ValueError(f"unknown mining mode {mode!r}; expected one of {', '.join(MODES)}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    x, y = _check_pair(X, Y, "X", "Y")
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        return pl.DataFrame(schema=CANDIDATE_SCHEMA)
    x2y_sim, x2y_idx = _knn(x, y, min(int(k), n))
    y2x_sim, y2x_idx = _knn(y, x, min(int(k), m))
    x_mean, y_mean = x2y_sim.mean(axis=1), y2x_sim.mean(axis=1)
    fwd = x2y_sim / ((x_mean[:, None] + y_mean[x2y_idx]) / 2)  # (m, k): margin of x_i with its j-th neighbour
    bwd = y2x_sim / ((y_mean[:, None] + x_mean[y2x_idx]) / 2)  # (n, k)
    fwd_col, bwd_col = fwd.argmax(axis=1), bwd.argmax(axis=1)  # first max: nearest, then lowest index
    src_rows, tgt_rows = np.arange(m), np.arange(n)
    fwd_best, fwd_score = x2y_idx[src_rows, fwd_col], fwd[src_rows, fwd_col]
    bwd_best, bwd_score = y2x_idx[tgt_rows, bwd_col], bwd[tgt_rows, bwd_col]
    if mode == "forward":
        return _candidates_frame(src_rows, fwd_best, fwd_score)
    if mode == "backward":
        return _candidates_frame(bwd_best, tgt_rows, bwd_score)
    if mode == "intersect":
        mutual = bwd_best[fwd_best] == src_rows
        return _candidates_frame(src_rows[mutual], fwd_best[mutual], fwd_score[mutual])
    pool_src = np.concatenate([src_rows, bwd_best])
    pool_tgt = np.concatenate([fwd_best, tgt_rows])
    pool_score = np.concatenate([fwd_score, bwd_score])
    order = np.argsort(-pool_score, kind="stable")
    used_src, used_tgt = np.zeros(m, dtype=bool), np.zeros(n, dtype=bool)
    keep = np.zeros(len(order), dtype=bool)
    for p, s, t in zip(order.tolist(), pool_src[order].tolist(), pool_tgt[order].tolist(), strict=True):
        if not used_src[s] and not used_tgt[t]:
            used_src[s] = used_tgt[t] = True
            keep[p] = True
    return _candidates_frame(pool_src[keep], pool_tgt[keep], pool_score[keep])


def _is_gold(candidates: pl.DataFrame, gold: Iterable[tuple[int, int]]) -> np.ndarray:
    """Boolean per candidate row: is (src_idx, tgt_idx) a gold pair (vectorised on int64 pair codes)."""
    src = candidates["src_idx"].to_numpy().astype(np.int64)
    tgt = candidates["tgt_idx"].to_numpy().astype(np.int64)
    g = np.array(sorted(gold), dtype=np.int64).reshape(-1, 2)
    if not len(src) or not len(g):
        return np.zeros(len(src), dtype=bool)
    width = int(max(tgt.max(), g[:, 1].max())) + 1
    return np.isin(src * width + tgt, g[:, 0] * width + g[:, 1])


def choose_threshold(candidates: pl.DataFrame, gold: set[tuple[int, int]]) -> tuple[float | None, float | None]:
    """(threshold, F1 x 100) maximising F1 when pairs with score >= threshold are extracted, swept exactly over the
    candidate scores (the threshold is a candidate score, so `mine_f1` with it reproduces this F1). Ties in F1 keep
    the highest threshold. Empty gold: (None, None), F1 undefined. No candidate correct: F1 0 at every threshold,
    the highest score is returned. No candidates: (None, 0.0)."""
    if not gold:
        return None, None
    if candidates.height == 0:
        return None, 0.0
    df = candidates.sort("score", descending=True, maintain_order=True)
    scores = df["score"].to_numpy()
    correct = np.cumsum(_is_gold(df, gold))
    extracted = np.arange(1, len(scores) + 1)
    f1 = 2 * correct / (extracted + len(gold))  # = 2PR / (P + R), and 0 where nothing is correct
    last_of_run = np.append(scores[1:] != scores[:-1], True)  # ">= t" takes every candidate scoring t
    f1 = np.where(last_of_run, f1, -1.0)
    best = int(np.argmax(f1))
    return float(scores[best]), float(f1[best] * 100)


def mine_f1(candidates: pl.DataFrame, gold: set[tuple[int, int]], threshold: float) -> \
        tuple[float | None, float | None, float | None]:
    """(precision, recall, F1), each x 100, of the candidates with score >= threshold against gold. Precision is
    None when nothing is extracted; recall and F1 are None when gold is empty (undefined, not 0)."""
    chosen = candidates.filter(pl.col("score") >= threshold)
    correct = int(_is_gold(chosen, gold).sum())
    precision = correct / chosen.height * 100 if chosen.height else None
    if not gold:
        return precision, None, None
    recall = correct / len(gold) * 100
    f1 = 2 * correct / (chosen.height + len(gold)) * 100
    return precision, recall, f1


def bucc_scores(model: str, dataset: str, lang_pair: str,
                train: tuple[np.ndarray, np.ndarray, set[tuple[int, int]]],
                test: tuple[np.ndarray, np.ndarray, set[tuple[int, int]]],
                k: int = 4, mode: str = "max") -> list[Score]:
    """BUCC evaluation: mine candidates on both splits, choose the F1-best threshold on train, report precision,
    recall, F1 (x 100) and the threshold on test (task "bucc", split "test", n = test gold pairs). A threshold that
    cannot be chosen (empty train gold or no train candidates) leaves every test metric undefined."""
    x_tr, y_tr, gold_tr = train
    x_te, y_te, gold_te = test
    threshold, _ = choose_threshold(margin_candidates(x_tr, y_tr, k, mode), gold_tr)
    if threshold is None:
        values: dict[str, float | None] = dict.fromkeys(("precision", "recall", "f1", "threshold"))
    else:
        p, r, f = mine_f1(margin_candidates(x_te, y_te, k, mode), gold_te, threshold)
        values = {"precision": p, "recall": r, "f1": f, "threshold": threshold}
    n = len(gold_te)
    return [Score("bucc", model, dataset, "test", lang_pair, metric, value, n) for metric, value in values.items()]
