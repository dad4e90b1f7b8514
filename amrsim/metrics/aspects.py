"""Fine-grained AMR aspects per graph pair (Damonte et al. 2017; S3BERT's graph statistics).

Set-based aspects follow mdtux89/amr-evaluation as extended in flipz357/amr-metric-suite (`scores-enhanced.py`):
an F1 over the values each graph has, 1.0 when neither graph has the structure (vacuous agreement). `counting="set"`
(the default, amr-metric-suite's, which S3BERT's targets come from) counts a value once per graph;
`counting="multiset"` counts every occurrence, as amr-evaluation's `scores.py` does (`disambig`). Subgraph aspects
(reentrancies, SRL, unlabeled, no-WSD) run our Smatch on the transformed triples. Aspects that read the graph's shape
(reentrancies, SRL, unlabeled, degrees, names, negations) see a ``:mod`` edge as written, (parent, mod, child), never
Smatch's reversed ``domain`` rewrite (`structure_triples`). Word-vector aspects (root and max-degree concepts)
compare concepts by cosine of node vectors from `amrsim.metrics.vectors` (offline; GloVe where a file is given).
`aspect_counts` gives the matched / first / second counts the F1s come from, summed over a corpus by
`amrsim.metrics.corpus.corpus_aspects`. Each aspect is declared once, an `Aspect` in `ASPECTS` (name, columns with
their Arrow types, scorer, what it reads); `register` adds one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, NamedTuple

import numpy as np
import penman
import pyarrow as pa

from amrsim.amr.graph import SmatchTriples, read_triples, smatch_triples, structure_triples
from amrsim.columns import declare_columns
from amrsim.metrics.smatch import EncodedGraph, encode_graph, same_table, smatch
from amrsim.metrics.vectors import NodeVectors
from amrsim.metrics.wlk import load_pot, wlk, wwlk_score

SENSE = re.compile(r"-\d\d$")
# amr-evaluation's No WSD (evaluation.sh's perl): a concept's last `-<digits>` after ASCII letters, digits and
# hyphens becomes -01, so `want-02` is `want-01` and a concept without a sense keeps its spelling
WSD_SENSE = re.compile(r"^([a-z0-9\-][a-z0-9\-]*)-[0-9]+")
TOP_ROLES = {"TOP", "top"}
COUNTINGS = ("set", "multiset")

# S3BERT's 15 aspects in its feature order (flipz357/S3BERT src/config.py) mapped to our column names;
# "Reentrancies" is what the S3BERT paper calls Coreference.
S3BERT_ASPECTS: dict[str, str] = {
    "Concepts": "concepts", "Frames": "frames", "Named Ent.": "named_entities", "Negations": "negation",
    "Reentrancies": "reentrancies", "SRL": "srl", "Smatch": "smatch_f1", "Unlabeled": "unlabeled",
    "max_indegree_sim": "max_indegree_sim", "max_outdegree_sim": "max_outdegree_sim",
    "max_degree_sim": "max_degree_sim", "root_sim": "root_sim", "quant_sim": "quant_sim",
    "score_wlk": "wlk", "score_wwlk": "wwlk",
}


class Counts(NamedTuple):
    """What an aspect's F1 of one pair is made of: values matched, values of the first graph, of the second."""

    matched: int
    first: int
    second: int


def value_counts(a: Iterable[str], b: Iterable[str], counting: str = "set") -> Counts:
    """Counts of two graphs' values: each distinct value once (`set`) or every occurrence (`multiset`)."""
    if counting == "set":
        sa, sb = set(a), set(b)
        return Counts(len(sa & sb), len(sa), len(sb))
    ca, cb = Counter(a), Counter(b)
    return Counts(sum((ca & cb).values()), sum(ca.values()), sum(cb.values()))


def counts_f1(c: Counts) -> float:
    """F1 of one pair's counts; 1.0 when neither graph has the structure (vacuous agreement)."""
    if not c.first and not c.second:
        return 1.0
    if c.matched == 0:
        return 0.0
    p, r = c.matched / c.first, c.matched / c.second
    return 2 * p * r / (p + r)


def set_f1(a: Iterable[str], b: Iterable[str]) -> float:
    """F1 of two sets; 1.0 when both are empty (neither graph has the structure)."""
    return counts_f1(value_counts(a, b))


