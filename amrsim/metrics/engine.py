"""Batch engine: score a table of AMR graph pairs on any set of aspects, incremental by content key.

Every pair yields one row: aspect columns, `status` ok/failed and `error` (which graph, what is wrong). A graph that
does not parse fails its pairs only; the batch goes on. Cost per pair is bounded, so a pathological pair cannot stall
the batch: the Smatch family's search stops at its node and work budgets (`smatch.DEFAULT_NODE_BUDGET`,
`DEFAULT_WORK_BUDGET`) and keeps the best alignment found; WWLK averages fewer stability runs, or gives none, past
its work budget (`wlk.DEFAULT_WWLK_WORK_BUDGET`); the other aspects grow linearly with the graphs. The `bounded`
column names the aspects a budget cut on that pair. Budgets count operations, never time, so results stay
deterministic.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import polars as pl
import pyarrow as pa

from amrsim.amr.graph import AMRError, parse, smatch_triples
from amrsim.columns import FAILED, OK
from amrsim.metrics.aspects import (
    ALL_ASPECTS,
    ASPECTS,
    COUNTINGS,
    GraphView,
    Pair,
    Search,
    metric_fields,
    score_aspects,
)
from amrsim.metrics.smatch import align_many, align_texts, current_table, text_encoder
from amrsim.metrics.vectors import load_node_vectors
from amrsim.procs import die_with_parent
from amrsim.warehouse.keys import content_key, text_keys

# threadpoolctl and other amrsim modules are imported in the functions: keeps this module cheap, free of cycles

# Part of every row's key: a change of what the metrics compute (here: quoted concepts, alignments, WLK labels and
# constants, the TOP triple of Damonte's subgraphs; 3: aspects read :mod as written, multiset option, amr-evaluation's
# No WSD, negations and wikification) makes earlier rows stale, so a refresh computes them again.
METRICS_VERSION = 3


def aspect_columns(aspects: Iterable[str]) -> list[str]:
    """The columns the aspects give, in order (each aspect's declared columns)."""
    return [f.name for f in metric_fields(aspects)]


def aspect_schema(aspects: Iterable[str]) -> dict[str, pl.DataType]:
    """The aspects' columns with their polars types (from the declared Arrow types)."""
    return dict(pl.from_arrow(pa.schema(metric_fields(aspects)).empty_table()).schema)


@dataclass(frozen=True)
class MetricsOptions:
    """What decides a pair's scores: part of every row's content key."""

    aspects: tuple[str, ...] = ALL_ASPECTS
    convention: str = "amr"  # Smatch triples: "amr" (root concept in TOP) or "smatch" (smatch 1.0.4's)
    vectors: str = "minilm"  # node vectors for root/degree similarity and WWLK: minilm | random | file:<path>
    seed: int = 0
    wlk_iterations: int = 2
    wwlk_stability: int = 15
    dereify: bool = False  # collapse reified nodes (`have-mod-91` -> `:mod`) before the Smatch family and set aspects
    counting: str = "set"  # set aspects: each value once per graph (set) or every occurrence (multiset)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [a for a in self.aspects if a not in ASPECTS]
        if unknown:
            raise ValueError(f"unknown aspect(s) {unknown}; choose from {list(ASPECTS)}")
        twice = sorted({a for a in self.aspects if self.aspects.count(a) > 1})
        if twice:  # each aspect's columns once: a row cannot hold two columns of one name
            raise ValueError(f"aspect(s) named twice: {', '.join(twice)}")
        if self.convention not in ("amr", "smatch"):
            raise ValueError(f"convention must be 'amr' or 'smatch', not '{self.convention}'")
        if self.counting not in COUNTINGS:
            raise ValueError(f"counting must be one of {', '.join(COUNTINGS)}, not '{self.counting}'")

    @property
    def needs_vectors(self) -> bool:
        return any(ASPECTS[a].needs_vectors for a in self.aspects)

    def key_fields(self) -> dict[str, Any]:
        """What a row's key holds besides the graphs: the options and the metrics' version."""
        return asdict(self) | {"metrics_version": METRICS_VERSION}

    def pair_key(self, amr1: str, amr2: str) -> str:
        return content_key("amr_metrics", amr1, amr2, self.key_fields())

    def pair_keys(self, amr1: Iterable[str | None], amr2: Iterable[str | None]) -> list[str]:
        """`pair_key` of every pair (None read as ""), the options encoded once."""
        return text_keys((_texts(amr1), _texts(amr2)), prefix=("amr_metrics",), suffix=(self.key_fields(),))


def _texts(values: Iterable[str | None]) -> list[str]:
    """The values as a list of str, None read as ""."""
    if isinstance(values, pl.Series):
        return values.fill_null("").to_list()
    return [v or "" for v in values]


@lru_cache(maxsize=4)
def _node_vectors(source: str, seed: int):
    """One set of node vectors per process: loading MiniLM's embedding matrix takes a second or two."""
    return load_node_vectors(source, seed=seed)


class _Scorer:
    """Reads each distinct graph once and scores pairs; node vectors load only if an aspect needs them. The penman
    graph is built only for the aspects that read it (`reads="graph"`: WLK, WWLK); the others need just its Smatch
    triples (a `GraphView`)."""

    MAX_VIEWS = 50_000  # graphs kept; a long-lived worker starts over past this (scores do not depend on it)

    def __init__(self, options: MetricsOptions):
        self.options = options
        self._views: dict[str, Any] = {}
        self._vectors = None
        self._on_graphs = [a for a in options.aspects if ASPECTS[a].reads == "graph"]
        self._on_views = [a for a in options.aspects if ASPECTS[a].reads == "view"]
        self._family = [a for a in self._on_views if ASPECTS[a].search]  # the aspects that search

    def vector(self, label: str):
        if self._vectors is None:
            self._vectors = _node_vectors(self.options.vectors, self.options.seed)
        return self._vectors.vector(label)

    def view(self, text: str):
        """(penman graph or None, GraphView) for a penman string, or the AMRError raised while reading it."""
        v = self._views.get(text)
        if v is None:
            if len(self._views) >= self.MAX_VIEWS:
                self._views.clear()
            try:
                convention, dereify = self.options.convention, self.options.dereify
                if self._on_graphs:
                    graph = parse(text)
                    triples = smatch_triples(graph, convention=convention, dereify=dereify)  # read: the same errors
                    v = (graph, GraphView.read(graph, convention, dereify, triples)  # (WLK/WWLK alone need none)
                         if self._on_views else None)
                else:
                    v = (None, GraphView.read(text, convention, dereify))
            except AMRError as e:
                v = e
            self._views[text] = v
        return v

    def score(self, amr1: str, amr2: str, searches: list[Search] | None = None, part: str = "all") -> dict[str, Any]:
        """The pair's row; with `searches`, its Smatch-family searches are left there (see `aspect_scores`). `part`:
        "all" the aspects, "family" the Smatch-family ones only, "rest" all but those (the aspects that read the
        penman graphs and `bounded` included): the two parts' columns make the whole row."""
        v1, v2 = self.view(amr1 or ""), self.view(amr2 or "")
        if isinstance(v1, Exception) or isinstance(v2, Exception):
            return {"status": FAILED, "error": _read_errors(v1, v2)}
        (graph1, view1), (graph2, view2) = v1, v2
        opts = self.options
        bounded: list[str] = []
        pair = Pair(view1, view2, self.vector, seed=opts.seed, counting=opts.counting, bounded=bounded,
                    searches=searches, graphs=(graph1, graph2), node_vectors=self._node_vectors, options=opts)
        aspects = {"all": self._on_views, "family": self._family,
                   "rest": [a for a in self._on_views if a not in self._family]}[part]
        row: dict[str, Any] = score_aspects(pair, aspects)
        if part == "family":
            return row | {"status": OK}
        row |= score_aspects(pair, self._on_graphs)  # after the others: `bounded` names them in that order
        return row | {"status": OK, "error": None, "bounded": ",".join(bounded) or None}

    def _node_vectors(self):
        self.vector("")  # loads them
        return self._vectors


def _read_errors(v1: Any, v2: Any) -> str:
    return "; ".join(f"{name}: {v}" for name, v in (("amr1", v1), ("amr2", v2)) if isinstance(v, Exception))


_SCORERS: dict[str, _Scorer] = {}


def _scorer(options: MetricsOptions) -> _Scorer:
    """One scorer per options and process, so graphs shared by several batches are read once."""
    name = json.dumps(asdict(options), sort_keys=True, default=str)
    scorer = _SCORERS.get(name)
    if scorer is None:
        if len(_SCORERS) >= 2:
            _SCORERS.clear()
        scorer = _SCORERS[name] = _Scorer(options)
    return scorer


Decide = Callable[[int], "bool | None"]


def _score_columns(amr1: Sequence[str | None], amr2: Sequence[str | None], options: MetricsOptions,
                   threads: int = 1, decide: Decide | None = None,
                   on_progress: Callable[[int], None] | None = None) -> pl.DataFrame:
    """Aspect columns + status, error, seconds for aligned lists of graphs (what a pool worker returns); `threads`:
    threads this process may score on (no score depends on them). `decide(rows out)`, where given, is asked after
    each slice of pairs until it answers: True ends scoring there (the frame holds the first rows only), False goes
    on to the end without asking again, None asks again after the next slice. While it has not answered, no slice
    starts before the rows before it are out, so the CPU time the process has spent is these rows' cost.
    `on_progress(pairs)` is told after each slice."""
    scorer = _scorer(options)
    columns = aspect_schema(options.aspects)
    values: dict[str, list[Any]] = {c: [] for c in (*columns, "status", "error", "seconds", "bounded")}
    # Scoring makes many small acyclic objects; the cyclic collector's full passes over everything the process has
    # imported (polars, numpy, the vectors' tokenizer) took a third of the time. Off for the loop, back on after.
    collecting = gc.isenabled()
    gc.disable()
    try:
        if options.aspects == ("smatch",):
            _smatch_loop(scorer, amr1, amr2, values, threads, decide, on_progress)
        elif any(ASPECTS[a].one_blas_thread for a in options.aspects):
            # WWLK multiplies matrices of a few dozen rows: a second BLAS thread only waits (more so on a busy
            # machine), so one, as in the worker processes
            from threadpoolctl import threadpool_limits

            with threadpool_limits(1):
                _aspects_slices(scorer, amr1, amr2, values, threads, decide, on_progress)
        else:
            _aspects_slices(scorer, amr1, amr2, values, threads, decide, on_progress)
    finally:
        if collecting:
            gc.enable()
    schema = columns | {"status": pl.String, "error": pl.String, "seconds": pl.Float64, "bounded": pl.String}
    return pl.DataFrame(values, schema=schema)


ASPECTS_SLICE = 128  # pairs scored in Python before their Smatch-family searches run, at once, in C
PILOT_SLICE = 8  # a pilot's first slice of pairs (see `_score_columns`' `decide`); then twice as many each time
SLICES_AHEAD = 16  # slices whose searches start before this one's other aspects: the rows held stay a few thousand
SEARCH_OOM = "MemoryError: the pair's alignment tables do not fit in memory"


def _aspects_slices(scorer: _Scorer, amr1: Sequence[str | None], amr2: Sequence[str | None],
                    values: dict[str, list[Any]], threads: int = 1, decide: Decide | None = None,
                    on_progress: Callable[[int], None] | None = None) -> None:
    """Every aspect of every pair, rows in input order, by slices of ASPECTS_SLICE pairs. The Smatch-family part of
    each slice is scored here (the graphs' views and encodings) with its searches left aside (`aspect_scores`'
    `searches`), and the slice's searches start in one C call (`align_many`, without the GIL), SLICES_AHEAD slices
    ahead of the rest (sets, vectors, WLK, WWLK: Python, which holds the GIL) of the slice whose rows leave next, as
    soon as its searches have ended. With more than one thread the searches run on other threads meanwhile: they are
    half the time of all aspects, most of it a few Unlabeled searches that reach their budget, and starting them
    well ahead of the Python part keeps any slice, the last ones included, from waiting for them. While `decide`
    (see `_score_columns`) has not answered, nothing starts ahead."""
    seed = scorer.options.seed

    def search(searches: list[tuple[int, Search]]) -> list[Any]:
        try:
            return align_many([s.first for _, s in searches], [s.second for _, s in searches], seed=seed,
                              threads=threads)
        except Exception as e:  # (a bug) fails the pairs with a search in the slice, not the batch
            return [f"{type(e).__name__}: {e}"[:500]] * len(searches)

    overlap = threads > 1 and bool(scorer._family)  # even one slice: its searches run while the rest is scored
    # a pilot's first slices are small, so that a costly input is decided on early
    slices = _slices(len(amr1), ASPECTS_SLICE, PILOT_SLICE if decide is not None else ASPECTS_SLICE)
    ahead = SLICES_AHEAD if decide is None else 0
    pending: deque[tuple[list[dict[str, Any]] | None, list[tuple[int, Search]], Any]] = deque()
    started = 0  # slices whose family part is scored and searches started
    with ThreadPoolExecutor(1) if overlap else nullcontext() as searcher, _cancelled_on_exit(pending):
        for n, (start, stop) in enumerate(slices):
            while started < len(slices) and started <= n + ahead:
                first, last = slices[started]
                family, searches = (_score_slice(scorer, amr1[first:last], amr2[first:last], "family")
                                    if scorer._family else (None, []))
                job = search(searches) if searcher is None or not searches else searcher.submit(search, searches)
                pending.append((family, searches, job))
                started += 1
            rest, _ = _score_slice(scorer, amr1[start:stop], amr2[start:stop], "rest")
            family, searches, job = pending.popleft()
            _emit_slice(rest if family is None else _whole_rows(family, rest), searches, job, values)
            if on_progress is not None:
                on_progress(stop - start)
            if decide is not None:
                answer = decide(len(values["status"]))
                if answer:
                    return  # (nothing was started ahead)
                if answer is not None:
                    decide, ahead = None, SLICES_AHEAD


def _slices(n: int, size: int, first: int) -> list[tuple[int, int]]:
    """(start, stop) of slices covering n items: `first` items, then twice as many each time, up to `size`."""
    out, start, step = [], 0, min(first, size)
    while start < n:
        out.append((start, min(start + step, n)))
        start, step = start + step, min(2 * step, size)
    return out


def _whole_rows(family: list[dict[str, Any]], rest: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pair's row from its two parts: the first part that failed, or both parts' columns and seconds."""
    rows = []
    for one, two in zip(family, rest, strict=True):
        whole = one if one["status"] == FAILED else two if two["status"] == FAILED else one | two
        rows.append(whole | {"seconds": one["seconds"] + two["seconds"]})
    return rows


@contextmanager
def _cancelled_on_exit(pending: deque) -> Iterator[None]:
    """On an exception (Ctrl-C included), the searches not yet started are cancelled: leaving the executor waits for
    the one running only, not for every slice queued ahead."""
    try:
        yield
    except BaseException:
        for _rows, _searches, job in pending:
            if isinstance(job, Future):
                job.cancel()
        raise


def _score_slice(scorer: _Scorer, amr1: Sequence[str | None], amr2: Sequence[str | None],
                 part: str = "all") -> tuple[list[dict[str, Any]], list[tuple[int, Search]]]:
    """Each pair's row (`part` of it: see `_Scorer.score`), its searched columns None, and the searches that fill
    them (by the row's index)."""
    rows: list[dict[str, Any]] = []
    searches: list[tuple[int, Search]] = []
    for a, b in zip(amr1, amr2, strict=True):
        t0 = time.perf_counter()
        mine: list[Search] = []
        try:
            row = scorer.score(a, b, mine, part)
        except Exception as e:  # a bug or a pathological graph fails this pair, not the batch
            row, mine = {"status": FAILED, "error": f"{type(e).__name__}: {e}"[:500]}, []
            del e
        row["seconds"] = time.perf_counter() - t0
        searches += [(len(rows), s) for s in mine]
        rows.append(row)
    return rows, searches


def _emit_slice(rows: list[dict[str, Any]], searches: list[tuple[int, Search]], job: Any,
                values: dict[str, list[Any]]) -> None:
    """The slice's rows, their searches' scores filled in (a search that reached its budget named in `bounded`,
    before WWLK as when run in turn), appended to `values`."""
    found = job.result() if isinstance(job, Future) else job
    cut: dict[int, list[str]] = {}
    for (k, s), result in zip(searches, found, strict=True):
        row = rows[k]
        if row["status"] == FAILED:
            continue
        if result is None or isinstance(result, str):
            rows[k] = {"status": FAILED, "error": SEARCH_OOM if result is None else result, "seconds": row["seconds"]}
            continue
        p, r, f, optimal, took = result
        row |= ASPECTS[s.aspect].from_search(p, r, f)
        row["seconds"] += took
        if not optimal:
            cut.setdefault(k, []).append(s.aspect)
    for k, names in cut.items():
        if rows[k]["status"] != FAILED:
            rows[k]["bounded"] = ",".join(names + ([rows[k]["bounded"]] if rows[k]["bounded"] else []))
    for row in rows:
        for c, column in values.items():
            column.append(row.get(c))


SMATCH_SLICE = 256  # pairs read, encoded and aligned in one C call (Ctrl-C is seen between slices)


def _smatch_loop(scorer: _Scorer, amr1: Sequence[str | None], amr2: Sequence[str | None],
                 values: dict[str, list[Any]], threads: int = 1, decide: Decide | None = None,
                 on_progress: Callable[[int], None] | None = None) -> None:
    """`_aspects_slices` for `--aspects smatch` alone, the same rows without a dict per pair (the pairs/s users see
    on large files): per slice of pairs, one C call reads, encodes and aligns every pair on `threads` threads without
    the GIL (`align_texts`). The few pairs it leaves to the Python path (a graph not ASCII or one penman must read,
    an empty graph) are read by `text_encoder`, which gives their exact error, and aligned by `align_many`. A pair's
    seconds are its reading plus its search. `decide`: see `_score_columns` (each slice ends before the next)."""
    precision, recall, f1 = values["smatch_precision"], values["smatch_recall"], values["smatch_f1"]
    status, error, seconds, bounded = values["status"], values["error"], values["seconds"], values["bounded"]
    clock, convention, seed = time.perf_counter, scorer.options.convention, scorer.options.seed
    dereify = scorer.options.dereify
    encoded = text_encoder(convention, dereify)

    def graph(text: str | None, labels: Any) -> Any:  # the encoding, or the reading error
        try:
            return encoded(text or "", labels)
        except AMRError as e:
            return e

    def python_path(a_part: Sequence[str | None], b_part: Sequence[str | None], scored: list[Any],
                    spent: dict[int, float]) -> None:
        """The pairs of the slice align_texts left (None) read in Python and aligned, in place; a failed pair's
        reading time into `spent`."""
        labels, todo, first, second = current_table(), [], [], []
        for k, outcome in enumerate(scored):
            if outcome is not None:
                continue
            t0 = clock()
            try:
                v1, v2 = graph(a_part[k], labels), graph(b_part[k], labels)
                if isinstance(v1, Exception) or isinstance(v2, Exception):
                    scored[k], spent[k] = _read_errors(v1, v2), clock() - t0
                else:
                    todo.append((k, clock() - t0))
                    first.append(v1)
                    second.append(v2)
            except Exception as e:  # a bug or a pathological graph fails this pair, not the batch
                scored[k], spent[k] = f"{type(e).__name__}: {e}"[:500], clock() - t0
                del e
        if todo:
            for (k, took), result in zip(todo, align_many(first, second, seed=seed), strict=True):
                if result is None:
                    scored[k], spent[k] = SEARCH_OOM, took
                else:
                    scored[k] = (*result[:4], took + result[4])

    for start in range(0, len(amr1), SMATCH_SLICE):  # (one slice is milliseconds: a pilot's too)
        a_part, b_part = amr1[start:start + SMATCH_SLICE], amr2[start:start + SMATCH_SLICE]
        spent: dict[int, float] = {}
        try:
            scored: list[Any] = align_texts(a_part, b_part, convention, seed=seed, threads=threads, dereify=dereify)
            python_path(a_part, b_part, scored, spent)
        except Exception as e:  # (a bug) fails the slice's pairs, not the batch
            scored = [f"{type(e).__name__}: {e}"[:500]] * len(a_part)
            del e
        if not any(isinstance(outcome, str) for outcome in scored):  # every pair scored: by column
            p, r, f, optimal, took = zip(*scored, strict=True) if scored else ((),) * 5
            precision.extend(p)
            recall.extend(r)
            f1.extend(f)
            status.extend([OK] * len(scored))
            error.extend([None] * len(scored))
            bounded.extend([None if o else "smatch" for o in optimal])
            seconds.extend(took)
        else:
            _extend_by_row(values, scored, spent)
        if on_progress is not None:
            on_progress(len(a_part))
        if decide is not None:
            answer = decide(len(status))
            if answer:
                return
            if answer is not None:
                decide = None


def _extend_by_row(values: dict[str, list[Any]], scored: list[Any], spent: dict[int, float]) -> None:
    """`_smatch_loop`'s rows of a slice with a failed pair, one by one."""
    precision, recall, f1 = values["smatch_precision"], values["smatch_recall"], values["smatch_f1"]
    status, error, seconds, bounded = values["status"], values["error"], values["seconds"], values["bounded"]
    for k, outcome in enumerate(scored):
        if isinstance(outcome, str):
            precision.append(None)
            recall.append(None)
            f1.append(None)
            status.append(FAILED)
            error.append(outcome)
            bounded.append(None)
            seconds.append(spent.get(k, 0.0))
        else:
            p, r, f, optimal, took = outcome
            precision.append(p)
            recall.append(r)
            f1.append(f)
            status.append(OK)
            error.append(None)
            bounded.append(None if optimal else "smatch")
            seconds.append(took)


def _with_keys(frame: pl.DataFrame, scores: pl.DataFrame, options: MetricsOptions) -> pl.DataFrame:
    """`frame` + `scores` with each row's content key first: the frame's own `key` column where the caller has
    computed it already (the CLI and the stage do, to skip known pairs), else computed here."""
    if "key" in frame.columns:
        return pl.concat([frame, scores], how="horizontal").select("key", pl.exclude("key"))
    keys = options.pair_keys(frame["amr1"].to_list(), frame["amr2"].to_list())
    return pl.concat([frame, scores], how="horizontal").with_columns(pl.Series("key", keys, pl.String)).select(
        "key", *frame.columns, *scores.columns)


def score_pairs(frame: pl.DataFrame, options: MetricsOptions) -> pl.DataFrame:
    """Score `frame` (columns amr1, amr2; others are kept; a `key` column is taken as the pairs' content keys) into
    key + aspect columns + status, error, seconds."""
    return _with_keys(frame, _score_columns(frame["amr1"].to_list(), frame["amr2"].to_list(), options), options)


def _init_worker(options: MetricsOptions | None, parent_pid: int | None = None) -> None:
    """Pool worker start-up: tied to the process that started the pool (a SIGKILLed CLI leaves no workers behind),
    one BLAS thread (the processes are the parallelism), then the imports and node vectors the first batch would
    otherwise pay for. A terminal's Ctrl-C reaches the whole process group: a worker then ends at once and quietly
    (the default action, not a KeyboardInterrupt traceback per worker); the command reports the stop. Where the
    command ignores SIGINT (started in the background by a shell, or under nohup), the worker, which inherits that,
    ignores it too: the pool must not die under a command that goes on."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    if parent_pid is not None:
        die_with_parent(parent_pid)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass

    warm_up(options)


def warm_up(options: MetricsOptions | None) -> None:
    """What the first pairs would otherwise pay for, once per process: POT's import (WWLK) and the node vectors
    (seconds). A pool worker does it at start-up; a pilot before it times pairs, so that it times pairs only."""
    for aspect in ASPECTS.values() if options is None else [ASPECTS[a] for a in options.aspects]:
        if aspect.warm_up is not None:
            aspect.warm_up()
    if options is not None and options.needs_vectors:
        _node_vectors(options.vectors, options.seed).vector("thing")


def worker_pool(workers: int, options: MetricsOptions | None = None) -> ProcessPoolExecutor:
    """A process pool for `score_pairs_parallel`; pass it to several calls to start the workers once."""
    # spawn, not fork: forking a process whose polars/BLAS thread pools are running can deadlock the children.
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(options, os.getpid()))


POOL_START_S = 1.5  # seconds a spawned worker takes to import the engine, here and under load (measured)
VECTORS_LOAD_S = 1.5  # and to load MiniLM's node vectors, where an aspect needs them
PILOT_S = 0.25  # pairs scored in this process while timed, before deciding on a pool
BATCH_S = 0.25  # aimed-at seconds of work per batch sent to a worker: few round trips, balanced ends


class PairScorer:
    """Scores frames of graph pairs in this process or on a pool of worker processes that starts at most once and
    serves every later call (the stage's chunks, say). `workers=None` chooses: pairs are scored here, timed, for
    `PILOT_S`; the pool starts only if the rest would then finish sooner on it, start-up included, counting only the
    cores other jobs leave idle. A given `workers` (or `pool`) is used as is. Scores never depend on the choice: each
    pair's row depends on the pair and the options only."""

    def __init__(self, options: MetricsOptions, workers: int | None = None,
                 pool: ProcessPoolExecutor | None = None, cores: int | None = None, batch_size: int | None = None,
                 idle_cores: float | None = None, on_progress: Callable[[int], None] | None = None):
        self.options = options
        self.on_progress = on_progress  # told the pairs scored, slice by slice here, batch by batch on the pool
        self.cores = cores or _usable_cores()
        self.idle_cores = idle_cores  # None: measured (load average) when deciding
        self.batch_size = batch_size  # pairs per worker batch; None: about BATCH_S of work each
        self.workers = pool._max_workers if pool is not None else workers  # type: ignore[attr-defined]
        self._pool, self._own_pool = pool, False
        self._seconds_per_pair: float | None = None  # measured here, in this process
        self.used_pool = False  # whether any pairs went to worker processes (reported and tested)
        self.loading_seconds = 0.0  # spent here loading what the process loads once (`warm_up`; reported)

    # -- the choice ---------------------------------------------------------------------------------------------
    def pool_size(self) -> int:
        return self.workers if self.workers is not None else max(1, self.cores)

    def start_up_seconds(self) -> float:
        return POOL_START_S + (VECTORS_LOAD_S if self.options.needs_vectors else 0.0)

    def _idle_cores(self) -> float:
        """Cores other jobs leave free: on a machine already busy, more processes only share the same cores."""
        if self.idle_cores is not None:
            return self.idle_cores
        try:
            others = max(0.0, os.getloadavg()[0] - 1.0)  # the load average counts this process too
        except OSError:  # pragma: no cover - no load average on this platform
            others = 0.0
        return max(1.0, self.cores - others)

    def pool_pays_off(self, pairs_left: int) -> bool:
        """Whether `pairs_left` pairs finish sooner on the pool (start-up, then shared by the workers that get a core
        of their own) than here."""
        if self.pool_size() <= 1 or self._seconds_per_pair is None:
            return False
        parallel = min(self.pool_size(), self._idle_cores())
        if parallel < 1.5:
            return False
        here = pairs_left * self._seconds_per_pair
        start = 0.0 if self._pool is not None else self.start_up_seconds()
        return start + here / parallel < here

    # -- scoring ------------------------------------------------------------------------------------------------
    def __call__(self, frame: pl.DataFrame, graphs: tuple[list, list] | None = None,
                 on_progress: Callable[[int], None] | None = None) -> pl.DataFrame:
        """Scores of `frame`'s pairs; `graphs`: its amr1 and amr2 columns as lists, where the caller has them;
        `on_progress`: told the pairs scored, from this call on."""
        if on_progress is not None:
            self.on_progress = on_progress
        amr1, amr2 = graphs if graphs is not None else (frame["amr1"].to_list(), frame["amr2"].to_list())
        return _with_keys(frame, self.score_columns(amr1, amr2), self.options)

    def score_columns(self, amr1: list, amr2: list) -> pl.DataFrame:
        n = len(amr1)
        parts: list[pl.DataFrame] = []
        done = 0
        if self.workers is None and self._pool is None:
            if self._seconds_per_pair is None or not self.pool_pays_off(n):
                parts.append(self._here(amr1, amr2, piloted=True))
                done = parts[-1].height
        elif self.pool_size() <= 1:
            parts.append(self._here(amr1, amr2))
            done = n
        if done < n:
            parts.append(self._on_pool(amr1[done:], amr2[done:]))
        parts = [p for p in parts if p.height]
        return pl.concat(parts, how="vertical_relaxed") if parts else _score_columns([], [], self.options)

    def _threads_here(self) -> int:
        """Threads for scoring in this process: the usable cores where the choice is automatic (the pool's workers
        and a given --workers use one each). Not the idle cores: a thread that finds its core busy only shares it,
        at no cost beyond the share, while the load average lags a minute behind other jobs."""
        return self.cores if self.workers is None else 1

    def _here(self, amr1: list, amr2: list, piloted: bool = False) -> pl.DataFrame:
        """The pairs scored here. `piloted`: the first pairs are timed until PILOT_S of CPU time has passed, and
        scoring stops there if the rest pays off on the pool (the frame then holds the pairs scored). CPU time, not
        wall time: other jobs on the machine do not make the pairs look dearer than they are. One call, one loop:
        the pilot's slices are the loop's first ones, so nothing waits between the pilot and the rest."""
        if piloted:
            loading = time.perf_counter()
            warm_up(self.options)  # not a cost per pair: in a fresh process it made every input look worth a pool
            self.loading_seconds += time.perf_counter() - loading
        t0 = time.process_time()

        def decide(done: int) -> bool | None:
            spent = time.process_time() - t0
            if spent < PILOT_S and done < len(amr1):
                return None
            self._learn(done, spent)
            return self.pool_pays_off(len(amr1) - done)

        out = _score_columns(amr1, amr2, self.options, self._threads_here(), decide if piloted else None,
                             self.on_progress)
        if amr1 and out.height == len(amr1):  # (all of them here: the whole call's rate too)
            self._learn(len(amr1), time.process_time() - t0)
        return out

    def _learn(self, pairs: int, seconds: float) -> None:
        rate = seconds / pairs
        self._seconds_per_pair = rate if self._seconds_per_pair is None else (self._seconds_per_pair + rate) / 2

    def _on_pool(self, amr1: list, amr2: list) -> pl.DataFrame:
        if self._pool is None:
            self._pool, self._own_pool = worker_pool(self.pool_size(), self.options), True
        self.used_pool = True
        w = self.pool_size()
        per_pair = self._seconds_per_pair or 1e-3
        # batches of about BATCH_S each, at least four per worker so the last ones end together
        size = self.batch_size or int(min(max(16, BATCH_S / per_pair), max(16, len(amr1) // (4 * w) + 1)))
        starts = range(0, len(amr1), size)
        parts = []
        for part in self._pool.map(_score_columns, [amr1[i:i + size] for i in starts],
                                   [amr2[i:i + size] for i in starts], [self.options] * len(starts)):
            parts.append(part)  # in order, as each batch comes back
            if self.on_progress is not None:
                self.on_progress(part.height)
        return pl.concat(parts, how="vertical_relaxed")

    def close(self, cancel: bool = False) -> None:
        """Ends the pool this scorer started; `cancel`: batches not yet started are dropped (waits for the running)."""
        if self._pool is not None and self._own_pool:
            self._pool.shutdown(cancel_futures=cancel)
        self._pool, self._own_pool = None, False

    def __enter__(self) -> PairScorer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(cancel=exc_type is not None)  # an error or Ctrl-C: the queued batches would only be thrown away


def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


WORKERS_PER_CORE = 4  # more processes than this per usable core only share the cores (and each holds the vectors)


def max_workers() -> int:
    """The most worker processes a caller may ask for: WORKERS_PER_CORE per core this process may use."""
    return WORKERS_PER_CORE * _usable_cores()


def check_vectors(options: MetricsOptions) -> None:
    """Opens the node vectors now where an aspect needs them (kept for this process's scoring; a file is read whole,
    MiniLM's packaged matrix waits for its first label), so a source that is not vectors fails at start-up, naming it
    (InputError or ValueError), not every pair."""
    if options.needs_vectors:
        _node_vectors(options.vectors, options.seed)


def score_pairs_parallel(frame: pl.DataFrame, options: MetricsOptions, workers: int | None = None,
                         batch_size: int | None = None, pool: ProcessPoolExecutor | None = None) -> pl.DataFrame:
    """`score_pairs` over processes where they pay off (see `PairScorer`; `workers=None` chooses). Uses `pool` if
    given (its size wins over `workers`), else starts one for this call if needed."""
    with PairScorer(options, workers=workers, pool=pool, batch_size=batch_size) as scorer:
        return scorer(frame)
