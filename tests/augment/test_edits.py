"""amrsim.augment.edits on the packaged English spaCy pipeline: each edit on sentences whose parse is plain, the
whitespace around what is dropped, and the seeded draw of one edit per sentence."""

from __future__ import annotations

import numpy as np
import pytest

from amrsim.amr.ud import load_spacy
from amrsim.augment.edits import EDITS, drop, edited_copies, negate, swap


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en")


@pytest.mark.parametrize(("sentence", "negated"), [
    ("The man is playing a guitar.", "The man is not playing a guitar."),
    ("The dog chases the cat.", "The dog does not chase the cat."),
    ("The children played in the park.", "The children did not play in the park."),
    ("The password is secret.", "The password is not secret."),
    ("Tom doesn't know the answer.", "Tom does know the answer."),  # un-negated, "does" keeps its space
    ("A woman is not slicing an onion.", "A woman is slicing an onion."),
    ("Where does Tom want to go?", None),  # a question's auxiliary comes before the subject
])
def test_negate_puts_not_after_the_subject_or_takes_it_away(nlp, sentence, negated):
    assert negate(nlp(sentence)) == negated


def test_swap_exchanges_subject_and_object_and_keeps_the_capital(nlp):
    assert swap(nlp("The dog chases the cat.")) == "The cat chases the dog."
    assert swap(nlp("Mary saw John.")) == "John saw Mary."
    assert swap(nlp("She reads books.")) is None  # a pronoun subject is not swapped
    assert swap(nlp("The baby sleeps.")) is None  # no object


def test_drop_leaves_out_one_modifier_and_mends_the_spacing(nlp):
    rng = np.random.default_rng(0)
    assert drop(nlp("Tom and Mary said they couldn't do that again."), rng) in {
        "Tom and Mary said they couldn't do that.", "Tom and Mary said they could do that again."}
    assert drop(nlp("A black cat sleeps."), rng) == "A cat sleeps."
    assert drop(nlp("Cats sleep."), rng) is None


def test_edited_copies_gives_one_changed_copy_per_sentence_seeded(nlp):
    texts = ["The dog chases the cat.", "Hello!", "A black cat sleeps on the sofa.", "The man is playing a guitar.",
             "Mary saw John in Paris."]
    out = edited_copies(texts, nlp, 10, seed=3)
    assert out == edited_copies(texts, nlp, 10, seed=3)
    assert [i for i, _, _ in out] == [0, 2, 3, 4]  # "Hello!" has no clause to edit
    for i, name, text in out:
        assert name in EDITS and text != texts[i]
        if name in ("negate", "swap"):  # (drop draws its modifier)
            assert text == {"negate": negate, "swap": swap}[name](nlp(texts[i]))
    assert len(edited_copies(texts, nlp, 2, seed=3)) == 2
    names = {name for seed in range(8) for _, name, _ in edited_copies(texts, nlp, 10, seed=seed)}
    assert names == set(EDITS)  # the draw reaches every edit
