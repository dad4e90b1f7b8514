"""Corpus-level Smatch, as parser papers report it: micro-averaged over every pair, with a bootstrap interval.

P = sum(matched) / sum(n1), R = sum(matched) / sum(n2), F1 = 2PR / (P + R) = 2 sum(matched) / (sum(n1) + sum(n2)),
graph 1 the test graph (a parser's output) and graph 2 the gold one, as smatch 1.0.4 and smatchpp count a corpus.
A test graph that cannot be read counts as an empty graph (nothing matched, its gold triples all missed), as a
parser that produced nothing; a gold graph that cannot be read is an input error.

`corpus_aspects` sums the same way the counts of the fine-grained aspects (`aspect_counts`): amr-evaluation's table
of P / R / F per aspect over a corpus, micro-averaged. There a test graph that cannot be read has no values at all.

The interval is a percentile bootstrap over pairs: `samples` resamples of the pairs with replacement, drawn from
numpy's generator seeded with `seed`, F1 recomputed from the resampled sums; the (1 - confidence) / 2 and
(1 + confidence) / 2 quantiles bound it. Same pairs and seed, same interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from amrsim.amr.graph import AMRError, SmatchTriples, read_triples
from amrsim.metrics.aspects import COUNTED_ASPECTS, COUNTINGS, GraphView, aspect_counts
from amrsim.metrics.smatch import smatch

__all__ = ["AspectTotals", "CorpusSmatch", "PairCounts", "bootstrap_interval", "corpus_aspects", "corpus_smatch",
           "micro_prf", "pair_counts"]


@dataclass(frozen=True)
class PairCounts:
    """Matched triples and the two graphs' triple counts of every pair, plus which test graphs failed to read."""

    matched: np.ndarray
    n1: np.ndarray
    n2: np.ndarray
    failed: tuple[int, ...]  # indices of pairs whose test graph could not be read


@dataclass(frozen=True)
class CorpusSmatch:
    precision: float
    recall: float
    f1: float
    f1_low: float  # bootstrap interval of F1
    f1_high: float
    pairs: int
    failed: int  # test graphs that could not be read (counted as empty)
    matched: int
    n1: int
    n2: int
    samples: int
    seed: int
    confidence: float


class GoldGraphError(ValueError):
    """A gold graph that cannot be read: `index` is its pair's position."""

    def __init__(self, index: int, reason: str):
        super().__init__(reason)
        self.index = index


def pair_counts(test: Sequence[str | None], gold: Sequence[str], convention: str = "smatch", seed: int = 0,
                dereify: bool = False, on_progress: Callable[[int], None] | None = None) -> PairCounts:
    """Our Smatch on every (test, gold) pair; raises GoldGraphError on an unreadable gold graph. `on_progress(1)`
    after each pair."""
    n = len(gold)
    matched, n1, n2 = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    failed = []
    for i, (t, g) in enumerate(zip(test, gold, strict=True)):
        try:
            gold_triples = read_triples(g or "", convention, dereify)  # type: ignore[arg-type]
        except AMRError as e:
            raise GoldGraphError(i, str(e)) from None
        try:
            test_triples = read_triples(t or "", convention, dereify)  # type: ignore[arg-type]
        except AMRError:
            failed.append(i)
            n2[i] = len(gold_triples)
        else:
            s = smatch(test_triples, gold_triples, seed=seed)
            matched[i], n1[i], n2[i] = s.matched, s.n1, s.n2
        if on_progress is not None:
            on_progress(1)
    return PairCounts(matched, n1, n2, tuple(failed))


def micro_prf(matched: float, n1: float, n2: float) -> tuple[float, float, float]:
    p = matched / n1 if n1 else 0.0
    r = matched / n2 if n2 else 0.0
    return p, r, (2 * matched / (n1 + n2) if n1 + n2 else 0.0)


