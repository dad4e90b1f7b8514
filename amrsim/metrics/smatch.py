"""Smatch (Cai & Knight 2013) with an exact search: never below smatch 1.0.4, deterministic, 1.0 on identical graphs.

The C extension `_smatch_core` encodes each graph once (labels as ids of their normalised strings) and each pair
into integers: ``U[i][j]`` counts the instance, attribute and self-loop triples that match when node i of graph 1
maps to node j of graph 2, and each quad ``(i, j, k, l, w)`` counts the relation triples that match when both i->j
and k->l (roles, concepts and constants compared lower-cased, as smatch's ``normalize``). It then

1. hill-climbs like smatch (moves to free candidates, swaps; steepest ascent) from its smart initialisation
   (equal concepts, the same position first) and ``restarts`` random initialisations drawn from a splitmix64
   generator seeded with ``seed`` -- no global random state, so results never depend on the process;
2. runs a depth-first branch and bound from that incumbent over nodes ordered by their best possible gain. The
   admissible bound adds, for every unassigned node, its best free candidate: exact gains with assigned nodes plus,
   for each unassigned node later in the order (each pair charged to one side only), the best weight towards a
   node it can still take (free, and not the candidate itself). A child node recomputes only the bounds its step
   can change (those of nodes with the taken node as a candidate or a quad towards it); the others keep the
   parent's, which still bound them (taking a node only lowers them). It stops after ``node_budget`` expanded
   nodes; ``optimal`` is True when the search finished, i.e. no better alignment exists;
3. if the budget ran out, runs ``50 * (restarts + 1)`` more seeded hill-climbing restarts and keeps the best.
   On BAMBOO main test the default budget proves optimality for every pair; of all 12 BAMBOO test sets (26,731
   pairs, convention smatch) 74 are bounded, 59 of them in para_reify, whose reified graphs repeat concepts a lot.

The bound on one pair. Every phase counts the work it does (candidate cells and adjacency entries read) into one
counter; no phase starts, and climbing and branch and bound stop, once it reaches ``work_budget`` (default 3e8,
0.6-0.75 s of one core here), so a pathological pair -- a 300-node graph with repeated concepts, say -- costs at
most that plus one climbing step and still gets the score of the best valid alignment found. Counting work, not
time, keeps the result deterministic. A climbing step stops where the budget runs out (on graphs of thousands of
nodes one step is itself far past it), and tables past 2 million entries (cells and adjacency entries; a pair of
about 1,000 nodes each), which no longer fit in the caches, get the budget scaled down by their size, so a
5,000-node pair takes seconds, not minutes (benchmarks/bench_large_graph.py); ordinary graphs are far below that.
On BAMBOO main test the most expensive pair (para) uses 12% of the default.

Counting. P = matched / n1, R = matched / n2, F1 = 2PR / (P + R), 0 when a graph is empty, as smatch's
``compute_f``; n1, n2 count every triple including duplicates (as the reference). A triple written twice matches at
most as many times as the other graph has it (multiset semantics), so identical graphs score exactly 1.0; smatch
1.0.4 instead counts every pair of equal triples and can exceed the optimum (even 1.0) on such graphs -- the only
pairs where it can score above us.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from amrsim.amr import _penman_reader
from amrsim.amr.graph import SmatchTriples, read_triples
from amrsim.metrics import _smatch_core

__all__ = ["DEFAULT_NODE_BUDGET", "DEFAULT_WORK_BUDGET", "MAX_LABELS", "EncodedGraph", "SmatchScore", "current_table",
           "align_many", "align_texts", "encode_graph", "encode_pair", "encode_text", "has_duplicates", "same_table",
           "smatch", "smatch_encoded", "smatch_many", "text_encoder"]

DEFAULT_NODE_BUDGET = 200_000
DEFAULT_WORK_BUDGET = 300_000_000


class SmatchScore(NamedTuple):  # a named tuple, not a dataclass: made once per pair, at a third of the cost
    precision: float
    recall: float
    f1: float
    matched: int
    n1: int
    n2: int
    optimal: bool  # the search proved that no better alignment exists
    work: int = 0  # operations the search used (see the module docstring)


MAX_LABELS = 200_000  # label ids (and raw-string cache entries) a process keeps; past this a new table starts


class Labels:
    """Ids of normalised labels shared by every graph encoded with this table, and per raw string its id (as is,
    and as an attribute value, '=' prepended): each distinct string is lower-cased and stripped once."""

    __slots__ = ("ids", "norm", "eq", "spans")

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.norm: dict[str, int] = {}
        self.eq: dict[str, int] = {}
        self.spans = _penman_reader.label_cache()  # the same raw strings' ids, found by the C reader without a str

    def size(self) -> int:
        return len(self.ids) + len(self.norm) + len(self.eq)


_labels = Labels()


class EncodedGraph(NamedTuple):
    """One graph's Smatch features as `_smatch_core.encode` packs them (node count; instance, attribute and
    self-loop features with counts; relations with counts; each node's concept), computed once per graph. Two graphs
    are aligned only when encoded with the same label table."""

    data: bytes
    labels: Labels
    triples: int  # triples counted (duplicates included): P = matched / triples of graph 1, R of graph 2
    nodes: int


def _table(labels: Labels | None) -> Labels:
    """`labels`, or the process's table (a new one past MAX_LABELS: memory stays flat on long runs; graphs encoded
    before keep the old table)."""
    global _labels
    if labels is not None:
        return labels
    if _labels.size() > MAX_LABELS:
        _labels = Labels()
    return _labels


def _encode(labels: Labels, variables, instances, attributes, relations) -> EncodedGraph:
    return EncodedGraph(_smatch_core.encode(labels.ids, labels.norm, labels.eq, variables, instances, attributes,
                                            relations), labels, len(instances) + len(attributes) + len(relations),
                        len(variables))


def encode_graph(t: SmatchTriples, labels: Labels | None = None) -> EncodedGraph:
    """The per-graph half of a pair's tables (pairs sharing a graph reuse it), with the process's label table
    (`labels`: with that one)."""
    return _encode(_table(labels), t.variables, t.instances, t.attributes, t.relations)


def encode_text(text: str, convention: str = "amr", labels: Labels | None = None,
                dereify: bool = False) -> EncodedGraph:
    """`encode_graph(read_triples(text, convention, dereify), labels)`: where the C reader takes the text, its triples
    go straight into the encoding (no SmatchTriples built); otherwise exactly that call, errors included."""
    return text_encoder(convention, dereify)(text, _table(labels))


def text_encoder(convention: str = "amr", dereify: bool = False):
    """`encode_text` for a loop over many graphs: a function of (text, label table) with the lookups bound once, the
    same encodings and the same errors (a graph the C reader leaves to penman goes through `read_triples`; so does
    every graph to dereify)."""
    read = _penman_reader.read_encoded if convention in ("smatch", "amr") and not dereify else None
    as_smatch = convention == "smatch"

    def encoded(text: str, labels: Labels) -> EncodedGraph:
        r = read(text, as_smatch, labels.ids, labels.norm, labels.eq, labels.spans) if read is not None else None
        if r is None:
            return encode_graph(read_triples(text, convention, dereify), labels)
        return EncodedGraph(r[0], labels, r[1], r[2])

    return encoded


def current_table() -> Labels:
    """The process's label table (a new one once it outgrows MAX_LABELS)."""
    return _table(None)


