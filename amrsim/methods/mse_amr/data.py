"""MSE-AMR's data: triples (role -> language -> text and linearised graph), the mixed views drawn from them, graphs
linearised from `amr` rows, and the two reads of a dataset the training stage and the trained encoder share (its graphs
and its translations of English sentences). Light to import (polars only); parsers load on first use."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from amrsim.amr.backends import BACKENDS, DEFAULT_BACKEND, ParserSpec
from amrsim.amr.graph import AMRError
from amrsim.amr.linearize import linearize
from amrsim.amr.parsing import parse_texts
from amrsim.warehouse import OK, Warehouse

ROLES = ("premise", "entailment", "contradiction")  # anchor, positive, hard negative
ENGLISH = "en"

# role -> language -> {"text": str | None, "graph": linearised graph | None}
Triple = Mapping[str, Mapping[str, Mapping[str, str | None]]]


def mixed_view(example: Triple, langs: Sequence[str], rng: random.Random, p_graph: float = 0.5, *,
               lang_weights: Sequence[float] | None = None) -> dict[str, str]:
    """One training view of a triple (the paper's Algorithm 1): role -> the string the AMR encoder reads.

    Drawn *per sentence*: premise, entailment and contradiction each draw their own language from `langs`
    (uniformly, or by `lang_weights`), so one triple can mix languages and forms. A non-English sentence is always
    the linearised graph of that language's sentence; an English one is the graph with probability `p_graph`, else
    the English text. Languages where the sentence is unusable (non-English: no graph; English: neither graph nor
    text) are left out of that sentence's draw. The released code drew per sentence too."""
    if not langs:
        raise ValueError("mixed_view: langs is empty")
    if not 0.0 <= p_graph <= 1.0:
        raise ValueError(f"mixed_view: p_graph {p_graph} is not a probability")
    if lang_weights is not None and len(lang_weights) != len(langs):
        raise ValueError(f"mixed_view: {len(lang_weights)} lang_weights for {len(langs)} langs")
    weights = [1.0] * len(langs) if lang_weights is None else [float(w) for w in lang_weights]
    view: dict[str, str] = {}
    for role in ROLES:
        per_lang = example.get(role) or {}
        options = [(lang, w) for lang, w in zip(langs, weights, strict=True) if w > 0 and (
            (per_lang.get(lang) or {}).get("graph") or (lang == ENGLISH and (per_lang.get(lang) or {}).get("text")))]
        if not options:
            raise ValueError(f"mixed_view: '{role}' has no usable graph (or English text) in any of {list(langs)}")
        lang = rng.choices([lg for lg, _ in options], weights=[w for _, w in options])[0]
        graph, text = per_lang[lang].get("graph"), per_lang[lang].get("text")
        use_text = lang == ENGLISH and text and (not graph or rng.random() >= p_graph)
        view[role] = str(text) if use_text else str(graph)
    return view


def text_langs(triples: Iterable[Triple]) -> list[str]:
    """Every language some sentence of `triples` has text in, English first."""
    found = {lg for t in triples for role in ROLES for lg, e in (t.get(role) or {}).items() if e and e.get("text")}
    return sorted(found, key=lambda lg: (lg != ENGLISH, lg))


def linearized(penman_texts: Iterable[str | None], variant: str) -> list[tuple[str | None, str | None]]:
    """(linearised graph, error) per PENMAN string; each distinct string is linearised once."""
    done: dict[str, tuple[str | None, str | None]] = {}
    out = []
    for text in penman_texts:
        if not text:
            out.append((None, "empty graph"))
            continue
        if text not in done:
            try:
                done[text] = (linearize(text, variant=variant), None)
            except AMRError as e:
                done[text] = (None, f"cannot linearise the graph: {e}")
        out.append(done[text])
    return out


@dataclass
class Graphs:
    """Linearised graphs of a dataset's sentences from one parser: ok[key] = (graph, pivot_lang), failed[key] = why.
    Where a sentence has several rows (its own parse and a parse of its English source), its own wins."""

    ok: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def graphs_of(amr: pl.DataFrame, by: str, variant: str) -> Graphs:
    """`Graphs` by column `by` of `amr` rows; of several rows for one id, an ok graph of the sentence itself (not of
    its English source) with the smallest amr key wins."""
    out = Graphs()
    amr = amr.sort(pl.col("status") != OK, pl.col("pivot_lang").is_not_null(), by, "key")  # ok rows first
    ok = (amr["status"] == OK).to_list()
    lines = linearized([p if good else "" for p, good in zip(amr["penman"], ok, strict=True)], variant)
    for key, good, (graph, error), pivot, why in zip(amr[by], ok, lines, amr["pivot_lang"], amr["error"], strict=True):
        if key in out.ok:
            continue
        if graph is not None:
            out.ok[key] = (graph, pivot)
            out.failed.pop(key, None)
        else:
            out.failed.setdefault(key, (error or "cannot linearise the graph") if good else (why or "parse failed"))
    return out


def sentence_graphs(wh: Warehouse, dataset: str, parser: str, variant: str = "paper",
                    keys: Iterable[str] | None = None, version: int | None = None, by: str = "sentence_key") -> Graphs:
    """The `amr` rows of `parser` (optionally only those whose column `by` is one of `keys`, optionally pinned) as
    `Graphs` by `by`: by sentence, or by a graph's own key (a pair's `amr1_key`/`amr2_key`: the graphs its input row
    gave). Linearised with `variant` from their PENMAN (the table's `linearized` column may hold another variant)."""
    if version is None and not wh.exists(dataset, "amr"):
        return Graphs()
    amr = wh.read(dataset, "amr", version=version,
                  columns=["key", "sentence_key", "penman", "parser", "pivot_lang", "status", "error"])
    amr = amr.filter(pl.col("parser") == parser)
    if keys is not None:
        amr = amr.filter(pl.col(by).is_in(list(set(keys))))
    return graphs_of(amr, by, variant)


def translations(wh: Warehouse, dataset: str, version: int | None = None) -> pl.DataFrame:
    """The ok rows of the `parallel` table that translate an English sentence (none without the table)."""
    columns = ["source_lang", "source_key", "source", "target_lang", "target_key", "target", "status"]
    if version is None and not wh.exists(dataset, "parallel"):
        return pl.DataFrame(schema=dict.fromkeys(columns, pl.String))
    par = wh.read(dataset, "parallel", version=version, columns=columns)
    return par.filter((pl.col("status") == OK) & (pl.col("source_lang") == ENGLISH))


def parse_now(texts: Sequence[str], lang: str, parser: str, variant: str) -> list[tuple[str | None, str | None]]:
    """(linearised graph, error) per distinct text, parsed now with `parser` (only the default backend parses without
    a model dir)."""
    if parser != DEFAULT_BACKEND or lang not in BACKENDS[DEFAULT_BACKEND].langs:
        why = (f"no {parser} parser for '{lang}' here" if parser == DEFAULT_BACKEND else
               f"parser '{parser}' cannot parse here")
        return [(None, why)] * len(texts)
    results, _ = parse_texts(ParserSpec(DEFAULT_BACKEND, lang), list(texts))
    graphs = linearized([r.penman if r.status == OK else None for r in results], variant)
    return [(g, e if r.status == OK else (r.error or "parse failed"))
            for r, (g, e) in zip(results, graphs, strict=True)]