@dataclass
class GraphView:
    """Structures of one graph that the aspects look at, computed once per graph. `triples`: Smatch's triples;
    `structure`: the same graph's triples with every ``:mod`` as written (`structure_triples`), needed only where
    `triples` has a ``domain`` relation (otherwise the two are equal). `GraphView.read` builds both."""

    triples: SmatchTriples
    structure: SmatchTriples | None = None
    _encoded: dict[str, EncodedGraph] = field(init=False, repr=False, default_factory=dict)

    @classmethod
    def read(cls, graph: penman.Graph | str, convention: str = "amr", dereify: bool = False,
             triples: SmatchTriples | None = None) -> GraphView:
        """The view of a graph (a penman.Graph or a PENMAN string) under a Smatch convention; `triples`, where the
        caller has them, are its Smatch triples. Raises AMRError on an unreadable graph."""
        if triples is None:
            triples = (read_triples(graph, convention, dereify) if isinstance(graph, str)
                       else smatch_triples(graph, convention, dereify))
        structure = None
        if any(role == "domain" for _, role, _ in triples.relations):  # a :mod Smatch turned around, maybe
            structure = structure_triples(graph, convention, dereify)
        return cls(triples, structure)

    @cached_property
    def edges(self) -> tuple[tuple[str, str, str], ...]:
        """The relations as the graph means them: inverted roles turned back, ``:mod`` as written."""
        return self.triples.relations if self.structure is None else self.structure.relations

    @cached_property
    def v2c(self) -> dict[str, str]:
        return dict(self.triples.instances)

    @cached_property
    def concepts(self) -> list[str]:
        return list(self.v2c.values())

    def encoded(self, name: str) -> EncodedGraph:
        """Smatch's per-graph encoding of the triples (`triples`) or of a transformed view (`unlabeled`, ...)."""
        e = self._encoded.get(name)
        if e is None:
            e = self._encoded[name] = encode_graph(getattr(self, name))
        return e

    @cached_property
    def root(self) -> str | None:
        for var, role, _ in self.triples.attributes:
            if role in TOP_ROLES:
                return self.v2c.get(var)
        return self.v2c.get(self.triples.variables[0]) if self.triples.variables else None

    # the set aspects' values, one per occurrence (`value_counts` makes them a set or a multiset); as the
    # reference, each reads attributes and relations alike (`:polarity (a / amr-unknown)` is a negation too)
    @cached_property
    def frames(self) -> list[str]:
        return [c for c in self.v2c.values() if SENSE.search(c)]

    def _sources(self, wanted: str) -> list[str]:
        """The concepts of the nodes with an edge or attribute `wanted` (in graph order)."""
        return [self.v2c.get(s, s) for s, role, _ in (*self.triples.attributes, *self.edges) if role == wanted]

    @cached_property
    def named_entities(self) -> list[str]:  # the types of named things, as the reference extracts them
        return self._sources("name")

    @cached_property
    def negation(self) -> list[str]:
        return self._sources("polarity")

    @cached_property
    def wikification(self) -> list[str]:  # `:wiki -` (no article) counts, as in both references
        return [val for _, role, val in self.triples.attributes if role == "wiki"]

    @cached_property
    def quantities(self) -> list[str]:
        """`:quant` values (attributes) and the concepts of `:quant` targets, each paired with what they count."""
        out = [f"{self.v2c.get(v, v)}={val}" for v, role, val in self.triples.attributes if role == "quant"]
        out += [f"{self.v2c.get(s, s)}={self.v2c.get(t, t)}" for s, role, t in self.edges if role == "quant"]
        return out

    @cached_property
    def degrees(self) -> tuple[Counter[str], Counter[str]]:
        indeg: Counter[str] = Counter()
        outdeg: Counter[str] = Counter()
        for s, _, t in self.edges:
            outdeg[s] += 1
            indeg[t] += 1
        return indeg, outdeg

    def max_degree_concept(self, kind: str) -> str | None:
        """Concept of the node with the largest in/out/total degree; ties go to the first variable."""
        indeg, outdeg = self.degrees
        score = {"in": lambda v: indeg[v], "out": lambda v: outdeg[v], "all": lambda v: indeg[v] + outdeg[v]}[kind]
        if not self.triples.variables:
            return None
        best = max(self.triples.variables, key=score)  # max keeps the first of equal keys: the first variable
        return self.v2c.get(best)

    # -- transformed triples for the Smatch-family aspects ----------------------------------------------------
    @cached_property
    def unlabeled(self) -> SmatchTriples:
        t = self.triples
        return SmatchTriples(t.variables, t.instances,
                             tuple((v, r if r in TOP_ROLES else "rel", c) for v, r, c in t.attributes),
                             tuple((s, "rel", o) for s, _, o in self.edges))

    @cached_property
    def no_wsd(self) -> SmatchTriples:
        t = self.triples

        def sense01(concept: str) -> str:
            return WSD_SENSE.sub(r"\1-01", concept, count=1)

        return SmatchTriples(t.variables, tuple((v, sense01(c)) for v, c in t.instances),
                             tuple((v, r, sense01(c) if r in TOP_ROLES else c) for v, r, c in t.attributes),
                             t.relations)

    @cached_property
    def _order(self) -> dict[str, int]:
        return {v: i for i, v in enumerate(self.triples.variables)}

    def _subgraph(self, relations: list[tuple[str, str, str]], top: str | None) -> SmatchTriples:
        """The relations, their nodes' instances, and the TOP triple that Damonte's scorer gives every subgraph
        (`smatch_fromlists.parse_relations`): on its first node, with that node's concept."""
        keep = {x for s, _, o in relations for x in (s, o)}
        variables = tuple(v for v in self.triples.variables if v in keep)
        attributes = () if top is None else ((top, "TOP", self.v2c[top]),)
        return SmatchTriples(variables, tuple((v, c) for v, c in self.triples.instances if v in keep), attributes,
                             tuple(relations))

    def _first_source(self, relations: list[tuple[str, str, str]]) -> str | None:
        """The subgraph's first node in the reference: the source of its first relation, relations listed by their
        source in graph order (as smatch stores them)."""
        return min((s for s, _, _ in relations), key=self._order.__getitem__, default=None)

    @cached_property
    def reentrancies(self) -> SmatchTriples:
        indeg, _ = self.degrees
        rels = [t for t in self.edges if indeg[t[2]] > 1]
        # the reference lists them by reentrant node (graph order), then by parent: its first node is the first
        # parent of the first reentrant node
        first = min((t[2] for t in rels), key=self._order.__getitem__, default=None)
        return self._subgraph(rels, self._first_source([t for t in rels if t[2] == first]))

    @cached_property
    def srl(self) -> SmatchTriples:
        rels = []
        for s, role, o in self.edges:
            if role.startswith("ARG"):
                rels.append((o, role[:-3], s) if role.endswith("-of") else (s, role, o))
        return self._subgraph(rels, self._first_source(rels))


