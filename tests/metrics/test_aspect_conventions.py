"""The aspects' reading of a graph against amr-evaluation's (docs/metrics.md#conventions-against-amr-evaluation):
each difference is either aligned (the test holds the reference's value) or a named convention (the test holds both
values). Graphs are hand-made; the expected values are counted by hand."""

from __future__ import annotations

import pytest

from amrsim.amr.graph import read_triples, smatch_triples, structure_triples
from amrsim.metrics.aspects import COUNTED_ASPECTS, GraphView, aspect_counts, aspect_scores
from amrsim.metrics.corpus import GoldGraphError, corpus_aspects
from amrsim.metrics.engine import MetricsOptions
from amrsim.metrics.smatch import smatch

# r has a parent (the ARG0 of w) and a :mod child: one incoming edge, so no reentrancy. Smatch's rewrite turns the
# :mod into (t, domain, r), an edge *into* r, which made r look reentrant.
MOD_UNDER_PARENT = "(w / want-01 :ARG0 (r / rabbit :mod (t / tall)) :ARG1 (g / go-02))"
MOD_OTHER = "(w / want-01 :ARG0 (r / rabbit :mod (t / tall)) :ARG1 (g / go-02 :ARG0 r))"


def view(text: str, convention: str = "amr") -> GraphView:
    return GraphView.read(text, convention)


def scores(a: str, b: str, aspects: tuple[str, ...], convention: str = "amr", counting: str = "set") -> dict:
    return aspect_scores(view(a, convention), view(b, convention), aspects, vector=lambda c: None, counting=counting)


@pytest.mark.parametrize("convention", ["amr", "smatch"])
def test_mod_is_not_an_edge_into_its_parent_for_the_shape_aspects(convention):
    g = view(MOD_UNDER_PARENT, convention)
    assert ("t", "domain", "r") in g.triples.relations  # Smatch's own triples keep the rewrite
    assert g.edges == structure_triples(MOD_UNDER_PARENT, convention).relations
    assert ("r", "mod", "t") in g.edges and ("t", "domain", "r") not in g.edges
    assert not g.reentrancies.relations  # r has one parent
    assert g.degrees[0]["r"] == 1 and g.degrees[1]["r"] == 1  # in 1 (ARG0), out 1 (mod)
    # MOD_OTHER: r is reentrant (ARG0 of w and of g): its two incoming edges, and nothing of the mod
    other = view(MOD_OTHER, convention)
    assert sorted(other.reentrancies.relations) == [("g", "ARG0", "r"), ("w", "ARG0", "r")]
    # Unlabeled edges point as written: (r, rel, t)
    assert ("r", "rel", "t") in g.unlabeled.relations


def test_a_graph_without_domain_edges_needs_no_second_reading():
    assert view("(w / want-01 :ARG0 (b / boy))").structure is None


def test_mod_of_and_mod_are_one_graph_under_the_amr_convention():
    written_mod = "(w / want-01 :ARG0 (r / rabbit :mod (t / tall)))"
    written_mod_of = "(w / want-01 :ARG0 (r / rabbit) :ARG1 (t / tall :mod-of r))"
    one = "(w / want-01 :ARG0 (r / rabbit :mod (t / tall)) :ARG1 t)"
    # penman reads `:mod-of r` under t as (r, :mod, t): the same edge as `:mod (t / tall)` under r
    assert read_triples(written_mod_of, "amr").relations[-1] == ("t", "domain", "r") == \
        read_triples(written_mod, "amr").relations[-1]
    assert smatch(read_triples(written_mod_of, "amr"), read_triples(one, "amr")).f1 == 1.0
    assert smatch(smatch_triples(written_mod_of, "amr"), smatch_triples(one, "amr")).f1 == 1.0  # C and Python
    # smatch 1.0.4 keeps a :mod-of as (r, mod, t) and turns :mod into domain: two different triples
    assert ("r", "mod", "t") in read_triples(written_mod_of, "smatch").relations
    assert smatch(read_triples(written_mod_of, "smatch"), read_triples(one, "smatch")).f1 < 1.0


