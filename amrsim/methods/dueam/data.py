"""DuEAM's training pairs (paper §5) from NLI-style items, labels unused."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MODES = ("unsupervised", "monolingual", "cross_lingual", "parallel")
Layout = tuple[int, int, str, str, bool]  # item, hypothesis, lang1, lang2, cross-lingual


@dataclass(frozen=True)
class NLIItem:
    """One NLI example: its premise and hypotheses, each as language -> text (the languages it exists in)."""

    item_id: str
    premise: Mapping[str, str]
    hypotheses: tuple[Mapping[str, str], ...]


@dataclass(frozen=True)
class TrainPair:
    """Premise text1 (lang1), hypothesis text2 (lang2) of item `source` (another item's for `unsupervised`)."""

    text1: str
    text2: str
    lang1: str
    lang2: str
    mode: str
    item_id: str
    source: str
    text2_in_lang1: str | None = None  # a cross-lingual pair's hypothesis in the premise's language, when given
    sides: tuple[Mapping[str, str], Mapping[str, str]] | None = None  # both sentences in every language they exist in

    def anchor_text2(self, same_language: bool) -> str:
        """What the anchor compares text1 with: text2, or with `same_language` its translation into lang1 (an anchor
        whose token space is not aligned across languages measures a translation as far as an unrelated text)."""
        return self.text2_in_lang1 if same_language and self.text2_in_lang1 is not None else self.text2

    def anchor_texts(self, lang: str | None, same_language: bool = False) -> tuple[str, str]:
        """The two sentences the anchor compares: both in `lang` where both exist in it (a monolingual anchor, e.g.
        English MiniLM, then reads every pair in its language), else text1 and `anchor_text2(same_language)`."""
        if lang is not None and self.sides is not None and lang in self.sides[0] and lang in self.sides[1]:
            return self.sides[0][lang], self.sides[1][lang]
        return self.text1, self.anchor_text2(same_language)


def construct_pairs(items: Sequence[NLIItem], modes: Sequence[str], langs: Sequence[str] | None = None,
                    seed: int = 0, max_cross_per_item: int | None = None) -> tuple[list[TrainPair], Counter[str]]:
    """Pairs of the paper's §5 and counts of what could not be built. Per item and hypothesis, the language layouts
    are (L, L) for every language both sides have (`monolingual`) and (L1, L2), L1 != L2 (`cross_lingual`, at most
    `max_cross_per_item` sampled per hypothesis), in the languages `langs`. `unsupervised` takes every layout but
    the hypothesis, in L2, of a uniformly drawn other item. `parallel` pairs each sentence with its translations
    (`parallel_pairs`)."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"DuEAM pair modes {unknown} unknown; use {', '.join(MODES)}")
    allowed = set(langs) if langs is not None else None

    def ok(lang: str) -> bool:
        return allowed is None or lang in allowed

    rng = np.random.default_rng(seed)
    layouts = language_layouts(items, ok, rng, max_cross_per_item)
    pairs = [TrainPair(items[i].premise[l1], items[i].hypotheses[h][l2], l1, l2, mode, items[i].item_id,
                       items[i].item_id, items[i].hypotheses[h].get(l1) if cross else None,
                       (items[i].premise, items[i].hypotheses[h]))
             for i, h, l1, l2, cross in layouts if (mode := "cross_lingual" if cross else "monolingual") in modes]
    missing: Counter[str] = Counter()
    if "unsupervised" in modes:
        pairs += unsupervised_pairs(items, layouts, ok, rng, missing)
    if "parallel" in modes:
        pairs += parallel_pairs(items, ok, rng, max_cross_per_item)
    return pairs, missing


def parallel_pairs(items: Sequence[NLIItem], ok: Callable[[str], bool], rng: np.random.Generator,
                   max_per_sentence: int | None) -> list[TrainPair]:
    """A sentence and its translation (L1, L2), L1 != L2, for the premise and each hypothesis (at most
    `max_per_sentence` sampled language pairs each); in lang1 the two are one text, so a same-language anchor's
    target is WMD 0: translations meet."""
    pairs = []
    for item in items:
        seen = set()
        for side in (item.premise, *item.hypotheses):
            key = tuple(sorted(side.items()))
            if key in seen:  # a premise repeated as its own hypothesis
                continue
            seen.add(key)
            langs = sorted(lg for lg in side if ok(lg))
            layouts = [(l1, l2) for l1 in langs for l2 in langs if l1 != l2]
            if max_per_sentence is not None and len(layouts) > max_per_sentence:
                layouts = [layouts[k] for k in sorted(rng.choice(len(layouts), max_per_sentence, replace=False))]
            pairs += [TrainPair(side[l1], side[l2], l1, l2, "parallel", item.item_id, item.item_id, side[l1],
                                (side, side)) for l1, l2 in layouts]
    return pairs


def language_layouts(items: Sequence[NLIItem], ok: Callable[[str], bool], rng: np.random.Generator,
                     max_cross_per_item: int | None) -> list[Layout]:
    layouts: list[Layout] = []
    for i, item in enumerate(items):
        p_langs = sorted(lg for lg in item.premise if ok(lg))
        for h, hyp in enumerate(item.hypotheses):
            h_langs = sorted(lg for lg in hyp if ok(lg))
            layouts += [(i, h, lg, lg, False) for lg in p_langs if lg in hyp and ok(lg)]
            cross = [(l1, l2) for l1 in p_langs for l2 in h_langs if l1 != l2]
            if max_cross_per_item is not None and len(cross) > max_cross_per_item:
                cross = [cross[k] for k in sorted(rng.choice(len(cross), max_cross_per_item, replace=False))]
            layouts += [(i, h, l1, l2, True) for l1, l2 in cross]
    return layouts


def unsupervised_pairs(items: Sequence[NLIItem], layouts: Sequence[Layout], ok: Callable[[str], bool],
                       rng: np.random.Generator, missing: Counter[str]) -> list[TrainPair]:
    # hypotheses per language, in item order: the other items' hypotheses of item i are the pool minus a run
    pool: dict[str, list[tuple[int, int]]] = {}
    for i, item in enumerate(items):
        for h, hyp in enumerate(item.hypotheses):
            for lg in hyp:
                if ok(lg):
                    pool.setdefault(lg, []).append((i, h))
    spans = {lg: item_spans(entries) for lg, entries in pool.items()}
    pairs = []
    for i, _, l1, l2, _ in layouts:
        entries = pool[l2]
        lo, hi = spans[l2].get(i, (0, 0))
        others = len(entries) - (hi - lo)
        if others <= 0:
            missing["unsupervised: no other item has a hypothesis in " + l2] += 1
            continue
        r = int(rng.integers(others))
        j, h = entries[r if r < lo else r + (hi - lo)]
        pairs.append(TrainPair(items[i].premise[l1], items[j].hypotheses[h][l2], l1, l2, "unsupervised",
                               items[i].item_id, items[j].item_id, sides=(items[i].premise, items[j].hypotheses[h])))
    return pairs


def item_spans(entries: list[tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """item -> [start, end) of its run in `entries` (sorted by item)."""
    spans: dict[int, tuple[int, int]] = {}
    for pos, (i, _) in enumerate(entries):
        start, _ = spans.get(i, (pos, pos))
        spans[i] = (start, pos + 1)
    return spans
