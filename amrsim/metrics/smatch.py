"""Smatch (Cai & Knight 2013) with an exact search: never below smatch 1.0.4, deterministic, 1.0 on identical graphs.

Python encodes one pair into integers: ``U[i][j]`` counts the instance, attribute and self-loop triples that match
when node i of graph 1 maps to node j of graph 2, and each quad ``(i, j, k, l, w)`` counts the relation triples that
match when both i->j and k->l (roles, concepts and constants compared lower-cased, as smatch's ``normalize``).
The C extension `_smatch_core` then

1. hill-climbs like smatch (moves to free candidates, swaps; steepest ascent) from its smart initialisation
   (equal concepts, the same position first) and ``restarts`` random initialisations drawn from a splitmix64
   generator seeded with ``seed`` -- no global random state, so results never depend on the process;
2. runs a depth-first branch and bound from that incumbent over nodes ordered by their best possible gain. The
   admissible bound adds, for every unassigned node, its best free candidate: exact gains with assigned nodes plus
   the best weight towards each unassigned node later in the order (each pair charged to one side only). It stops
   after ``node_budget`` expanded nodes; ``optimal`` is True when the search finished, i.e. no better alignment
   exists;
3. if the budget ran out, runs ``50 * (restarts + 1)`` more seeded hill-climbing restarts and keeps the best.
   On BAMBOO main test the default budget proves optimality for all but a handful of para pairs (3 of 1725).

The bound on one pair. Every phase counts the work it does (candidate cells and adjacency entries read) into one
counter; no phase starts, and climbing and branch and bound stop, once it reaches ``work_budget`` (default 3e8,
0.6-0.75 s of one core here), so a pathological pair -- a 300-node graph with repeated concepts, say -- costs at
most that plus one climbing step and still gets the score of the best valid alignment found. Counting work, not
time, keeps the result deterministic. On BAMBOO main test the most expensive pair (para) uses 12% of the default.

Counting. P = matched / n1, R = matched / n2, F1 = 2PR / (P + R), 0 when a graph is empty, as smatch's
``compute_f``; n1, n2 count every triple including duplicates (as the reference). A triple written twice matches at
most as many times as the other graph has it (multiset semantics), so identical graphs score exactly 1.0; smatch
1.0.4 instead counts every pair of equal triples and can exceed the optimum (even 1.0) on such graphs -- the only
pairs where it can score above us.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from amrsim.amr.graph import SmatchTriples
from amrsim.metrics import _smatch_core

__all__ = ["DEFAULT_NODE_BUDGET", "DEFAULT_WORK_BUDGET", "EncodedGraph", "SmatchScore", "encode_graph", "encode_pair",
           "has_duplicates", "smatch", "smatch_many"]

DEFAULT_NODE_BUDGET = 200_000
DEFAULT_WORK_BUDGET = 300_000_000


@dataclass(frozen=True)
class SmatchScore:
    precision: float
    recall: float
    f1: float
    matched: int
    n1: int
    n2: int
    optimal: bool  # the search proved that no better alignment exists
    work: int = 0  # operations the search used (see the module docstring)


def _norm(item: str) -> str:
    return item.lower().rstrip("_")


@dataclass(frozen=True, slots=True)
class EncodedGraph:
    """One graph's side of `encode_pair`, computed once per graph: node count, unary features (instance, attribute,
    self-loop) with counts, relations with counts, each also indexed by label for the other side of a pair, and the
    normalised concept per node (in instance order, a node instantiated twice keeping its last)."""

    n: int
    unary: tuple[tuple[int, str, str, int], ...]
    by_label: dict[tuple[str, str], list[tuple[int, int]]]
    binary: tuple[tuple[int, int, str, int], ...]
    by_role: dict[str, list[tuple[int, int, int]]]
    concepts: tuple[tuple[int, str], ...]


def encode_graph(t: SmatchTriples) -> EncodedGraph:
    """The per-graph half of `encode_pair` (pairs sharing a graph reuse it)."""
    index = {v: i for i, v in enumerate(t.variables)}
    unary: dict = {}
    concepts = []
    for v, c in t.instances:
        i, c = index[v], c.lower().rstrip("_")
        concepts.append((i, c))
        key = (i, "i", c)
        unary[key] = unary.get(key, 0) + 1
    for v, r, c in t.attributes:
        key = (index[v], r.lower().rstrip("_"), "=" + c.lower().rstrip("_"))
        unary[key] = unary.get(key, 0) + 1
    binary: dict = {}
    for s, r, o in t.relations:
        i, k = index[s], index[o]
        if i == k:
            key = (i, "s", r.lower().rstrip("_"))
            unary[key] = unary.get(key, 0) + 1
        else:
            key = (i, k, r.lower().rstrip("_"))
            binary[key] = binary.get(key, 0) + 1
    by_label: dict = {}
    unary_items = []
    for key, c in unary.items():
        by_label.setdefault(key[1:], []).append((key[0], c))
        unary_items.append((*key, c))
    by_role: dict = {}
    binary_items = []
    for key, c in binary.items():
        by_role.setdefault(key[2], []).append((key[0], key[1], c))
        binary_items.append((*key, c))
    return EncodedGraph(len(index), tuple(unary_items), by_label, tuple(binary_items), by_role, tuple(concepts))


def has_duplicates(t: SmatchTriples) -> bool:
    """True if a triple occurs twice (smatch 1.0.4 then counts matches with it more than once)."""
    return (len(set(t.instances)) != len(t.instances) or len(set(t.attributes)) != len(t.attributes)
            or len(set(t.relations)) != len(t.relations))


def encode_pair(t1: SmatchTriples | EncodedGraph, t2: SmatchTriples | EncodedGraph):
    """(n1, n2, U, quads, concept ids 1, concept ids 2) as the C search takes them."""
    e1 = t1 if isinstance(t1, EncodedGraph) else encode_graph(t1)
    e2 = t2 if isinstance(t2, EncodedGraph) else encode_graph(t2)
    n1, n2 = e1.n, e2.n
    U = array("i", bytes(4 * n1 * n2))
    by_label = e2.by_label
    for i, kind, label, c1 in e1.unary:
        for j, c2 in by_label.get((kind, label), ()):
            U[i * n2 + j] += c1 if c1 < c2 else c2
    by_role = e2.by_role
    quads: dict = {}
    for i, k, r, c1 in e1.binary:
        for j, y, c2 in by_role.get(r, ()):
            key = (i, j, k, y) if i < k else (k, y, i, j)
            quads[key] = quads.get(key, 0) + (c1 if c1 < c2 else c2)
    q = array("i")
    for key, w in quads.items():
        q.extend(key)
        q.append(w)
    concept_ids: dict = {}
    cid1 = array("i", [0] * n1)
    for i, c in e1.concepts:
        cid1[i] = concept_ids.setdefault(c, len(concept_ids))
    cid2 = array("i", [-1] * n2)
    for j, c in e2.concepts:
        cid2[j] = concept_ids.setdefault(c, len(concept_ids))
    return n1, n2, U, q, cid1, cid2


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
    n1, n2 = len(t1), len(t2)
    if not t1.variables or not t2.variables:
        return SmatchScore(0.0, 0.0, 0.0, 0, n1, n2, True)
    a, b, U, q, c1, c2 = encode_pair(*(encoded or (t1, t2)))
    matched, optimal, _expanded, work, _mapping = _smatch_core.align(
        a, b, U, q, c1, c2, seed & (2**64 - 1), max(0, restarts), max(0, node_budget), max(1, work_budget))
    p, r, f = _f(matched, n1, n2)
    return SmatchScore(p, r, f, matched, n1, n2, bool(optimal), work)


def smatch_many(pairs: Sequence[tuple[SmatchTriples, SmatchTriples]], seed: int = 0, **kw) -> list[SmatchScore]:
    """Smatch of each pair with the same seed and options."""
    return [smatch(t1, t2, seed=seed, **kw) for t1, t2 in pairs]