def test_polarity_on_a_node_is_a_negation():
    a = "(k / know-01 :ARG0 (i / i) :polarity (a / amr-unknown))"
    b = "(k / know-01 :ARG0 (i / i) :polarity -)"
    assert view(a).negation == ["know-01"] == view(b).negation
    assert scores(a, b, ("negation",))["negation"] == 1.0


def test_wiki_dash_counts_as_a_value():
    a = '(p / person :wiki - :name (n / name :op1 "Ann"))'
    b = '(p / person :wiki "Q1" :name (n / name :op1 "Ann"))'
    assert view(a).wikification == ["-"]
    assert scores(a, a, ("wikification",))["wikification"] == 1.0
    assert scores(a, b, ("wikification",))["wikification"] == 0.0


def test_no_wsd_rewrites_senses_to_01_as_amr_evaluation():
    want2, want, want1 = "(w / want-02 :ARG0 (b / boy))", "(w / want :ARG0 (b / boy))", "(w / want-01 :ARG0 (b / boy))"
    assert scores(want2, want1, ("no_wsd",))["no_wsd"] == 1.0
    # a concept without a sense keeps its spelling: `want` is not `want-01` (stripping senses made them equal)
    assert scores(want2, want, ("no_wsd",))["no_wsd"] < 1.0
    assert [c for _, c in view("(h / have-org-role-91)").no_wsd.instances] == ["have-org-role-01"]


REPEATS = "(a / and :op1 (b / boy) :op2 (b2 / boy) :op3 (g / girl))"
ONE_BOY = "(a / and :op1 (b / boy) :op2 (g / girl))"


def test_counting_set_and_multiset_hold_both_values():
    # set: {and, boy, girl} both sides -> 1.0; multiset: 3 of 4 and 3 of 3 -> P 1, R 3/4
    assert scores(ONE_BOY, REPEATS, ("concepts",), counting="set")["concepts"] == 1.0
    assert scores(ONE_BOY, REPEATS, ("concepts",), counting="multiset")["concepts"] == pytest.approx(2 * 0.75 / 1.75)
    c = aspect_counts(view(ONE_BOY), view(REPEATS), ["concepts"], counting="multiset")["concepts"]
    assert tuple(c) == (3, 3, 4)
    with pytest.raises(ValueError, match="counting"):
        MetricsOptions(counting="bag")


def test_corpus_aspects_sum_counts_over_pairs():
    test, gold = [ONE_BOY, "(b / boy)"], [REPEATS, "(b / boy :polarity -)"]
    rows, failed = corpus_aspects(test, gold, ["concepts", "negation", "smatch"], convention="smatch",
                                  counting="multiset")
    by = {r.aspect: r for r in rows}
    assert failed == ()
    assert (by["concepts"].matched, by["concepts"].test, by["concepts"].gold) == (4, 4, 5)
    assert (by["negation"].matched, by["negation"].test, by["negation"].gold) == (0, 0, 1)
    assert by["negation"].precision == 0.0 and by["negation"].f1 == 0.0  # the reference's rule for an empty side
    assert by["concepts"].f1 == pytest.approx(2 * 1.0 * 0.8 / 1.8)


def test_corpus_aspects_refuse_unknown_aspects_and_unreadable_gold():
    with pytest.raises(ValueError, match="choose from") as e:
        corpus_aspects(["(a / b)"], ["(a / b)"], ["root_sim"])
    assert all(a in str(e.value) for a in COUNTED_ASPECTS)
    with pytest.raises(GoldGraphError):
        corpus_aspects(["(a / b)"], ["(a / b"], ["concepts"])
    rows, failed = corpus_aspects(["(a / b", "(a / b)"], ["(a / b)", "(a / b)"], ["concepts"])
    assert failed == (0,) and (rows[0].matched, rows[0].test, rows[0].gold) == (1, 1, 2)
