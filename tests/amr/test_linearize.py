"""Linearization for the AMR encoder: exact strings for both variants, invalid graphs, the added vocabulary."""

from __future__ import annotations

import pytest

from amrsim.amr.graph import AMRError
from amrsim.amr.linearize import is_frame, is_relation, linearize, vocabulary

BOY = """# ::id t.1
# ::snt The boy does not want to go.
(w / want-01
   :polarity -
   :ARG0 (b / boy)
   :ARG1 (g / go-02
            :ARG0 b))"""

PARIS = """(v / visit-01
   :ARG0 (p / person :wiki -
            :name (n / name :op1 "Jean" :op2 "Dupont"))
   :ARG1 (c / city :wiki "Paris"
            :name (n2 / name :op1 "Paris"))
   :time (d / date-entity :year 2019))"""

INVERSE = "(b / boy :ARG0-of (w / want-01 :ARG1 (g / go-02 :ARG0 b)))"


def test_paper_variant_reentrancy_negation_metadata():
    assert linearize(BOY) == "( want-01 :polarity - :ARG0 ( boy ) :ARG1 ( go-02 :ARG0 boy ) )"
    assert linearize(BOY, variant="paper") == linearize(BOY)


def test_pointer_variant_reentrancy():
    assert linearize(BOY, variant="pointer") == (
        "( <pointer:0> want-01 :polarity - :ARG0 ( <pointer:1> boy ) :ARG1 ( <pointer:2> go-02 :ARG0 <pointer:1> ) )")


def test_wiki_dropped_names_and_numbers_kept():
    assert linearize(PARIS) == ("( visit-01 :ARG0 ( person :name ( name :op1 Jean :op2 Dupont ) ) "
                                ":ARG1 ( city :name ( name :op1 Paris ) ) :time ( date-entity :year 2019 ) )")
    assert linearize(PARIS, "pointer") == (
        "( <pointer:0> visit-01 :ARG0 ( <pointer:1> person :name ( <pointer:2> name :op1 Jean :op2 Dupont ) ) "
        ":ARG1 ( <pointer:3> city :name ( <pointer:4> name :op1 Paris ) ) "
        ":time ( <pointer:5> date-entity :year 2019 ) )")
    assert ":wiki" not in linearize(PARIS) and '"' not in linearize(PARIS)


def test_inverse_role_split_and_reentrant_root():
    # `:ARG0-of` is written `:ARG0 -of`; the root reached again is its bare concept / its pointer
    assert linearize(INVERSE) == "( boy :ARG0 -of ( want-01 :ARG1 ( go-02 :ARG0 boy ) ) )"
    assert linearize(INVERSE, "pointer") == (
        "( <pointer:0> boy :ARG0 -of ( <pointer:1> want-01 :ARG1 ( <pointer:2> go-02 :ARG0 <pointer:0> ) ) )")


def test_string_underscores_become_spaces():
    g = '(c / city :name (n / name :op1 "New_York" :op2 "City"))'
    assert linearize(g) == "( city :name ( name :op1 New York :op2 City ) )"


def test_reference_before_definition_pointer_numbers_by_definition():
    g = "(a / ask-01 :ARG0 p :ARG1 (p / person))"
    assert linearize(g) == "( ask-01 :ARG0 person :ARG1 ( person ) )"
    assert linearize(g, "pointer") == "( <pointer:0> ask-01 :ARG0 <pointer:1> :ARG1 ( <pointer:1> person ) )"


@pytest.mark.parametrize("bad", ["", "   ", "# ::snt only metadata", "(w / want-01 :ARG0 (b / boy)",
                                 "(w / want-01 :ARG0 x)", "(w / want-01 :ARG0 (w / boy))", "()", "boy"])
def test_invalid_graph_raises_amr_error(bad):
    with pytest.raises(AMRError):
        linearize(bad)


def test_unknown_variant():
    with pytest.raises(ValueError, match="variant"):
        linearize(BOY, variant="spring")


def test_token_classes():
    assert is_relation(":ARG0") and is_relation(":op1") and is_relation(":prep-on-behalf-of")
    assert not is_relation(":") and not is_relation("-of") and not is_relation("<pointer:1>")
    assert is_frame("want-01") and is_frame("have-rel-role-91")
    assert not is_frame("boy") and not is_frame("2001-09") and not is_frame("Apollo-11") and not is_frame("-01")


def test_vocabulary_counts_threshold_and_order():
    lines = [linearize(BOY)] * 3 + [linearize(PARIS)] * 2 + [None, ""]  # None/empty rows are skipped
    vocab = vocabulary(lines, min_count=1)
    assert vocab[":ARG0"] == 3 * 2 + 2  # two per BOY, one per PARIS
    assert vocab["want-01"] == 3 and vocab["go-02"] == 3 and vocab["visit-01"] == 2
    assert ":wiki" not in vocab and "boy" not in vocab and "(" not in vocab and "-" not in vocab
    counts = list(vocab.items())
    assert counts == sorted(counts, key=lambda tc: (-tc[1], tc[0]))
    assert list(vocabulary(lines, min_count=3).items()) == [
        (":ARG0", 8), (":ARG1", 5), (":name", 4), (":op1", 4), (":polarity", 3), ("go-02", 3), ("want-01", 3)]
    assert vocabulary(lines) == {":ARG0": 8, ":ARG1": 5}  # default min_count=5
    assert vocabulary([]) == {}
