"""Weisfeiler-Leman AMR metrics (Opitz, Daza & Frank 2021): symbolic WLK and Wasserstein WWLK.

Graph construction follows the reference (flipz357/weisfeiler-leman-amr-metrics): penman triples, lower-cased
concepts, attribute constants reified into their own nodes, edges in both directions. Labels are compared as Smatch
compares them (constants lower-cased, without quotes), and a concept equal to its variable is not renamed
(docs/metrics.md, conventions, has the reference's values beside ours). WLK relabelling is keyed by
label as in the reference (`wl_gather_nodes` builds a dict label -> neighbourhood, so nodes sharing a label share one
WL label), but where the reference lets the last such node overwrite the others, the shared label here is built from
the multiset union of all their neighbourhoods, which depends on no iteration order. Every random draw (WWLK) is seeded
from stable hashes, so scores are identical in every process and independent of batch composition.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import penman

from amrsim.amr.graph import unquoted
from amrsim.metrics import _wwlk_core
from amrsim.metrics.vectors import NodeVectors, seeded_uniform, stable_seed

# ot is imported inside the functions: importing this module must stay cheap

GraphLike = str | penman.Graph
_INSTANCE = ":instance"
logging.getLogger("penman").setLevel(logging.ERROR)  # per-graph notes on duplicate triples; as the reference
_EDGE_LOW, _EDGE_HIGH, _EDGE_CANDIDATES = 0.2, 0.35, 10  # reference's min_entropy edge-weight init


def _graph(text_or_graph: GraphLike) -> penman.Graph:
    """Decode a penman string (metadata lines allowed); the one place to switch to amrsim.amr.graph.parse."""
    if isinstance(text_or_graph, penman.Graph):
        return text_or_graph
    try:
        return penman.decode(text_or_graph)
    except Exception as e:  # penman.DecodeError and friends
        raise ValueError(f"cannot read AMR graph: {str(e).strip().splitlines()[-1] if str(e).strip() else e!r}") from e


@dataclass(frozen=True)
class Built:
    """A graph as the reference's networkx multi-digraph: node labels and (src, role, tgt) edges over node indices."""

    labels: tuple[str, ...]
    edges: tuple[tuple[int, str, int], ...]


def _label(value: str) -> str:
    """A node's label as the metrics compare it: lower-cased, without the quotes of a string (``"William"`` is
    ``william``, as in Smatch; penman has already dropped alignments)."""
    return unquoted(value).lower()


def build(graph: GraphLike) -> Built:
    """Nodes keyed by variable, labelled by concept; constants become nodes of their own; labels normalised by
    `_label`. A concept equal to its variable (``(i / i)``) keeps its label: nodes are keyed by index here, so the
    reference's suffix for that case (``i-``, which made ``(i / i)`` and ``(j / i)`` differ) has no job to do."""
    triples = []
    for s, r, t in _graph(graph).triples:
        if r == _INSTANCE:
            t = "" if t is None else str(t).lower()
        triples.append((s, r, t))
    sources = {s for s, r, _ in triples if r == _INSTANCE}
    targets = {t for _, r, t in triples if r == _INSTANCE}
    kept, reified = [], []
    for s, r, t in triples:
        if t not in sources and t not in targets:
            var = f"rfattribute_{len(reified)}"
            reified += [(s, r, var), (var, _INSTANCE, t)]
        else:
            kept.append((s, r, t))
    triples = kept + reified
    index: dict[str, int] = {}
    concept: dict[str, str] = {}
    for s, r, t in triples:
        if r == _INSTANCE:
            if s not in index:
                index[s] = len(index)
            concept[s] = t  # a variable instantiated twice keeps its last concept, as in the reference
    labels = tuple(concept[v] for v in index)  # as read: a constant equal to one of them is linked to it (below)
    edges = []
    for s, r, t in triples:
        if r == _INSTANCE or s not in index:
            continue
        j = index.get(t)
        if j is None:
            # a constant equal to some concept: the reference links the last node with that label, and drops the
            # edge when that node is node 0 (its `if found:`); replicated.
            j = max((n for n, lab in enumerate(labels) if lab == t), default=0)
            if j == 0:
                continue
        edges.append((index[s], r, j))
    return Built(tuple(_label(lab) for lab in labels), tuple(edges))


# --------------------------------------------------------------------------------------------------------- WLK ---