class Search(NamedTuple):
    """A Smatch-family search `aspect_scores` left to its caller: the aspect and the two graphs' encodings (one label
    table). Its score is `smatch_encoded(first, second, seed)`'s: F1 (smatch: precision, recall, F1)."""

    aspect: str
    first: EncodedGraph
    second: EncodedGraph


def _family_pair(g1: GraphView, g2: GraphView, name: str) -> tuple[SmatchTriples, SmatchTriples] | None:
    """The two graphs' triples a Smatch-family aspect aligns, or None where a side lacks the structure."""
    a, b = getattr(g1, name), getattr(g2, name)
    if not (a.instances or a.relations) or not (b.instances or b.relations):
        return None
    return a, b


def _family_counts(g1: GraphView, g2: GraphView, name: str, seed: int,
                   bounded: list[str] | None = None) -> Counts:
    """Matched triples and the two sides' triple counts of a Smatch-family aspect (0 where a side lacks it)."""
    if name == "smatch":
        if not g1.triples.variables or not g2.triples.variables:
            return Counts(0, len(g1.triples), len(g2.triples))
        s = smatch(g1.triples, g2.triples, seed=seed, encoded=(g1.encoded("triples"), g2.encoded("triples")))
    else:
        pair = _family_pair(g1, g2, name)
        if pair is None:
            a, b = getattr(g1, name), getattr(g2, name)
            return Counts(0, len(a) if (a.instances or a.relations) else 0,
                          len(b) if (b.instances or b.relations) else 0)
        s = smatch(*pair, seed=seed, encoded=(g1.encoded(name), g2.encoded(name)))
    if not s.optimal and bounded is not None:
        bounded.append(name)
    return Counts(s.matched, s.n1, s.n2)