def has_duplicates(t: SmatchTriples) -> bool:
    """True if a triple occurs twice (smatch 1.0.4 then counts matches with it more than once)."""
    return (len(set(t.instances)) != len(t.instances) or len(set(t.attributes)) != len(t.attributes)
            or len(set(t.relations)) != len(t.relations))


def same_table(t1: SmatchTriples, t2: SmatchTriples, e1: EncodedGraph,
               e2: EncodedGraph) -> tuple[EncodedGraph, EncodedGraph]:
    """The encodings e1, e2 of t1, t2, or both encoded again in one new table where the process's table started over
    between them: what a search of the pair needs."""
    if e1.labels is e2.labels:
        return e1, e2
    labels = Labels()  # a table started over between the two: both anew, in one table of their own
    return encode_graph(t1, labels), encode_graph(t2, labels)


def encode_pair(t1: SmatchTriples, t2: SmatchTriples):
    """(n1, n2, U, quads, concept ids 1, concept ids 2) as `_smatch_core.align` takes them: ``U[i*n2+j]`` counts the
    unary triples matched when node i maps to node j, each quad (i, j, k, l, w) the relation triples matched when
    both i->j and k->l."""
    e1, e2 = same_table(t1, t2, encode_graph(t1), encode_graph(t2))
    return _smatch_core.pair_tables(e1.data, e2.data)


def _f(matched: int, n1: int, n2: int) -> tuple[float, float, float]:
    if n1 == 0 or n2 == 0:
        return 0.0, 0.0, 0.0
    p, r = matched / n1, matched / n2
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def smatch(t1: SmatchTriples, t2: SmatchTriples, seed: int = 0, restarts: int = 4,
           node_budget: int = DEFAULT_NODE_BUDGET, work_budget: int = DEFAULT_WORK_BUDGET,
           encoded: tuple[EncodedGraph, EncodedGraph] | None = None) -> SmatchScore:
    """Smatch of graph 1 (counted as the test graph: precision) against graph 2 (gold: recall). `encoded`: the
    graphs' `encode_graph`, where the caller keeps them across pairs."""
    if not t1.variables or not t2.variables:
        return SmatchScore(0.0, 0.0, 0.0, 0, len(t1), len(t2), True)
    e1, e2 = same_table(t1, t2, *encoded) if encoded is not None else same_table(t1, t2, encode_graph(t1),
                                                                                   encode_graph(t2))
    return smatch_encoded(e1, e2, seed, restarts, node_budget, work_budget)