@dataclass(frozen=True)
class WLKFeatures:
    """Per-graph WLK feature sets: blocks (weight, set) for node labels, triples, then one per WL iteration."""

    blocks: tuple[tuple[float, frozenset[str]], ...]
    sq_norm: float


def wlk_features(graph: GraphLike | Built, k: int = 2) -> WLKFeatures:
    """Occurrence features of the reference (`nodeoccurence` + `tripleoccurence`, then k WL iterations, both
    directions) with its linear weights 1, 1/2, 1/3, ... per block. Each iteration relabels by label: all nodes with
    the same current label get one new label, from that label and the sorted multiset union of their neighbours'
    `role_label` entries (the reference keys by label too, but keeps only the last node's neighbourhood)."""
    b = graph if isinstance(graph, Built) else build(graph)
    labels = list(b.labels)
    blocks = [
        (1.0, frozenset(labels)),
        (1.0, frozenset(f"{labels[s]}_{r}_{labels[t]}" for s, r, t in b.edges)),
    ]
    nbrs: list[list[tuple[str, int]]] = [[] for _ in labels]
    for s, r, t in b.edges:
        nbrs[s].append((r, t))  # outgoing
    for s, r, t in b.edges:
        nbrs[t].append((r, s))  # incoming
    for it in range(1, k + 1):
        gathered: dict[str, list[str]] = {}
        for v, lab in enumerate(labels):
            gathered.setdefault(lab, [lab]).extend(f"{r}_{labels[u]}" for r, u in nbrs[v])
        relabel = {lab: _short(" ::: ".join(sorted(parts))) for lab, parts in gathered.items()}
        labels = [relabel[lab] for lab in labels]
        blocks.append((1.0 / (1 + it), frozenset(labels)))
    sq = sum(w * w * len(s) for w, s in blocks)
    return WLKFeatures(tuple(blocks), sq)


_LONG_LABEL = 200  # characters past which a WL label is kept as its digest


def _short(label: str) -> str:
    """A WL label, or its 128-bit digest where it is long: labels are only compared for equality, and a label built
    from a long one (a concept shared by thousands of nodes) would grow with the graph in every next iteration."""
    if len(label) <= _LONG_LABEL:
        return label
    return "wl#" + hashlib.blake2b(label.encode("utf-8"), digest_size=16).hexdigest()


def wlk_from_features(f1: WLKFeatures, f2: WLKFeatures) -> float:
    """Cosine of the two weighted binary feature vectors; 0.0 where either is empty (the reference's NaN case)."""
    if len(f1.blocks) != len(f2.blocks):
        raise ValueError("WLK features computed with different k")
    if f1.sq_norm == 0.0 or f2.sq_norm == 0.0:
        return 0.0
    dot = sum(w * w * len(s1 & s2) for (w, s1), (_, s2) in zip(f1.blocks, f2.blocks, strict=True))
    return dot / math.sqrt(f1.sq_norm * f2.sq_norm)


class _GraphCache:
    """Per-graph precomputation, keyed by penman text or by object identity (the object is held, so ids stay valid)."""

    def __init__(self, size: int = 8192):
        self.size = size
        self._d: OrderedDict[object, tuple[object, object]] = OrderedDict()

    def get(self, graph: GraphLike, what: tuple, make):
        key = (graph if isinstance(graph, str) else id(graph), what)
        hit = self._d.get(key)
        if hit is not None and (isinstance(graph, str) or hit[0] is graph):
            self._d.move_to_end(key)
            return hit[1]
        value = make()
        self._d[key] = (graph, value)
        if len(self._d) > self.size:
            self._d.popitem(last=False)
        return value


_CACHE = _GraphCache()


def _built(graph: GraphLike) -> Built:
    return _CACHE.get(graph, ("built",), lambda: build(graph))


def _features(graph: GraphLike, k: int) -> WLKFeatures:
    return _CACHE.get(graph, ("wlk", k), lambda: wlk_features(_built(graph), k))


def wlk(g1: GraphLike, g2: GraphLike, k: int = 2) -> float:
    """WLK similarity in [0, 1] of two AMR graphs (penman strings or penman.Graph)."""
    return wlk_from_features(_features(g1, k), _features(g2, k))