def _smatch_f1(g1: GraphView, g2: GraphView, name: str, seed: int, bounded: list[str] | None,
               searches: list[Search] | None) -> float | None:
    pair = _family_pair(g1, g2, name)
    if pair is None:  # 1.0 where neither graph has the structure, 0 where one lacks it
        a, b = getattr(g1, name), getattr(g2, name)
        return 1.0 if not (a.instances or a.relations) and not (b.instances or b.relations) else 0.0
    if searches is not None:
        searches.append(Search(name, *same_table(*pair, g1.encoded(name), g2.encoded(name))))
        return None
    s = smatch(*pair, seed=seed, encoded=(g1.encoded(name), g2.encoded(name)))
    if not s.optimal and bounded is not None:
        bounded.append(name)
    return s.f1


def _cosine(a: np.ndarray | None, b: np.ndarray | None) -> float | None:
    if a is None or b is None:
        return None
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b / (na * nb)) if na and nb else None


def concept_similarity(c1: str | None, c2: str | None, vector: Callable[[str], np.ndarray | None]) -> float:
    """Cosine of the concepts' vectors, clipped at 0 so every aspect lies in [0, 1]; 1.0 if equal (or both
    absent), exact match where a vector is missing."""
    if c1 is None and c2 is None:
        return 1.0
    if c1 is None or c2 is None:
        return 0.0
    if c1 == c2:
        return 1.0
    cos = _cosine(vector(c1), vector(c2))
    return 0.0 if cos is None else max(0.0, min(1.0, cos))


# -- the registry: each aspect declared once ------------------------------------------------------------------


@dataclass
class Pair:
    """What an aspect's scorer reads of one graph pair and where it reports. `first`/`second`: the graphs' views
    (None where no aspect reads them); `graphs`: their penman graphs, for aspects that read those (`reads="graph"`);
    `vector(concept)` and `node_vectors()`: node vectors, loaded on first use; `bounded`: aspects a work budget cut
    are appended here; `searches`: where given, a Smatch-family aspect leaves its search here instead of running it
    (`aspect_scores`); `options`: the engine's `MetricsOptions` (None outside the engine)."""

    first: GraphView | None
    second: GraphView | None
    vector: Callable[[str], np.ndarray | None]
    seed: int = 0
    counting: str = "set"
    bounded: list[str] | None = None
    searches: list[Search] | None = None
    graphs: tuple[penman.Graph, penman.Graph] | None = None
    node_vectors: Callable[[], NodeVectors] | None = None
    options: Any = None


@dataclass(frozen=True)
class Aspect:
    """One AMR metric aspect, declared once: its name (`--aspects`, `MetricsOptions.aspects`), its output columns
    (Arrow fields: `metrics score`'s and the `amr_metrics` table's), its scorer (`score(pair)`: those columns for one
    `Pair`), and what the engine must know to run it. `ALL_ASPECTS`, the table's aspect columns, the CLI's help and
    docs/metrics.md's list of aspects derive from `ASPECTS`."""

    name: str
    columns: tuple[pa.Field, ...]
    score: Callable[[Pair], dict[str, Any]]
    reads: str = "view"  # "view": the pair's GraphViews (Smatch triples); "graph": its penman graphs (WL kernels)
    needs_vectors: bool = False  # node vectors (`Pair.vector`, `Pair.node_vectors`)
    search: bool = False  # Smatch family: a search `Pair.searches` may take (run in C, many at once)
    # corpus counts (`aspect_counts`): (first view, second view, counting, seed, bounded) -> Counts; None: not counted
    count: Callable[[GraphView, GraphView, str, int, list[str] | None], Counts] | None = None
    one_blas_thread: bool = False  # multiplies matrices of a few dozen rows: a second BLAS thread only waits
    warm_up: Callable[[], object] | None = None  # what a process loads once before its first pair (POT for WWLK)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.columns)

    def from_search(self, precision: float, recall: float, f1: float) -> dict[str, float]:
        """A search aspect's columns from its search's result: F1, or precision, recall and F1 (Smatch)."""
        return dict(zip(self.column_names, (precision, recall, f1)[-len(self.columns):], strict=True))


def float_columns(*names: str) -> tuple[pa.Field, ...]:
    return tuple(pa.field(n, pa.float64()) for n in names)


ASPECTS: dict[str, Aspect] = {}  # name -> declaration, in the columns' order
# columns of a scored row that are not an aspect's: the engine's, and `metrics score`'s line
RESERVED_COLUMNS = ("key", "line", "status", "error", "seconds", "bounded")


