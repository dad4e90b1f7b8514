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
`amrsim.metrics.corpus.corpus_aspects`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np
import penman

from amrsim.amr.graph import SmatchTriples, read_triples, smatch_triples, structure_triples
from amrsim.metrics.smatch import EncodedGraph, encode_graph, same_table, smatch

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
SMATCH_FAMILY = ("smatch", "unlabeled", "no_wsd", "reentrancies", "srl")
_SET_VALUES = {"concepts": "concepts", "frames": "frames", "named_entities": "named_entities", "negation": "negation",
               "wikification": "wikification", "quant_sim": "quantities"}  # aspect -> the GraphView's values
SET_ASPECTS = tuple(_SET_VALUES)
VECTOR_ASPECTS = ("root_sim", "max_indegree_sim", "max_outdegree_sim", "max_degree_sim")


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


# the aspects an F1 of counted values gives (`aspect_counts`): the Smatch family and the set aspects
COUNTED_ASPECTS = (*SMATCH_FAMILY, *SET_ASPECTS)


def aspect_counts(g1: GraphView, g2: GraphView, aspects: Iterable[str], counting: str = "set", seed: int = 0,
                  bounded: list[str] | None = None) -> dict[str, Counts]:
    """Matched / first / second counts of counted aspects for one pair (`COUNTED_ASPECTS`), the first graph the
    test graph: what a corpus sums (micro), as amr-evaluation counts a corpus."""
    out: dict[str, Counts] = {}
    for name in aspects:
        if name in SMATCH_FAMILY:
            out[name] = _family_counts(g1, g2, name, seed, bounded)
        elif name in _SET_VALUES:
            attr = _SET_VALUES[name]
            out[name] = value_counts(getattr(g1, attr), getattr(g2, attr), counting)
        else:
            raise KeyError(f"aspect '{name}' is not counted (choose from {', '.join(COUNTED_ASPECTS)})")
    return out


def aspect_scores(g1: GraphView, g2: GraphView, aspects: Iterable[str], vector: Callable[[str], np.ndarray | None],
                  seed: int = 0, bounded: list[str] | None = None,
                  searches: list[Search] | None = None, counting: str = "set") -> dict[str, float | None]:
    """The requested aspects for one pair (Smatch gives smatch_precision/recall/f1). Smatch-family aspects whose
    search its budget stopped before proving the optimum (the score is the best alignment found) are appended to
    `bounded`. With `searches`, the Smatch-family searches are not run but appended there, in the aspects' order,
    and their columns left None: the caller runs many at once (`smatch.align_many`). `counting`: how the set
    aspects count values (`value_counts`)."""
    out: dict[str, float | None] = {}
    for name in aspects:
        if name == "smatch" and searches is not None:
            if not g1.triples.variables or not g2.triples.variables:  # as smatch(): no alignment, all 0
                out |= {"smatch_precision": 0.0, "smatch_recall": 0.0, "smatch_f1": 0.0}
            else:
                searches.append(Search(name, *same_table(g1.triples, g2.triples, g1.encoded("triples"),
                                                         g2.encoded("triples"))))
                out |= {"smatch_precision": None, "smatch_recall": None, "smatch_f1": None}
        elif name == "smatch":
            s = smatch(g1.triples, g2.triples, seed=seed, encoded=(g1.encoded("triples"), g2.encoded("triples")))
            if not s.optimal and bounded is not None:
                bounded.append(name)
            out |= {"smatch_precision": s.precision, "smatch_recall": s.recall, "smatch_f1": s.f1}
        elif name in SMATCH_FAMILY:
            out[name] = _smatch_f1(g1, g2, name, seed, bounded, searches)
        elif name in _SET_VALUES:
            attr = _SET_VALUES[name]
            out[name] = counts_f1(value_counts(getattr(g1, attr), getattr(g2, attr), counting))
        elif name == "root_sim":
            out[name] = concept_similarity(g1.root, g2.root, vector)
        elif name in VECTOR_ASPECTS:
            kind = {"max_indegree_sim": "in", "max_outdegree_sim": "out", "max_degree_sim": "all"}[name]
            out[name] = concept_similarity(g1.max_degree_concept(kind), g2.max_degree_concept(kind), vector)
        else:
            raise KeyError(f"unknown aspect '{name}'")
    return out