def _batch(pairs: Iterable[tuple[GraphLike, GraphLike]], score, on_error: str) -> list[float]:
    out = []
    for g1, g2 in pairs:
        try:
            out.append(score(g1, g2))
        except ValueError:
            if on_error == "raise":
                raise
            out.append(float("nan"))
    return out


def wlk_batch(
    pairs: Iterable[tuple[GraphLike, GraphLike]], k: int = 2, on_error: Literal["raise", "nan"] = "raise"
) -> list[float]:
    """WLK for many pairs; each distinct graph is parsed and featurised once. on_error="nan" scores bad graphs NaN."""
    return _batch(pairs, lambda a, b: wlk(a, b, k=k), on_error)


# -------------------------------------------------------------------------------------------------------- WWLK ---


@dataclass(frozen=True)
class _Links:
    """Message-passing structure of one graph: link l carries the roles between node i and neighbour j
    (outgoing and incoming neighbours separately, as the reference iterates them)."""

    n: int
    roles: tuple[tuple[str, ...], ...]
    cells: tuple[np.ndarray, ...]  # flat W indices i*n+j of the outgoing links, then of the incoming ones
    degree: np.ndarray  # (n,): neighbours counted per direction; 1 where none (their message is zero)
    multi: tuple[int, ...] = ()  # the links carrying more than one role


def _links(b: Built) -> _Links:
    n = len(b.labels)
    out: dict[tuple[int, int], list[str]] = {}
    inc: dict[tuple[int, int], list[str]] = {}
    for s, r, t in b.edges:
        out.setdefault((s, t), []).append(r)
        inc.setdefault((t, s), []).append(r)
    degree = np.zeros(n)
    for i, _ in list(out) + list(inc):
        degree[i] += 1
    degree[degree == 0] = 1.0
    # Within each direction a cell occurs once, so each block can be added with one fancy-indexed +=.
    cells = tuple(np.array([i * n + j for i, j in d], dtype=np.intp) for d in (out, inc))
    roles = tuple(tuple(rs) for rs in list(out.values()) + list(inc.values()))
    return _Links(n, roles, cells, degree, tuple(li for li, rs in enumerate(roles) if len(rs) > 1))


_EDGE_CACHE: dict[tuple[int, str, int], np.ndarray] = {}
_OOV_CACHE: dict[tuple[int, str, int, int], np.ndarray] = {}


def _edge_candidates(seed: int, role: str, runs: int) -> np.ndarray:
    key = (seed, role, runs)
    c = _EDGE_CACHE.get(key)
    if c is None:
        rng = np.random.default_rng(stable_seed("edge", seed, role))
        c = _EDGE_CACHE[key] = rng.uniform(_EDGE_LOW, _EDGE_HIGH, size=(runs, _EDGE_CANDIDATES))
    return c


_PARAM_TRIE: dict[tuple[int, int], dict] = {}  # per (seed, runs): role -> (weights, total, xlogx, next roles)
_PARAM_NODES = [0]
_MAX_PARAM_NODES = 200_000  # past this the trie starts over (memory stays flat; values do not depend on it)


def _edge_params(roles: Sequence[str], seed: int, runs: int) -> np.ndarray:
    """(runs, roles) edge weights by the reference's min_entropy init: each role, in order, takes the candidate that
    minimises the entropy of the normalised weights so far. Candidates depend only on (seed, role), so a role's
    weights depend only on the roles before it: pairs share their prefixes of the sorted role list (a trie keeps
    each prefix's weights and running sums, computed once)."""
    if _PARAM_NODES[0] > _MAX_PARAM_NODES:
        _PARAM_TRIE.clear()
        _PARAM_NODES[0] = 0
    node = _PARAM_TRIE.setdefault((seed, runs), {})
    p = np.empty((runs, len(roles)))
    total = np.zeros((runs, 1))
    xlogx = np.zeros((runs, 1))
    for m, role in enumerate(roles):
        hit = node.get(role)
        if hit is None:
            c = _edge_candidates(seed, role, runs)
            if m == 0:
                pick = c[:, 0]  # one weight: every candidate has entropy 0, argmin takes the first
            else:
                t = total + c
                h = np.log(t) - (xlogx + c * np.log(c)) / t
                pick = c[np.arange(runs), np.argmin(h, axis=1)]
            total = total.copy()
            xlogx = xlogx.copy()
            total[:, 0] += pick
            xlogx[:, 0] += pick * np.log(pick)
            hit = node[role] = (pick, total, xlogx, {})
            _PARAM_NODES[0] += 1
        pick, total, xlogx, node = hit
        p[:, m] = pick
    return p