def register(aspect: Aspect) -> Aspect:
    """Add an aspect to `ASPECTS` (after those there); refused where its name or a column is taken. A process pool's
    workers know the aspects their modules' imports register."""
    if aspect.name in ASPECTS:
        raise ValueError(f"aspect '{aspect.name}' is registered already")
    if aspect.reads not in ("view", "graph"):
        raise ValueError(f"aspect '{aspect.name}': reads must be 'view' or 'graph', not '{aspect.reads}'")
    if not aspect.columns or (aspect.search and len(aspect.columns) not in (1, 3)):
        raise ValueError(f"aspect '{aspect.name}': needs a column (a search aspect: F1, or precision, recall, F1)")
    taken = {c for a in ASPECTS.values() for c in a.column_names} | set(RESERVED_COLUMNS)
    clash = [c for c in aspect.column_names if c in taken or aspect.column_names.count(c) > 1]
    if clash:
        raise ValueError(f"aspect '{aspect.name}': column(s) {', '.join(clash)} taken")
    ASPECTS[aspect.name] = aspect
    return aspect


def metric_fields(aspects: Iterable[str] | None = None) -> list[pa.Field]:
    """The columns of `aspects` (default: every registered one), in order, with their Arrow types."""
    return [f for name in (ASPECTS if aspects is None else aspects) for f in ASPECTS[name].columns]


def metric_columns(aspects: Iterable[str] | None = None) -> list[str]:
    """The column names of `aspects` (default: every registered one), in order."""
    return [f.name for f in metric_fields(aspects)]


def score_aspects(pair: Pair, aspects: Iterable[str]) -> dict[str, Any]:
    """The columns of `aspects` for one pair, each by its declared scorer."""
    out: dict[str, Any] = {}
    for name in aspects:
        out |= ASPECTS[name].score(pair)
    return out


def _smatch(p: Pair) -> dict[str, float | None]:
    g1, g2 = p.first, p.second
    assert g1 is not None and g2 is not None
    if p.searches is not None:
        if not g1.triples.variables or not g2.triples.variables:  # as smatch(): no alignment, all 0
            return {"smatch_precision": 0.0, "smatch_recall": 0.0, "smatch_f1": 0.0}
        p.searches.append(Search("smatch", *same_table(g1.triples, g2.triples, g1.encoded("triples"),
                                                       g2.encoded("triples"))))
        return {"smatch_precision": None, "smatch_recall": None, "smatch_f1": None}
    s = smatch(g1.triples, g2.triples, seed=p.seed, encoded=(g1.encoded("triples"), g2.encoded("triples")))
    if not s.optimal and p.bounded is not None:
        p.bounded.append("smatch")
    return {"smatch_precision": s.precision, "smatch_recall": s.recall, "smatch_f1": s.f1}


def _family(name: str, p: Pair) -> dict[str, float | None]:
    assert p.first is not None and p.second is not None
    return {name: _smatch_f1(p.first, p.second, name, p.seed, p.bounded, p.searches)}


def _family_count(name: str, g1: GraphView, g2: GraphView, counting: str, seed: int,
                  bounded: list[str] | None) -> Counts:
    return _family_counts(g1, g2, name, seed, bounded)


def _set(name: str, values: str, p: Pair) -> dict[str, float]:
    assert p.first is not None and p.second is not None
    return {name: counts_f1(value_counts(getattr(p.first, values), getattr(p.second, values), p.counting))}


def _set_count(values: str, g1: GraphView, g2: GraphView, counting: str, seed: int,
               bounded: list[str] | None) -> Counts:
    return value_counts(getattr(g1, values), getattr(g2, values), counting)


def _root(p: Pair) -> dict[str, float]:
    assert p.first is not None and p.second is not None
    return {"root_sim": concept_similarity(p.first.root, p.second.root, p.vector)}


def _max_degree(name: str, kind: str, p: Pair) -> dict[str, float]:
    assert p.first is not None and p.second is not None
    return {name: concept_similarity(p.first.max_degree_concept(kind), p.second.max_degree_concept(kind), p.vector)}


def _wlk(p: Pair) -> dict[str, float]:
    assert p.graphs is not None
    return {"wlk": wlk(*p.graphs, k=p.options.wlk_iterations)}


def _wwlk(p: Pair) -> dict[str, float | None]:
    assert p.graphs is not None and p.node_vectors is not None
    opts = p.options
    w = wwlk_score(*p.graphs, vectors=p.node_vectors(), k=opts.wlk_iterations, stability_level=opts.wwlk_stability,
                   seed=p.seed)
    if w.bounded and p.bounded is not None:
        p.bounded.append("wwlk" if w.value is not None else "wwlk (no run fits)")
    return {"wwlk": w.value}


