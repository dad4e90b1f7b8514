"""The rule-based `ud` backend: hand-made sentences with exact expected structures, robustness, and corpus Smatch."""

from __future__ import annotations

import json

import pytest

from amrsim.amr.backends import ParseResult
from amrsim.amr.graph import parse, smatch_triples
from amrsim.metrics.smatch import smatch
from tests.helpers import shared

pytest.importorskip("spacy")


@pytest.fixture(scope="module")
def en():
    from amrsim.amr.ud import UDParser

    try:
        return UDParser("en")
    except OSError as e:  # the model package is not installed
        pytest.skip(f"spaCy English model missing: {e}")


@pytest.fixture(scope="module")
def fr():
    from amrsim.amr.ud import UDParser

    try:
        return UDParser("fr")
    except OSError as e:
        pytest.skip(f"spaCy French model missing: {e}")


class G:
    """A parsed result graph with small lookup helpers."""

    def __init__(self, result: ParseResult):
        assert result.status == "ok", result.error
        self.text = result.penman
        self.graph = parse(result.penman)
        self.concept = {v: c for v, _, c in self.graph.instances()}
        self.edges = {(s, r, t) for s, r, t in self.graph.edges()}
        self.attrs = {(s, r, t) for s, r, t in self.graph.attributes()}

    def vars(self, concept: str) -> list[str]:
        return [v for v, c in self.concept.items() if c == concept]

    def one(self, concept: str) -> str:
        found = self.vars(concept)
        assert len(found) == 1, f"expected one {concept!r} in {self.text}"
        return found[0]

    def has(self, src_concept: str, role: str, tgt_concept: str) -> bool:
        return any(self.concept.get(s) == src_concept and r == role and self.concept.get(t) == tgt_concept
                   for s, r, t in self.edges)


def one_graph(parser, sentence: str) -> G:
    (result,) = parser.parse([sentence])
    return G(result)


def test_negation_and_control(en):
    g = one_graph(en, "The boy does not want to go.")
    want, boy = g.one("want-01"), g.one("boy")
    assert (want, ":polarity", "-") in g.attrs
    assert (want, ":ARG0", boy) in g.edges
    assert g.has("want-01", ":ARG1", "go-02")
    assert (g.one("go-02"), ":ARG0", boy) in g.edges  # the controlled subject is the same node
    assert g.graph.top == want


def test_quantity(en):
    g = one_graph(en, "Three dogs barked.")
    dog = g.one("dog")
    assert (dog, ":quant", "3") in g.attrs
    assert (g.one("bark-01"), ":ARG0", dog) in g.edges


def test_named_entities(en):
    g = one_graph(en, "John Smith visited Paris.")
    person, city = g.one("person"), g.one("city")
    names = {t for s, r, t in g.edges if r == ":name"}
    by_owner = {s: t for s, r, t in g.edges if r == ":name"}
    assert len(names) == 2
    assert (by_owner[person], ":op1", '"John"') in g.attrs
    assert (by_owner[person], ":op2", '"Smith"') in g.attrs
    assert (by_owner[city], ":op1", '"Paris"') in g.attrs
    visit = g.one("visit-01")
    assert (visit, ":ARG0", person) in g.edges and (visit, ":ARG1", city) in g.edges


def test_argument_order_follows_the_sentence(en):
    a = one_graph(en, "The cat chased the dog.")
    b = one_graph(en, "The dog chased the cat.")
    assert a.has("chase-01", ":ARG0", "cat") and a.has("chase-01", ":ARG1", "dog")
    assert b.has("chase-01", ":ARG0", "dog") and b.has("chase-01", ":ARG1", "cat")
    assert not a.has("chase-01", ":ARG0", "dog") and not b.has("chase-01", ":ARG0", "cat")


def test_pronoun_reentrancy(en):
    g = one_graph(en, "I hurt myself.")
    i, hurt = g.one("i"), g.one("hurt-01")
    assert (hurt, ":ARG0", i) in g.edges and (hurt, ":ARG1", i) in g.edges
    g = one_graph(en, "I love my dog.")
    i = g.one("i")  # "I" and "my" are one node
    assert (g.one("love-01"), ":ARG0", i) in g.edges and (g.one("dog"), ":poss", i) in g.edges