def _node_matrix(labels: Sequence[str], vectors: NodeVectors, seed: int, runs: int) -> np.ndarray:
    """Initial node vectors: (1, n, dim) when every label has a vector (the same in every run), else (runs, n, dim)
    with fresh seeded draws per run for the labels without one (all labels for `random`)."""
    fixed = [None if vectors.resample else vectors.vector(lab) for lab in labels]
    if all(v is not None for v in fixed):
        return np.stack(fixed)[None] if fixed else np.empty((1, 0, vectors.dim))
    x = np.empty((runs, len(labels), vectors.dim))
    for i, (lab, v) in enumerate(zip(labels, fixed, strict=True)):
        if v is None:
            key = (seed, lab, runs, vectors.dim)
            v = _OOV_CACHE.get(key)
            if v is None:
                v = _OOV_CACHE[key] = seeded_uniform(seed, lab, (runs, vectors.dim))
        x[:, i, :] = v
    return x


def _propagators(links: _Links, params: np.ndarray, role_index: dict[str, int], k: int) -> list[np.ndarray]:
    """A_0..A_k, (runs, n, n): WL iteration t gives node vectors A_t @ x0, since x <- x + W x is linear in x0 (W: the
    role-weighted neighbour mean, outgoing and incoming links as the reference)."""
    runs, n = params.shape[0], links.n
    w = np.zeros((runs, n * n))
    if links.roles:
        vals = params[:, [role_index[rs[0]] for rs in links.roles]]  # a link's weight: the product of its roles'
        for li in links.multi:
            v = vals[:, li]
            for r in links.roles[li][1:]:
                v = v * params[:, role_index[r]]
            vals[:, li] = v
        n_out = len(links.cells[0])
        w[:, links.cells[0]] += vals[:, :n_out]
        w[:, links.cells[1]] += vals[:, n_out:]
    step = w.reshape(runs, n, n) / links.degree[None, :, None] + np.eye(n)[None]
    props = [np.broadcast_to(np.eye(n), (runs, n, n))]
    for t in range(k):
        props.append(step if t == 0 else step @ props[-1])  # A_1 = step @ I = step, exactly
    return props


# The bound on one pair. WWLK's cost grows with the cube of the graph sizes (propagating through n x n matrices, then
# an n1 x n2 transport problem), so a pair of large graphs could stall a batch: a 1,000-node pair ran for minutes.
# Each pair gets a work budget counted in multiply-adds from the sizes alone (deterministic, no clock): a pair over
# it averages fewer stability runs (the first ones, the same draws) and one for which even one run is too dear gets
# no score (its `bounded` says so). No BAMBOO pair comes near it; two 250-node graphs fit 7 runs, 500-node ones none.
DEFAULT_WWLK_WORK_BUDGET = 2_000_000_000


class WorkBudgetExceeded(ValueError):
    """A pair too large for the work budget: not even one WWLK run fits."""


@dataclass(frozen=True)
class WWLKScore:
    value: float | None  # None where not even one run fits the budget
    runs: int  # stability runs averaged (stability_level + 1 unless bounded)
    bounded: bool  # the budget cut the runs


def wwlk_work(n1: int, n2: int, k: int, runs: int, dim: int, resample: bool) -> int:
    """Multiply-adds of one WWLK pair (see `_wwlk`): per run, k propagation steps per graph and the k+1 levels'
    cross and self products; once, the Gram matrices of the initial vectors (per run if they are resampled) and the
    transport problem."""
    cube = n1 ** 3 + n2 ** 3
    per_run = k * cube + (k + 1) * (n1 * n1 * n2 + n1 * n2 * n2 + cube)
    gram = dim * (n1 + n2) ** 2
    return runs * (per_run + (gram if resample else 0)) + (0 if resample else gram) + n1 * n2 * (n1 + n2)


def wwlk_runs(n1: int, n2: int, k: int, stability_level: int, dim: int, resample: bool, work_budget: int) -> int:
    """Stability runs that fit the budget: stability_level + 1 where they all do, else fewer, 0 where none."""
    runs = stability_level + 1
    while runs and wwlk_work(n1, n2, k, runs, dim, resample) > work_budget:
        runs = runs // 2 if runs > 2 else runs - 1
    while runs < stability_level + 1 and wwlk_work(n1, n2, k, runs + 1, dim, resample) <= work_budget:
        runs += 1
    return runs