def _family_aspect(name: str) -> Aspect:
    return Aspect(name, float_columns(name), partial(_family, name), search=True, count=partial(_family_count, name))


def _set_aspect(name: str, values: str) -> Aspect:
    """An F1 of the values each graph has (`GraphView.<values>`), counted as a set or a multiset."""
    return Aspect(name, float_columns(name), partial(_set, name, values), count=partial(_set_count, values))


def _degree_aspect(name: str, kind: str) -> Aspect:
    return Aspect(name, float_columns(name), partial(_max_degree, name, kind), needs_vectors=True)


for _aspect in (
    Aspect("smatch", float_columns("smatch_precision", "smatch_recall", "smatch_f1"), _smatch, search=True,
           count=partial(_family_count, "smatch")),
    _family_aspect("unlabeled"),
    _family_aspect("no_wsd"),
    _set_aspect("concepts", "concepts"),
    _set_aspect("frames", "frames"),
    _set_aspect("named_entities", "named_entities"),
    _set_aspect("negation", "negation"),
    _set_aspect("wikification", "wikification"),
    _family_aspect("reentrancies"),
    _family_aspect("srl"),
    _set_aspect("quant_sim", "quantities"),
    Aspect("root_sim", float_columns("root_sim"), _root, needs_vectors=True),
    _degree_aspect("max_indegree_sim", "in"),
    _degree_aspect("max_outdegree_sim", "out"),
    _degree_aspect("max_degree_sim", "all"),
    Aspect("wlk", float_columns("wlk"), _wlk, reads="graph"),
    Aspect("wwlk", float_columns("wwlk"), _wwlk, reads="graph", needs_vectors=True, one_blas_thread=True,
           warm_up=load_pot),
):
    register(_aspect)

ALL_ASPECTS: tuple[str, ...] = tuple(ASPECTS)  # the aspects amrsim declares, in order (a registered one joins ASPECTS)
SMATCH_FAMILY = tuple(a.name for a in ASPECTS.values() if a.search)  # the aspects that search an alignment
SET_ASPECTS = tuple(a.name for a in ASPECTS.values() if a.count is not None and not a.search)
# the aspects an F1 of counted values gives (`aspect_counts`): the Smatch family and the set aspects
COUNTED_ASPECTS = (*SMATCH_FAMILY, *SET_ASPECTS)

# amr_metrics' aspect columns are the registry's (the warehouse sits below metrics, so it reads them from
# amrsim.columns); asked for each time the table's schema is built, so a registered aspect's columns are in it
declare_columns("amr_metrics", metric_fields)


def aspect_counts(g1: GraphView, g2: GraphView, aspects: Iterable[str], counting: str = "set", seed: int = 0,
                  bounded: list[str] | None = None) -> dict[str, Counts]:
    """Matched / first / second counts of counted aspects for one pair (`COUNTED_ASPECTS`), the first graph the
    test graph: what a corpus sums (micro), as amr-evaluation counts a corpus."""
    out: dict[str, Counts] = {}
    for name in aspects:
        aspect = ASPECTS.get(name)
        if aspect is None or aspect.count is None:
            raise KeyError(f"aspect '{name}' is not counted (choose from {', '.join(COUNTED_ASPECTS)})")
        out[name] = aspect.count(g1, g2, counting, seed, bounded)
    return out


def aspect_scores(g1: GraphView, g2: GraphView, aspects: Iterable[str], vector: Callable[[str], np.ndarray | None],
                  seed: int = 0, bounded: list[str] | None = None,
                  searches: list[Search] | None = None, counting: str = "set") -> dict[str, float | None]:
    """The requested aspects for one pair (Smatch gives smatch_precision/recall/f1); aspects that read the penman
    graphs (WLK, WWLK) are the engine's. Smatch-family aspects whose search its budget stopped before proving the
    optimum (the score is the best alignment found) are appended to `bounded`. With `searches`, the Smatch-family
    searches are not run but appended there, in the aspects' order, and their columns left None: the caller runs
    many at once (`smatch.align_many`). `counting`: how the set aspects count values (`value_counts`)."""
    names = list(aspects)
    for name in names:
        if name not in ASPECTS or ASPECTS[name].reads != "view":
            raise KeyError(f"unknown aspect '{name}'")
    return score_aspects(Pair(g1, g2, vector, seed, counting, bounded, searches), names)
