"""AMR parsing and the Smatch triples of both conventions (checked against smatch 1.0.4's own reader)."""

from __future__ import annotations

import penman
import pytest

from amrsim.amr.graph import AMRError, SmatchTriples, parse, read_triples, smatch_triples

BOY = """# ::id 1
# ::snt The boy wants to go.
(w / want-01
   :ARG0 (b / boy)
   :ARG1 (g / go-02
            :ARG0 b))"""


def test_metadata_lines_are_accepted():
    g = parse(BOY)
    assert isinstance(g, penman.Graph)
    assert g.top == "w"
    assert g.metadata.get("snt") == "The boy wants to go."
    t = smatch_triples(g, convention="smatch")
    assert t.variables == ("w", "b", "g")
    assert t.instances == (("w", "want-01"), ("b", "boy"), ("g", "go-02"))
    assert set(t.relations) == {("w", "ARG0", "b"), ("w", "ARG1", "g"), ("g", "ARG0", "b")}
    assert t.attributes == (("w", "TOP", "top"),)
    assert len(t) == 7


def test_string_and_graph_inputs_agree():
    for conv in ("smatch", "amr"):
        assert smatch_triples(BOY, convention=conv) == smatch_triples(parse(BOY), convention=conv)


def test_graph_not_from_parse_uses_penman_layout():
    g = penman.decode("(a / b :consist-of (c / d) :ARG0-of (e / f) :mod (g / h))")
    assert smatch_triples(g, "smatch") == smatch_triples(parse(penman.encode(g)), "smatch")


def test_inverted_roles_and_exceptions():
    t = smatch_triples("(a / dog :ARG0-of (b / bark-01) :consist-of (c / fur) :mod (d / big))", "smatch")
    assert ("b", "ARG0", "a") in t.relations  # inverted
    assert ("a", "consist-of", "c") in t.relations  # smatch's exception list
    assert ("d", "domain", "a") in t.relations  # smatch's mod -> domain
    t = smatch_triples('(a / dog :mod (d / big) :mod "x")', "amr")
    assert ("d", "domain", "a") in t.relations and ("a", "mod", "x") in t.attributes
    assert not smatch_triples('(a / dog :mod "x")', "smatch").attributes[1:]  # smatch 1.0.4 loses it


def test_top_triple_per_convention():
    assert smatch_triples(BOY, "smatch").attributes[0] == ("w", "TOP", "top")
    assert smatch_triples(BOY, "amr").attributes[0] == ("w", "TOP", "want-01")


def test_quotes_and_case():
    s = '(c / City :name (n / name :op1 "New York" :op2 "Big_Apple") :wiki "Q60" :polarity -)'
    t = smatch_triples(s, "smatch")
    assert ("c", "city") in t.instances
    assert ("n", "op1", "new") in t.attributes  # smatch 1.0.4 keeps the first word only
    assert ("n", "op2", "big_apple") in t.attributes
    assert ("c", "polarity", "-") in t.attributes
    assert ("n", "op1", "new york") in smatch_triples(s, "amr").attributes
    assert ("c", "name", "n") in t.relations


def test_quoted_parenthesis_and_colon():
    t = smatch_triples('(s / say-01 :ARG1 "a (b): c" :time "12:30")', "amr")
    assert ("s", "ARG1", "a (b): c") in t.attributes
    assert ("s", "time", "12:30") in t.attributes


def test_non_ascii_concepts():
    t = smatch_triples('(h / höhle :mod (z / 中国) :name (n / name :op1 "Zoë"))', "amr")
    assert ("h", "höhle") in t.instances and ("z", "中国") in t.instances
    assert ("n", "op1", "zoë") in t.attributes


@pytest.mark.parametrize("text, message", [
    ("(a / b :ARG0 (c / d)", "unbalanced parentheses"),
    ("(a / b))", "unbalanced parentheses"),
    ("", "empty graph"),
    ("   \n ", "empty graph"),
    ("# ::snt only a sentence\n# ::id 3", "only metadata"),
    ("(a / b :ARG0 (a / c))", "duplicate variable a"),
    ("(a / b :ARG0 y)", "undefined variable y"),
    ("(a / b :ARG0 (c / d :ARG1 x2))", "undefined variable x2"),
    ("(a :ARG0 (c / d))", "missing concept"),
    ("(a / b) (c / d)", "more than one graph"),
    ('(a / b :op1 "open)', "unterminated quote"),
    ("(a / b :ARG0)", "has no value"),
])
def test_bad_input_raises_amr_error(text, message):
    with pytest.raises(AMRError, match=message):
        parse(text)
    with pytest.raises(AMRError):
        smatch_triples(text)


def test_parse_never_raises_other_errors():
    for text in [None, 3, "(", ")", "/", ":ARG0", "((a / b))", "(a / b / c)", "(a / b :ARG0 (c / ))", '"x"']:
        with pytest.raises(AMRError):
            parse(text)  # type: ignore[arg-type]


