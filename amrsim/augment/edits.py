"""Minimal edits of English sentences: a sentence and a copy of itself that differs in one place, for
knowledge-preserving pairs (`distill_edits` in PEAR) where a cross-encoder trained on similarity tends to follow word
overlap rather than meaning.

Three edits over a spaCy parse, each of the sentence's main clause:
- `negate`: "not" after the first auxiliary or copula ("is playing" -> "is not playing"), "does/did/do not" + lemma
  for a bare verb ("plays" -> "does not play"), or the negation removed where the clause has one;
- `swap`: the subject and the object exchanged ("the dog chases the cat" -> "the cat chases the dog");
- `drop`: one modifier left out (an adjective, adverb, compound noun or prepositional phrase).

Which edit a sentence gets is drawn (seeded) among those that apply; a sentence where none applies yields nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["EDITS", "edited_copies"]

EDITS = ("negate", "swap", "drop")
_DO = {"VBZ": "does", "VBD": "did", "VBP": "do"}
_DROPPABLE = {"amod", "advmod", "compound", "prep"}
_SUBJECTS = {"nsubj", "nsubjpass"}
_OBJECTS = {"dobj", "attr"}


def _text(doc: Any, drop: set[int] = frozenset(), replace: dict[int, str] | None = None) -> str:
    """The doc's tokens but `drop`, joined with their whitespace; `replace` maps a token index to the text that stands
    for it. A token before a dropped run takes the run's last whitespace ("do that again." -> "do that.")."""
    replace = replace or {}
    out = []
    for t in doc:
        if t.i in drop:
            if out:
                out[-1] = out[-1].rstrip() + t.whitespace_
            continue
        out.append(replace.get(t.i, t.text) + t.whitespace_)
    return " ".join("".join(out).split())


def _capitalise(text: str, first_was_upper: bool) -> str:
    return text[:1].upper() + text[1:] if first_was_upper and text else text


def negate(doc: Any) -> str | None:
    root = doc[:].root
    if root.pos_ not in ("VERB", "AUX"):
        return None
    negs = [c for c in root.children if c.dep_ == "neg"]
    if negs:  # un-negate: "is not playing" -> "is playing"; "does not play" keeps "does" and drops "not"
        return _text(doc, drop={n.i for n in negs})
    subj = next((c for c in root.children if c.dep_ in _SUBJECTS | {"expl"}), None)
    if subj is None:
        return None
    # only after the subject: "does not Tom want" is not a question's negation
    auxes = [c for c in root.children
             if c.dep_ in ("aux", "auxpass") and subj.i < c.i < root.i and c.lower_ != "to"]
    if auxes:
        return _text(doc, replace={auxes[0].i: f"{auxes[0].text} not"})
    if subj.i > root.i:
        return None
    if root.lemma_ == "be":
        return _text(doc, replace={root.i: f"{root.text} not"})
    if root.tag_ in _DO:
        return _text(doc, replace={root.i: f"{_DO[root.tag_]} not {root.lemma_}"})
    return None


def swap(doc: Any) -> str | None:
    root = doc[:].root
    subj = next((c for c in root.children if c.dep_ in _SUBJECTS), None)
    obj = next((c for c in root.children if c.dep_ in _OBJECTS), None)
    if subj is None or obj is None or subj.pos_ == "PRON" or obj.pos_ == "PRON":
        return None
    a, b = sorted([doc[subj.left_edge.i:subj.right_edge.i + 1], doc[obj.left_edge.i:obj.right_edge.i + 1]],
                  key=lambda s: s.start)
    if a.end > b.start:
        return None

    def side(span: Any) -> str:  # a span that moves off the start is lower-cased, unless it opens with a name
        text = span.text
        return text if span.start != 0 or span[0].pos_ == "PROPN" else text[:1].lower() + text[1:]

    first_upper = doc[0].text[:1].isupper()
    moved = (doc[:a.start].text_with_ws + side(b) + a[-1].whitespace_ + doc[a.end:b.start].text_with_ws + side(a)
             + b[-1].whitespace_ + doc[b.end:].text)
    return _capitalise(" ".join(moved.split()), first_upper)


def drop(doc: Any, rng: np.random.Generator) -> str | None:
    root = doc[:].root
    content = sum(1 for t in doc if not t.is_punct)
    spans = []
    for t in doc:
        if t.dep_ in _DROPPABLE and t.i != root.i and not t.tag_.startswith("W"):  # not a question's wh-word
            span = doc[t.left_edge.i:t.right_edge.i + 1]
            if root.i not in range(span.start, span.end) and 2 * len(span) < content:
                spans.append(span)
    if not spans:
        return None
    span = spans[int(rng.integers(len(spans)))]
    text = _text(doc, drop=set(range(span.start, span.end)))
    return _capitalise(text, doc[0].text[:1].isupper())


def _edits(rng: np.random.Generator) -> dict[str, Callable[[Any], str | None]]:
    return {"negate": negate, "swap": swap, "drop": lambda doc: drop(doc, rng)}


def edited_copies(texts: list[str], nlp: Any, wanted: int, seed: int) -> list[tuple[int, str, str]]:
    """Up to `wanted` (index into `texts`, edit, edited text), at most one per sentence, in `texts`' order: each
    sentence gets one of the edits that apply to it and change it, drawn with `seed`."""
    rng = np.random.default_rng(seed)
    edits = _edits(rng)
    out: list[tuple[int, str, str]] = []
    for i, doc in enumerate(nlp.pipe(texts, batch_size=256)):
        if len(out) >= wanted:
            break
        if len(doc) < 3:
            continue
        for name in rng.permutation(EDITS):
            edited = edits[str(name)](doc)
            if edited and edited.strip() != " ".join(texts[i].split()):
                out.append((i, str(name), edited))
                break
    return out