def smatch_encoded(e1: EncodedGraph, e2: EncodedGraph, seed: int = 0, restarts: int = 4,
                   node_budget: int = DEFAULT_NODE_BUDGET, work_budget: int = DEFAULT_WORK_BUDGET) -> SmatchScore:
    """`smatch` from the graphs' encodings alone (a caller keeping many graphs keeps just these); both must come
    from one label table (`e1.labels is e2.labels`)."""
    if e1.labels is not e2.labels:
        raise ValueError("smatch_encoded: the graphs were encoded with different label tables")
    n1, n2 = e1.triples, e2.triples
    if not e1.nodes or not e2.nodes:
        return SmatchScore(0.0, 0.0, 0.0, 0, n1, n2, True)
    matched, optimal, _expanded, work = _smatch_core.align_encoded(
        e1.data, e2.data, seed & (2**64 - 1), max(0, restarts), max(0, node_budget), max(1, work_budget))
    p, r, f = _f(matched, n1, n2)
    return SmatchScore(p, r, f, matched, n1, n2, bool(optimal), work)


def align_many(first: Sequence[EncodedGraph], second: Sequence[EncodedGraph], seed: int = 0, restarts: int = 4,
               node_budget: int = DEFAULT_NODE_BUDGET, work_budget: int = DEFAULT_WORK_BUDGET,
               threads: int = 1) -> list[tuple[float, float, float, bool, float] | None]:
    """`smatch_encoded` of each pair (first[k], second[k]) as (precision, recall, f1, optimal, seconds its search
    took), None where the pair's tables did not fit in memory: the numbers `smatch_encoded` gives, in one C call
    whose searches run without the GIL on `threads` threads (no result depends on them). Each pair's two graphs must
    come from one label table."""
    if len(first) != len(second):
        raise ValueError("align_many: the two lists differ in length")
    out: list[tuple[float, float, float, bool, float] | None] = [(0.0, 0.0, 0.0, True, 0.0)] * len(first)
    todo, data1, data2 = [], [], []
    for k, (e1, e2) in enumerate(zip(first, second, strict=True)):
        if e1.labels is not e2.labels:
            raise ValueError(f"align_many: pair {k}'s graphs were encoded with different label tables")
        if e1.nodes and e2.nodes:  # else no alignment: P = R = F1 = 0, as smatch_encoded
            todo.append(k)
            data1.append(e1.data)
            data2.append(e2.data)
    if not todo:
        return out
    found = memoryview(_smatch_core.align_many(
        data1, data2, seed & (2**64 - 1), max(0, restarts), max(0, node_budget), max(1, work_budget),
        max(1, threads))).cast("q")
    for at, k in enumerate(todo):
        matched, optimal, _work, ns = found[4 * at:4 * at + 4]
        out[k] = None if matched < 0 else (*_f(matched, first[k].triples, second[k].triples), bool(optimal),
                                           ns * 1e-9)
    return out


def align_texts(texts1: Sequence[str | None], texts2: Sequence[str | None], convention: str = "amr", seed: int = 0,
                restarts: int = 4, node_budget: int = DEFAULT_NODE_BUDGET, work_budget: int = DEFAULT_WORK_BUDGET,
                threads: int = 1, dereify: bool = False) -> list[tuple[float, float, float, bool, float] | None]:
    """`align_many` of each pair of PENMAN texts encoded by `encode_text`, as (precision, recall, f1, optimal,
    seconds its reading and search took), in one C call: the C reader reads and encodes each pair and the search
    aligns it, without the GIL, on `threads` threads. Each pair gets a label table of its own; the search compares
    labels only for equality, so the numbers are `smatch_encoded`'s. None where the pair is left to the Python path:
    a text the C reader does not take (not str, not ASCII, a graph it leaves to penman, an empty graph) or tables
    that did not fit in memory; `encode_text` and `align_many` give those pairs their result or their exact error."""
    if len(texts1) != len(texts2):
        raise ValueError("align_texts: the two lists differ in length")
    if convention not in ("smatch", "amr") or dereify or not len(texts1):  # (dereifying is the Python path's)
        return [None] * len(texts1)
    found = memoryview(_smatch_core.align_texts(
        list(texts1), list(texts2), convention == "smatch", seed & (2**64 - 1), max(0, restarts), max(0, node_budget),
        max(1, work_budget), max(1, threads))).cast("q")
    v = found.tolist()  # then by column: a few times faster than a slice of the view per pair
    return [None if matched < 0 else (*_f(matched, n1, n2), optimal == 1, ns * 1e-9)
            for matched, optimal, ns, n1, n2 in zip(v[0::6], v[1::6], v[3::6], v[4::6], v[5::6], strict=True)]


def smatch_many(pairs: Sequence[tuple[SmatchTriples, SmatchTriples]], seed: int = 0, **kw) -> list[SmatchScore]:
    """Smatch of each pair with the same seed and options."""
    return [smatch(t1, t2, seed=seed, **kw) for t1, t2 in pairs]