def wwlk_from_built(
    b1: Built, b2: Built, vectors: NodeVectors, k: int = 2, stability_level: int = 15, seed: int = 0,
    work_budget: int = DEFAULT_WWLK_WORK_BUDGET,
) -> float:
    """WWLK on built graphs: 1 - EMD between node embeddings, distance matrices averaged over stability_level+1 runs."""
    return _checked(_wwlk(b1, b2, _links(b1), _links(b2), vectors, k, stability_level, seed, work_budget))


def load_pot():
    """POT, imported without its torch/jax/cupy/tensorflow backends: WWLK passes numpy arrays, and POT's probing
    imports torch (3-4 s per worker process)."""
    if "ot" not in sys.modules:
        for backend in ("PYTORCH", "JAX", "CUPY", "TENSORFLOW"):
            os.environ.setdefault(f"POT_BACKEND_DISABLE_{backend}", "1")
    import ot

    return ot


def emd_cost(a: np.ndarray, b: np.ndarray, dist: np.ndarray) -> float:
    """`ot.emd2(a, b, dist)` for float64 weights that are all positive and a C-contiguous float64 cost matrix: POT's
    own network simplex (`emd_c`) after emd2's one step for that case (b rescaled to a's mass), without its backend
    dispatch, marginal check and dual potentials, which took a fifth of a pair's time. The same solver, the same
    number (a test compares them); a non-optimal result warns as emd2 does."""
    solver = load_pot().lp.emd_wrap  # POT's solver module, the one emd2 calls (pot is pinned)
    b = b * a.sum(0) / b.sum(0, keepdims=True)
    _plan, cost, _u, _v, code = solver.emd_c(a, b, dist, 100000, 1, None, None)
    solver.check_result(code)
    return float(cost)


DIAG_QUAD_NODES = (3, 90)  # graph sizes where einsum's sums run in the order `_wwlk_core.diag_quad` repeats