def test_copula_domain(en):
    (result,) = en.parse(["The picture is magnificent."])
    assert result.penman == "(m / magnificent :domain (p / picture))"


def test_modal_and_coordination(en):
    g = one_graph(en, "I can see the stars.")
    assert g.graph.top == g.one("possible-01") and g.has("possible-01", ":ARG1", "see-01")
    assert g.has("see-01", ":ARG0", "i") and g.has("see-01", ":ARG1", "star")
    g = one_graph(en, "I chose a profession and learned to pilot airplanes.")
    assert g.graph.top == g.one("and")
    assert g.has("and", ":op1", "choose-01") and g.has("and", ":op2", "learn-01")
    i = g.one("i")  # one subject shared by both verbs and the controlled "pilot"
    for frame in ("choose-01", "learn-01", "pilot-01"):
        assert (g.one(frame), ":ARG0", i) in g.edges


def test_relative_clause_reuses_the_noun(en):
    g = one_graph(en, "The flower that he loved was beautiful.")
    flower = g.one("flower")
    assert (g.one("love-01"), ":ARG1", flower) in g.edges
    assert (g.one("beautiful-02"), ":ARG1", flower) in g.edges


def test_imperative(en):
    g = one_graph(en, "Draw me a sheep!")
    draw = g.one("draw-01")
    assert (draw, ":mode", "imperative") in g.attrs
    assert g.has("draw-01", ":ARG0", "you") and g.has("draw-01", ":ARG1", "sheep") and g.has("draw-01", ":ARG2", "i")


def test_french_negation(fr):
    g = one_graph(fr, "Le garçon ne mange pas.")
    frames = [v for v, c in g.concept.items() if c.endswith("-01")]
    assert frames and any((v, ":polarity", "-") in g.attrs for v in frames)
    assert g.has("manger-01", ":ARG0", "garçon")


def test_awkward_inputs_never_crash(en):
    inputs = ["", "   \n\t", "The cat sat on the mat. " * 220, "x" * 5000, "Hello 世界 мир مرحبا 😀 ok",
              '" ... !!! "', "Chapter 1 ."]
    results = en.parse(inputs)
    assert len(results) == len(inputs)
    assert results[0] == ParseResult.failed("empty sentence") and results[1].error == "empty sentence"
    for r in results:
        if r.status == "ok":
            parse(r.penman)  # valid PENMAN
            assert r.error is None
        else:
            assert r.penman is None and r.error
    assert results[2].status == "ok" and len(inputs[2]) > 1000
    assert results[6].status == "ok"


def test_one_bad_sentence_fails_only_its_row(en, monkeypatch):
    from amrsim.amr import ud

    real = ud._Sentence.build

    def build(self, tok, inherit=None):
        if tok.text == "boom":
            raise RuntimeError("rule exploded")
        return real(self, tok, inherit)

    monkeypatch.setattr(ud._Sentence, "build", build)
    results = en.parse(["The dog barked.", "boom", "The cat slept."])
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert "rule exploded" in results[1].error
    assert "bark-01" in results[0].penman and "sleep-01" in results[2].penman


def test_unknown_language():
    from amrsim.amr.ud import UDParser

    with pytest.raises(ValueError, match=r"'de'.*en, fr"):
        UDParser("de")


def test_little_prince_corpus_smatch(en):
    """First 100 Little Prince sentences: measured corpus F1 0.651 (benchmarks/ud_little_prince.py --limit 100)."""
    path = shared("amr_little_prince", "little_prince_v3.0.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:100]]
    results = en.parse([r["snt"] for r in rows])
    matched = n1 = n2 = 0
    for row, res in zip(rows, results, strict=True):
        gold = smatch_triples(row["amr"], convention="smatch")
        if res.status != "ok":
            n2 += len(gold)
            continue
        score = smatch(smatch_triples(res.penman, convention="smatch"), gold)
        matched, n1, n2 = matched + score.matched, n1 + score.n1, n2 + score.n2
    f1 = 2 * matched / (n1 + n2)
    assert f1 > 0.61, f"corpus Smatch F1 {f1:.4f} fell below the floor"
