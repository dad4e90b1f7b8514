"""MSE-AMR's inputs from the warehouse: each sentence's linearised graph (the parse stage's `amr` table, or a parse
made now), English sources of translated sentences, and the training triples in `mse_amr.Triple` form.

Light to import (polars only); parsers load on first use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from amrsim.amr.graph import AMRError
from amrsim.amr.linearize import linearize
from amrsim.amr.parsing import ParserSpec, parse_texts
from amrsim.config import PARSER_LANGS, PIVOT_LANG
from amrsim.warehouse.store import OK, Warehouse

ROLES = ("premise", "entailment", "contradiction")
ENGLISH = "en"


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


def sentence_graphs(wh: Warehouse, dataset: str, parser: str, variant: str = "paper",
                    keys: Iterable[str] | None = None, version: int | None = None) -> Graphs:
    """The `amr` rows of `parser` (optionally only `keys`, optionally pinned), linearised with `variant` from their
    PENMAN (the table's `linearized` column may hold another variant). A sentence the input gave several graphs
    (provided, in different pairs) reads the one with the smallest amr key; `pair_graphs` reads each pair's own."""
    if version is None and not wh.exists(dataset, "amr"):
        return Graphs()
    amr = wh.read(dataset, "amr", version=version,
                  columns=["key", "sentence_key", "penman", "parser", "pivot_lang", "status", "error"])
    amr = amr.filter(pl.col("parser") == parser)
    if keys is not None:
        amr = amr.filter(pl.col("sentence_key").is_in(list(set(keys))))
    return _linearised(amr, "sentence_key", variant)


def pair_graphs(wh: Warehouse, dataset: str, amr_keys: Iterable[str], variant: str = "paper",
                version: int | None = None) -> Graphs:
    """Graphs by their own `amr` key (a pair's `amr1_key`/`amr2_key`: the graphs its input row gave), linearised
    with `variant`."""
    if version is None and not wh.exists(dataset, "amr"):
        return Graphs()
    amr = wh.read(dataset, "amr", version=version, columns=["key", "penman", "pivot_lang", "status", "error"])
    return _linearised(amr.filter(pl.col("key").is_in(list(set(amr_keys)))), "key", variant)


def _linearised(amr: pl.DataFrame, by: str, variant: str) -> Graphs:
    """`Graphs` by column `by` of `amr` rows; of several rows for one id, an ok graph of the sentence itself (not of
    its English source) with the smallest amr key wins."""
    out = Graphs()
    amr = amr.sort(pl.col("status") != OK, pl.col("pivot_lang").is_not_null(), by, "key")
    ok = amr.filter(pl.col("status") == OK)
    for key, (graph, error), pivot in zip(ok[by], linearized(ok["penman"].to_list(), variant),
                                          ok["pivot_lang"], strict=True):
        if key in out.ok:
            continue
        if graph is None:
            out.failed.setdefault(key, error or "cannot linearise the graph")
        else:
            out.ok[key] = (graph, pivot)
            out.failed.pop(key, None)
    bad = amr.filter(pl.col("status") != OK)
    for key, error in zip(bad[by], bad["error"], strict=True):
        if key not in out.ok:
            out.failed.setdefault(key, error or "parse failed")
    return out


def english_sources(wh: Warehouse, dataset: str, version: int | None = None) -> dict[str, tuple[str, str]]:
    """Sentence key of a translation -> (key, text) of its English source, from the `parallel` table."""
    if version is None and not wh.exists(dataset, "parallel"):
        return {}
    par = wh.read(dataset, "parallel", version=version,
                  columns=["source_lang", "source_key", "source", "target_key", "status"])
    par = par.filter((pl.col("status") == OK) & (pl.col("source_lang") == PIVOT_LANG))
    out: dict[str, tuple[str, str]] = {}
    for t, s, text in zip(par["target_key"], par["source_key"], par["source"], strict=True):
        out.setdefault(t, (s, text))
    return out


def translations_of(wh: Warehouse, dataset: str, version: int | None = None) -> dict[str, list[tuple[str, str, str]]]:
    """English sentence key -> [(target lang, target key, target text)] from the `parallel` table."""
    if version is None and not wh.exists(dataset, "parallel"):
        return {}
    par = wh.read(dataset, "parallel", version=version,
                  columns=["source_lang", "source_key", "target_lang", "target_key", "target", "status"])
    par = par.filter((pl.col("status") == OK) & (pl.col("source_lang") == PIVOT_LANG))
    out: dict[str, list[tuple[str, str, str]]] = {}
    for s, lang, t, text in zip(par["source_key"], par["target_lang"], par["target_key"], par["target"], strict=True):
        if (lang, t, text) not in out.setdefault(s, []):
            out[s].append((lang, t, text))
    return out


def parse_now(texts: Sequence[str], lang: str, parser: str, variant: str) -> list[tuple[str | None, str | None]]:
    """(linearised graph, error) per text, parsed now with `parser` (only `ud` parses without a model dir)."""
    if parser != "ud" or lang not in PARSER_LANGS["ud"]:
        why = f"no {parser} parser for '{lang}' here" if parser == "ud" else f"parser '{parser}' cannot parse here"
        return [(None, why)] * len(texts)

    distinct = list(dict.fromkeys(texts))
    results, _ = parse_texts(ParserSpec("ud", lang), distinct)
    graphs = linearized([r.penman if r.status == OK else None for r in results], variant)
    by_text = {t: (g, e if r.status == OK else (r.error or "parse failed"))
               for t, r, (g, e) in zip(distinct, results, graphs, strict=True)}
    return [by_text[t] for t in texts]


# ---------------------------------------------------------------------------------------------------------------------
# training triples


@dataclass
class TripleData:
    """Training triples (sorted by dataset, item id), what was left out and why, and the languages found."""

    triples: list[dict[str, dict[str, dict[str, str | None]]]] = field(default_factory=list)
    item_ids: list[str] = field(default_factory=list)  # "<dataset>:<item id>", aligned with triples
    rows: int = 0  # triple rows of the split read (every language variant counted once per item)
    skipped: Counter[str] = field(default_factory=Counter)
    per_dataset: dict[str, dict[str, Any]] = field(default_factory=dict)
    graph_langs: Counter[str] = field(default_factory=Counter)  # languages with a graph of their own (not pivoted)
    langs: list[str] = field(default_factory=list)  # the languages the triples were built for


def load_triples(wh: Warehouse, datasets: Sequence[str], split: str | None, parser: str, variant: str = "paper",
                 langs: Sequence[str] | None = None, require_graphs: bool = True,
                 versions: dict[str, int | None] | None = None) -> TripleData:
    """Triples of `split` (None: all) from each dataset's `triples` table with graphs from its `amr` table.

    Per item: the English row's texts and graphs; other languages from triple rows of the same item (ingested
    translations) and from the `parallel` table (translations of each English sentence). A non-English sentence
    counts only with a graph of its own (a graph parsed through its English side is the English graph again).
    A role is usable with a graph in one of `langs` (default: English and every language with a graph of its own),
    or, when not `require_graphs`, with English text; a triple with an unusable role is skipped, counted by
    reason."""
    versions = versions or {}
    out = TripleData()
    raw: list[tuple[str, str, dict[str, dict[str, dict[str, str | None]]], dict[str, str]]] = []
    for ds in datasets:
        tv = versions.get(f"{ds}.triples")
        if tv is None and not wh.exists(ds, "triples"):
            raise ValueError(f"dataset '{ds}' has no triples table: is it a `kind: triples` dataset of the pipeline, "
                             f"ingested?")
        table = wh.read(ds, "triples", version=tv)
        if split:
            table = table.filter(pl.col("split") == split)
        ok = table.filter(pl.col("status") == OK).sort("item_id", pl.col("lang") != ENGLISH, "lang")
        items = table.select("item_id").unique().height
        failed_items = items - ok.select("item_id").unique().height  # items without any ok row
        if failed_items:
            out.skipped["triple row failed at ingest"] += failed_items
        keys = [k for r in ROLES for k in ok[f"{r}_key"].to_list()]
        trans = translations_of(wh, ds, versions.get(f"{ds}.parallel"))
        keys += [t for k in set(keys) for _, t, _ in trans.get(k, [])]
        graphs = sentence_graphs(wh, ds, parser, variant, keys, versions.get(f"{ds}.amr"))
        by_item: dict[str, dict[str, dict[str, dict[str, str | None]]]] = {}
        why_missing: dict[str, dict[str, str]] = {}
        for row in ok.iter_rows(named=True):
            example = by_item.setdefault(row["item_id"], {r: {} for r in ROLES})
            reasons = why_missing.setdefault(row["item_id"], {})
            lang = row["lang"]
            for role in ROLES:
                key = row[f"{role}_key"]
                variants = [(lang, key, row[role])]
                if lang == ENGLISH:
                    variants += trans.get(key, [])
                for v_lang, v_key, v_text in variants:
                    if v_lang in example[role]:
                        continue
                    graph, pivot = graphs.ok.get(v_key, (None, None))
                    if v_lang != ENGLISH and pivot is not None:
                        graph = None  # the English graph again
                    if graph is None:
                        if v_key in graphs.failed:
                            reasons.setdefault(f"{role}:{v_lang}", "graph failed to parse")
                        elif v_lang == ENGLISH or pivot is None:
                            reasons.setdefault(f"{role}:{v_lang}", "no graph (dataset not parsed?)")
                    else:
                        out.graph_langs[v_lang] += v_lang != ENGLISH
                    example[role][v_lang] = {"text": v_text, "graph": graph}
        for item_id, example in sorted(by_item.items()):
            raw.append((ds, item_id, example, why_missing.get(item_id, {})))
        out.per_dataset[ds] = {"items": items, "used": 0, "skipped": Counter()}
        if failed_items:
            out.per_dataset[ds]["skipped"]["triple row failed at ingest"] = failed_items
        out.rows += items

    use = list(langs) if langs else [ENGLISH, *sorted(lg for lg, n in out.graph_langs.items() if n)]
    for ds, item_id, example, missing in raw:
        reason = None
        for role in ROLES:
            entries = {lg: e for lg, e in example[role].items() if lg in use}
            has_graph = any(e.get("graph") for e in entries.values())
            has_text = bool((entries.get(ENGLISH) or {}).get("text"))
            if not has_graph and (require_graphs or not has_text):
                reason = next((why for k, why in missing.items() if k.startswith(f"{role}:")),
                              f"no graph in {use}")
                break
        if reason is not None:
            out.skipped[reason] += 1
            out.per_dataset[ds]["skipped"][reason] += 1
            continue
        out.triples.append({r: {lg: dict(e) for lg, e in example[r].items() if lg in use} for r in ROLES})
        out.item_ids.append(f"{ds}:{item_id}")
        out.per_dataset[ds]["used"] += 1
    out.per_dataset = {ds: {k: dict(v) if isinstance(v, Counter) else v for k, v in d.items()}
                       for ds, d in out.per_dataset.items()}
    out.langs = use
    return out