def bootstrap_interval(counts: PairCounts, samples: int = 1000, seed: int = 0, confidence: float = 0.95,
                       ) -> tuple[float, float]:
    """Percentile bootstrap interval of corpus F1 over pairs (see the module docstring)."""
    n = len(counts.matched)
    if n == 0 or samples <= 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed & (2**64 - 1))  # any integer, as the Smatch restarts take it (numpy needs >= 0)
    f1 = np.empty(samples)
    block = max(1, 2_000_000 // n)  # resamples drawn per step: memory stays ~16 MB whatever the corpus size
    for start in range(0, samples, block):
        rows = rng.integers(0, n, size=(min(block, samples - start), n))
        m, a, b = counts.matched[rows].sum(axis=1), counts.n1[rows].sum(axis=1), counts.n2[rows].sum(axis=1)
        total = a + b
        f1[start:start + len(rows)] = np.divide(2.0 * m, total, out=np.zeros(len(rows)), where=total > 0)
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(f1, [alpha, 1.0 - alpha])
    return float(low), float(high)


def corpus_smatch(test: Sequence[str | None], gold: Sequence[str], convention: str = "smatch", seed: int = 0,
                  samples: int = 1000, confidence: float = 0.95, dereify: bool = False,
                  on_progress: Callable[[int], None] | None = None) -> CorpusSmatch:
    """Micro-averaged Smatch of a corpus of (test, gold) graphs with a bootstrap interval of its F1 (`on_progress`:
    as `pair_counts` tells it)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie between 0 and 1, not {confidence}")
    counts = pair_counts(test, gold, convention, seed, dereify, on_progress)
    m, a, b = int(counts.matched.sum()), int(counts.n1.sum()), int(counts.n2.sum())
    p, r, f = micro_prf(m, a, b)
    low, high = bootstrap_interval(counts, samples, seed, confidence)
    return CorpusSmatch(p, r, f, low, high, len(gold), len(counts.failed), m, a, b, samples, seed, confidence)


@dataclass(frozen=True)
class AspectTotals:
    """One aspect over a corpus: counts summed over pairs (test = the first graphs, gold = the second) and the
    micro-averaged P / R / F1 they give."""

    aspect: str
    matched: int
    test: int
    gold: int
    precision: float
    recall: float
    f1: float


def corpus_aspects(test: Sequence[str | None], gold: Sequence[str], aspects: Sequence[str],
                   convention: str = "smatch", counting: str = "set", seed: int = 0, dereify: bool = False,
                   on_progress: Callable[[int], None] | None = None) -> tuple[list[AspectTotals], tuple[int, ...]]:
    """Micro-averaged P / R / F1 of every counted aspect over (test, gold) pairs, and the indices of test graphs that
    could not be read (counted as empty). Raises GoldGraphError on an unreadable gold graph, ValueError on an aspect
    that is not counted."""
    unknown = [a for a in aspects if a not in COUNTED_ASPECTS]
    if unknown:
        raise ValueError(f"unknown aspect(s) {', '.join(unknown)}; choose from {', '.join(COUNTED_ASPECTS)}")
    if counting not in COUNTINGS:
        raise ValueError(f"counting must be one of {', '.join(COUNTINGS)}, not '{counting}'")
    empty = GraphView(SmatchTriples((), (), (), ()))
    sums = {a: [0, 0, 0] for a in aspects}
    failed = []
    for i, (t, g) in enumerate(zip(test, gold, strict=True)):
        try:
            gold_view = GraphView.read(g or "", convention, dereify)
        except AMRError as e:
            raise GoldGraphError(i, str(e)) from None
        try:
            test_view = GraphView.read(t or "", convention, dereify)
        except AMRError:
            failed.append(i)
            test_view = empty
        for a, c in aspect_counts(test_view, gold_view, aspects, counting, seed).items():
            total = sums[a]
            total[0], total[1], total[2] = total[0] + c.matched, total[1] + c.first, total[2] + c.second
        if on_progress is not None:
            on_progress(1)
    rows = [AspectTotals(a, m, n1, n2, *_reference_prf(m, n1, n2)) for a, (m, n1, n2) in sums.items()]
    return rows, tuple(failed)


def _reference_prf(matched: int, n1: int, n2: int) -> tuple[float, float, float]:
    """P, R, F1 as amr-evaluation's scores.py computes them from summed counts (0 where a side counts nothing)."""
    p = matched / n1 if n1 else 0.0
    r = matched / n2 if n2 else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)
