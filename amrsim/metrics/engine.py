"""Batch engine: score a table of AMR graph pairs on any set of aspects, incremental by content key.

Every pair yields one row: aspect columns, `status` ok/failed and `error` (which graph, what is wrong). A graph that
does not parse fails its pairs only; the batch goes on. Cost per pair is bounded: Smatch's exact search stops at
its node budget (`smatch.node_budget`) and keeps the best alignment found, and graph sizes only grow WL features
linearly, so a pathological pair cannot stall the batch.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import polars as pl

from amrsim.warehouse.keys import content_key
from amrsim.warehouse.store import FAILED, OK

ALL_ASPECTS: tuple[str, ...] = (
    "smatch", "unlabeled", "no_wsd", "concepts", "frames", "named_entities", "negation", "wikification",
    "reentrancies", "srl", "quant_sim", "root_sim", "max_indegree_sim", "max_outdegree_sim", "max_degree_sim",
    "wlk", "wwlk",
)


def aspect_columns(aspects: Iterable[str]) -> list[str]:
    cols: list[str] = []
    for a in aspects:
        cols += ["smatch_precision", "smatch_recall", "smatch_f1"] if a == "smatch" else [a]
    return cols


@dataclass(frozen=True)
class MetricsOptions:
    """What decides a pair's scores: part of every row's content key."""

    aspects: tuple[str, ...] = ALL_ASPECTS
    convention: str = "amr"  # Smatch triples: "amr" (root concept in TOP) or "smatch" (smatch 1.0.4's)
    vectors: str = "minilm"  # node vectors for root/degree similarity and WWLK: minilm | random | file:<path>
    seed: int = 0
    wlk_iterations: int = 2
    wwlk_stability: int = 15
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [a for a in self.aspects if a not in ALL_ASPECTS]
        if unknown:
            raise ValueError(f"unknown aspect(s) {unknown}; choose from {list(ALL_ASPECTS)}")
        if self.convention not in ("amr", "smatch"):
            raise ValueError(f"convention must be 'amr' or 'smatch', not '{self.convention}'")

    @property
    def needs_vectors(self) -> bool:
        from amrsim.metrics.aspects import VECTOR_ASPECTS

        return any(a in (*VECTOR_ASPECTS, "wwlk") for a in self.aspects)

    def pair_key(self, amr1: str, amr2: str) -> str:
        return content_key("amr_metrics", amr1, amr2, asdict(self))


@lru_cache(maxsize=4)
def _node_vectors(source: str, seed: int):
    """One set of node vectors per process: loading MiniLM's embedding matrix takes a second or two."""
    from amrsim.metrics.vectors import load_node_vectors

    return load_node_vectors(source, seed=seed)


class _Scorer:
    """Parses each distinct graph once and scores pairs; node vectors load only if an aspect needs them."""

    def __init__(self, options: MetricsOptions):
        self.options = options
        self._views: dict[str, Any] = {}
        self._vectors = None

    def vector(self, label: str):
        if self._vectors is None:
            self._vectors = _node_vectors(self.options.vectors, self.options.seed)
        return self._vectors.vector(label)

    def view(self, text: str):
        """GraphView for a penman string, or the AMRError raised while reading it."""
        if text not in self._views:
            from amrsim.amr.graph import AMRError, parse, smatch_triples
            from amrsim.metrics.aspects import GraphView

            try:
                graph = parse(text)
                self._views[text] = (graph, GraphView(smatch_triples(graph, convention=self.options.convention)))
            except AMRError as e:
                self._views[text] = e
        return self._views[text]

    def score(self, amr1: str, amr2: str) -> dict[str, Any]:
        from amrsim.metrics.aspects import aspect_scores

        errors = []
        for name, text in (("amr1", amr1), ("amr2", amr2)):
            v = self.view(text or "")
            if isinstance(v, Exception):
                errors.append(f"{name}: {v}")
        if errors:
            return {"status": FAILED, "error": "; ".join(errors)}
        (graph1, view1), (graph2, view2) = self.view(amr1), self.view(amr2)
        opts = self.options
        row: dict[str, Any] = aspect_scores(view1, view2, [a for a in opts.aspects if a not in ("wlk", "wwlk")],
                                            self.vector, seed=opts.seed)
        if "wlk" in opts.aspects:
            from amrsim.metrics.wlk import wlk

            row["wlk"] = wlk(graph1, graph2, k=opts.wlk_iterations)
        if "wwlk" in opts.aspects:
            from amrsim.metrics.wlk import wwlk

            row["wwlk"] = wwlk(graph1, graph2, vectors=self._node_vectors(), k=opts.wlk_iterations,
                               stability_level=opts.wwlk_stability, seed=opts.seed)
        return row | {"status": OK, "error": None}

    def _node_vectors(self):
        self.vector("")  # loads them
        return self._vectors


def score_pairs(frame: pl.DataFrame, options: MetricsOptions) -> pl.DataFrame:
    """Score `frame` (columns amr1, amr2; others are kept) into key + aspect columns + status, error, seconds."""
    scorer = _Scorer(options)
    cols = aspect_columns(options.aspects)
    rows = []
    for amr1, amr2 in zip(frame["amr1"].to_list(), frame["amr2"].to_list(), strict=True):
        t0 = time.perf_counter()
        try:
            row = scorer.score(amr1, amr2)
        except Exception as e:  # a bug or a pathological graph fails this pair, not the batch
            row = {"status": FAILED, "error": f"{type(e).__name__}: {e}"[:500]}
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
    schema = {c: pl.Float64 for c in cols} | {"status": pl.String, "error": pl.String, "seconds": pl.Float64}
    scores = pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema)
    keys = [options.pair_key(a or "", b or "") for a, b in zip(frame["amr1"], frame["amr2"], strict=True)]
    return pl.concat([frame, scores], how="horizontal").with_columns(pl.Series("key", keys)).select(
        "key", *frame.columns, *schema)


def _init_worker(options: MetricsOptions | None) -> None:
    """Pool worker start-up: one BLAS thread (the processes are the parallelism), then the imports and node vectors
    the first batch would otherwise pay for."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass
    from amrsim.amr.graph import parse  # noqa: F401
    from amrsim.metrics import aspects, wlk  # noqa: F401

    wlk._pot()
    if options is not None and options.needs_vectors:
        _node_vectors(options.vectors, options.seed).vector("thing")


def worker_pool(workers: int, options: MetricsOptions | None = None) -> ProcessPoolExecutor:
    """A process pool for `score_pairs_parallel`; pass it to several calls to start the workers once."""
    # spawn, not fork: forking a process whose polars/BLAS thread pools are running can deadlock the children.
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(options,))


def score_pairs_parallel(frame: pl.DataFrame, options: MetricsOptions, workers: int | None = None,
                         batch_size: int = 128, pool: ProcessPoolExecutor | None = None) -> pl.DataFrame:
    """`score_pairs` over processes (library-level; the pipeline distributes with Ray in the task layer). Uses `pool`
    if given (its size wins over `workers`), else starts one for this call."""
    workers = pool._max_workers if pool is not None else (workers or os.cpu_count() or 1)
    if workers <= 1 or frame.height <= batch_size:
        return score_pairs(frame, options)
    batches: Sequence[pl.DataFrame] = [frame.slice(i, batch_size) for i in range(0, frame.height, batch_size)]
    if pool is not None:
        parts = list(pool.map(score_pairs, batches, [options] * len(batches)))
    else:
        with worker_pool(workers, options) as own:
            parts = list(own.map(score_pairs, batches, [options] * len(batches)))
    return pl.concat(parts, how="vertical_relaxed")