def diag_quad(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """`np.einsum("rij,rjk,rik->ri", a, g, a)` to the last bit, in C where its sums run in einsum's order (3 to 90
    nodes: below, numpy's iterator orders a 2x2 sum its own way; above, its buffer splits the sum): a fifth of the
    time. (A faster formula, `((a @ g) * a).sum(-1)`, moves WWLK scores by up to 3e-12.)"""
    n = a.shape[1]
    if (DIAG_QUAD_NODES[0] <= n <= DIAG_QUAD_NODES[1] and a.dtype == g.dtype == np.float64
            and a.flags.c_contiguous and g.flags.c_contiguous):
        out = np.empty(a.shape[:2])
        _wwlk_core.diag_quad(a, g, out)
        return out
    return np.einsum("rij,rjk,rik->ri", a, g, a)


def _cached_links(graph: GraphLike) -> _Links:
    return _CACHE.get(graph, ("links",), lambda: _links(_built(graph)))


def _wwlk(
    b1: Built, b2: Built, l1: _Links, l2: _Links, vectors: NodeVectors, k: int, stability_level: int, seed: int,
    work_budget: int = DEFAULT_WWLK_WORK_BUDGET,
) -> WWLKScore:
    if not b1.labels or not b2.labels:
        return WWLKScore(0.0, stability_level + 1, False)
    runs = wwlk_runs(len(b1.labels), len(b2.labels), k, stability_level, vectors.dim, vectors.resample, work_budget)
    if runs == 0:
        return WWLKScore(None, 0, True)
    roles = sorted({r for rs in l1.roles + l2.roles for r in rs})
    # the first `runs` rows of every seeded draw equal those of the full draw, so a bounded pair averages the same
    # first runs an unbounded one would
    params = _edge_params(roles, seed, stability_level + 1)[:runs]
    role_index = {r: m for m, r in enumerate(roles)}
    # WWLK embeds node i as the unit vector of [x0_i; x1_i; ..; xk_i] and takes Euclidean distances between the
    # graphs' node embeddings. With x_t = A_t x0, every dot product needed is a sum over t of A_t G A_t'^T for the
    # Gram matrices G of the initial vectors, so the 384-dim vectors enter once, through G, instead of k times.
    x1 = _node_matrix(b1.labels, vectors, seed, stability_level + 1)[:runs]
    x2 = _node_matrix(b2.labels, vectors, seed, stability_level + 1)[:runs]
    g12, g11, g22 = x1 @ x2.transpose(0, 2, 1), x1 @ x1.transpose(0, 2, 1), x2 @ x2.transpose(0, 2, 1)
    p1, p2 = _propagators(l1, params, role_index, k), _propagators(l2, params, role_index, k)
    # level 0 (A_0 = I) is the Gram matrices themselves and their diagonals, exactly what the products with I give;
    # the squared norms of the other levels stay one einsum each (a reordered sum moves scores by up to 1e-12)
    # (summed from level 0 up, as before: floating-point sums in another order differ in the last bits)
    cross = sum((a1 @ g12 @ a2.transpose(0, 2, 1) for a1, a2 in zip(p1[1:], p2[1:], strict=True)), g12)
    sq1 = sum((diag_quad(a, g11) for a in p1[1:]), np.diagonal(g11, axis1=1, axis2=2))
    sq2 = sum((diag_quad(a, g22) for a in p2[1:]), np.diagonal(g22, axis1=1, axis2=2))
    n1, n2 = np.sqrt(np.maximum(sq1, 0.0)), np.sqrt(np.maximum(sq2, 0.0))
    inv1, inv2 = np.divide(1.0, n1, out=np.zeros_like(n1), where=n1 > 0), np.divide(1.0, n2, out=np.zeros_like(n2),
                                                                                     where=n2 > 0)
    # a zero embedding stays zero (the reference divides by a norm of 1 there)
    sq = ((n1 > 0)[:, :, None] * 1.0 + (n2 > 0)[:, None, :]) - 2.0 * cross * inv1[:, :, None] * inv2[:, None, :]
    sq[sq < 1e-12] = 0.0  # rounding noise on identical unit vectors would otherwise add ~1e-8 per node
    dist = np.sqrt(sq).mean(axis=0)
    a = np.full(len(b1.labels), 1.0 / len(b1.labels))
    bw = np.full(len(b2.labels), 1.0 / len(b2.labels))
    return WWLKScore(float(1.0 - emd_cost(a, bw, np.ascontiguousarray(dist))), runs, runs < stability_level + 1)


def _checked(score: WWLKScore) -> float:
    if score.value is None:
        raise WorkBudgetExceeded("WWLK: the graphs are too large for the work budget (not even one run fits)")
    return score.value


def wwlk_score(
    g1: GraphLike, g2: GraphLike, vectors: NodeVectors, k: int = 2, stability_level: int = 15, seed: int = 0,
    work_budget: int = DEFAULT_WWLK_WORK_BUDGET,
) -> WWLKScore:
    """`wwlk` with how many runs were averaged and whether the work budget bounded them."""
    return _wwlk(_built(g1), _built(g2), _cached_links(g1), _cached_links(g2), vectors, k, stability_level, seed,
                 work_budget)


def wwlk(
    g1: GraphLike, g2: GraphLike, vectors: NodeVectors, k: int = 2, stability_level: int = 15, seed: int = 0,
    work_budget: int = DEFAULT_WWLK_WORK_BUDGET,
) -> float:
    """Wasserstein WLK similarity (at most 1) of two AMR graphs. Random draws (edge weights; vectors for labels the
    source lacks, or all labels for `random`) are seeded by (seed, label), so a pair's score depends on nothing else.
    Raises WorkBudgetExceeded (a ValueError) for a pair too large for `work_budget` (see DEFAULT_WWLK_WORK_BUDGET)."""
    return _checked(wwlk_score(g1, g2, vectors, k, stability_level, seed, work_budget))


def wwlk_batch(
    pairs: Iterable[tuple[GraphLike, GraphLike]],
    vectors: NodeVectors,
    k: int = 2,
    stability_level: int = 15,
    seed: int = 0,
    on_error: Literal["raise", "nan"] = "raise",
) -> list[float]:
    """WWLK for many pairs; each distinct graph is parsed once. on_error="nan" scores unreadable graphs NaN."""
    return _batch(pairs, lambda a, b: wwlk(a, b, vectors, k=k, stability_level=stability_level, seed=seed), on_error)