def test_constants_that_are_not_variables():
    t = smatch_triples("(g / go-02 :mode imperative :polarity - :quant 3 :li a)", "amr")
    assert {("g", "mode", "imperative"), ("g", "polarity", "-"), ("g", "quant", "3")} <= set(t.attributes)


def test_three_hundred_nodes_parse():
    text = "(n0 / root" + "".join(f" :op{i} (n{i} / thing-{i % 7})" for i in range(1, 300)) + ")"
    t = smatch_triples(parse(text), "amr")
    assert len(t.variables) == 300 and len(t.relations) == 299
    deep = "(n0 / root" + "".join(f" :ARG0 (n{i} / c{i}" for i in range(1, 300)) + ")" * 300
    assert len(smatch_triples(deep).variables) == 300


def test_dereify_have_mod():
    t = smatch_triples("(s / sing-01 :ARG0 (b / bird) :ARG1-of (h / have-mod-91 :ARG2 (l / loud)))", "amr",
                       dereify=True)
    assert "h" not in t.variables
    assert ("l", "domain", "s") in t.relations
    assert isinstance(t, SmatchTriples)


def test_same_triples_as_smatch_reference():
    amr = pytest.importorskip("amr")
    texts = [BOY, '(c / city :name (n / name :op1 "New" :op2 "York") :mod-of (b / big) :consist-of (p / people))',
             "(a / and :op1 (x / x1 :ARG0-of (y / y1 :mod y)) :op2 x)"]
    for text in texts:
        ref = amr.AMR.parse_AMR_line(" ".join(text.split("\n")[-1:] if "#" not in text else
                                              [line for line in text.split("\n") if not line.startswith("#")]))
        inst, att, rel = ref.get_triples()
        ours = smatch_triples(text, "smatch")
        norm = lambda x: (x if isinstance(x, str) else x[0]).lower()  # noqa: E731
        assert sorted((v, c.lower()) for _, v, c in inst) == sorted(ours.instances)
        assert sorted((v, norm(r), c.lower().rstrip("_")) for r, v, c in att) == \
            sorted((v, r.lower(), c) for v, r, c in ours.attributes)
        assert sorted((s, r.lower(), o) for r, s, o in rel) == sorted((s, r.lower(), o) for s, r, o in ours.relations)


def test_quoted_concept_compares_without_its_quotes():
    for conv in ("smatch", "amr"):
        quoted, plain = smatch_triples('(x / "Foo")', conv), smatch_triples("(x / foo)", conv)
        assert quoted.instances == plain.instances == (("x", "foo"),)
        assert quoted == plain


@pytest.mark.parametrize("aligned", [
    "(a / alpha~e.1 :ARG0~e.3 (b / beta~e.2) :op1 \"Bob\"~e.4 :polarity -~e.5)",
    "(a / alpha ~1 :ARG0 ~e.3 (b / beta ~e.2,3) :op1 \"Bob\" ~4 :polarity - ~5)",
])
def test_alignments_are_dropped_as_penman_does(aligned):
    plain = '(a / alpha :ARG0 (b / beta) :op1 "Bob" :polarity -)'
    for conv in ("smatch", "amr"):
        assert smatch_triples(aligned, conv) == smatch_triples(plain, conv)
        assert smatch_triples(parse(aligned), conv) == smatch_triples(plain, conv)
    assert parse(aligned).triples == penman.decode(plain).triples


def test_a_tilde_that_is_no_alignment_is_refused_with_penmans_message():
    with pytest.raises(AMRError, match="penman could not read the graph"):
        parse("(a / alpha~x)")


def test_of_of_roles_read_the_same_from_text_and_from_a_decoded_graph():
    text = ("(a / alpha :ARG1-of-of (b / beta) :ARG0-of (c / gamma) :consist-of (d / delta)"
            " :consist-of-of (e / epsilon))")
    for conv, relation in (("smatch", ("b", "ARG1-of", "a")),  # one -of taken off, as smatch 1.0.4
                           ("amr", ("a", "ARG1", "b"))):  # two -of cancel, as smatchpp
        from_text = smatch_triples(text, conv)
        assert relation in from_text.relations and ("c", "ARG0", "a") in from_text.relations
        assert ("e", "consist-of", "a") in from_text.relations  # the inverse of an exception: turned around
        assert smatch_triples(penman.decode(text), conv) == from_text == read_triples(text, conv)
        assert smatch_triples(parse(text), conv) == from_text


def test_dereify_matches_role_names_in_any_case():
    upper = smatch_triples("(s / sing-01 :ARG1-of (h / have-mod-91 :ARG2 (l / loud)))", "amr", dereify=True)
    lower = smatch_triples("(s / sing-01 :arg1-of (h / have-mod-91 :arg2 (l / loud)))", "amr", dereify=True)
    assert "h" not in lower.variables and ("l", "domain", "s") in lower.relations
    assert upper == lower
