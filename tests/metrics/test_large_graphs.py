"""Graphs of thousands of nodes: the Smatch search's budget bounds its work within a climbing step and shrinks with
tables past the caches, WL labels stay short, the max-degree aspects stay linear (benchmarks/bench_large_graph.py
times a 5,000-node pair)."""

from __future__ import annotations

import random

from amrsim.amr.graph import smatch_triples
from amrsim.metrics.aspects import GraphView
from amrsim.metrics.smatch import smatch
from amrsim.metrics.wlk import wlk, wlk_features

VOCAB = ("want-01", "boy", "go-02", "girl", "dog", "big", "run-01", "thing", "person", "city")


def tree(n: int, seed: int, roles: tuple[str, ...] = ("ARG0", "ARG1", "mod")) -> str:
    """A random recursive tree of `n` nodes with ten concepts repeated throughout (shallow: depth ~ log n); also
    benchmarks/bench_large_graph.py's pair."""
    rng = random.Random(seed)
    children: list[list[int]] = [[] for _ in range(n)]
    for i in range(1, n):
        children[rng.randrange(i)].append(i)
    concepts = [rng.choice(VOCAB) for _ in range(n)]

    def emit(i: int) -> str:
        return f"(n{i} / {concepts[i]}" + "".join(
            f" :{rng.choice(roles)} {emit(c)}" for c in children[i]) + ")"

    return emit(0)


def test_search_work_stays_within_the_budget_on_a_thousand_nodes():
    # one climbing step over this pair's tables is ~1e7 operations: it used to run whole past a budget of 1e6 (and
    # at 5,000 nodes a step took minutes); now the step stops where the budget runs out, and tables this large
    # (3 million entries, past the caches) get a smaller budget still
    a, b = GraphView.read(tree(1000, 1)), GraphView.read(tree(1000, 2))
    s = smatch(a.unlabeled, b.unlabeled, work_budget=1_000_000)
    assert not s.optimal
    assert s.work <= 1_000_000
    assert 0.3 < s.f1 < 1.0  # the best valid alignment found
    again = smatch(a.unlabeled, b.unlabeled, work_budget=1_000_000)
    assert again == s  # work, not time: deterministic


def test_identical_large_graphs_keep_their_perfect_score_under_the_budget():
    t = smatch_triples(tree(1500, 3))
    s = smatch(t, t)
    assert s.f1 == 1.0  # the smart initialisation maps each node onto itself; a cut step never lowers it


def test_wl_labels_stay_short_on_concepts_shared_by_many_nodes():
    g1, g2 = tree(2000, 1), tree(2000, 2)
    f = wlk_features(g1, k=2)
    assert max(len(lab) for _, labels in f.blocks for lab in labels) <= 200
    assert 0.0 < wlk(g1, g2) <= 1.0


def test_a_long_wl_label_is_compared_as_itself(monkeypatch):
    import amrsim.metrics.wlk as wlk_module

    g1, g2 = tree(300, 1), tree(300, 2)
    short = wlk(g1, g2)
    monkeypatch.setattr(wlk_module, "_LONG_LABEL", 10**9)  # no digests: the labels as written
    assert wlk_module.wlk_from_features(wlk_features(g1), wlk_features(g2)) == short


def test_max_degree_concept_ties_go_to_the_first_variable():
    v = GraphView.read("(a / x :ARG0 (b / y :ARG0 (c / z)) :ARG1 (d / w :ARG0 (e / v)))")
    assert v.max_degree_concept("out") == "x"  # a has 2 children
    assert v.max_degree_concept("in") == "y"  # b, c, d, e have one parent each: b is first
    assert v.max_degree_concept("all") == "x"  # a: 2, b and d: 2 as well; a is first
