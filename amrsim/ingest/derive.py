"""Triples derived from an NLI-labelled pairs file (`from_pairs:`, e.g. SICK's entailment_judgment).

Each entailment pair (A, B) gives one triple (A, B, C). C, the hard negative, is in order of preference:

1. ``C`` a sentence the file labels *contradiction* with A, in either direction (SICK's contradiction label is
   symmetric in practice);
2. ``I`` (with `infer`) a sentence labelled contradiction with B: A entails B and B contradicts C, so A and C cannot
   both hold;
3. ``R`` (`fallback: random`) a sentence of another pair, drawn with a seed, never A, B or a sentence the file says A
   entails; it is a plain negative, not a hard one. With `fallback: skip` the row fails instead (kept, with reason).

Among several candidates of the same kind one is drawn with ``random.Random(f"{seed}:{id}")``: the choice depends on
the row and the file's contents, not on the row order. The item id is ``<A-B pair id>/<kind><pair id C came from>``
(``1234/C567``), so every triple names both input rows; `source_line` is the entailment pair's line. Rows with a label
outside the configured groups become failed rows with the reason; neutral and contradiction rows only feed step 1-3.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from amrsim.config import DatasetConfig, PairsToTriplesConfig
from amrsim.ingest.normalise import DERIVED_ERROR as ERROR
from amrsim.ingest.readers import LINE
from amrsim.text import blank, empty_reason

ID = "__id"


def source_columns(ds: DatasetConfig) -> list[str]:
    """File columns a `from_pairs` dataset reads: id/split/lang where mapped, the two sentences and the label."""
    fp = ds.from_pairs
    assert fp is not None
    cols = [ds.columns.get(r) for r in ("id", "split", "lang")] + [fp.sentence1, fp.sentence2, fp.label]
    return list(dict.fromkeys(c for c in cols if c))


def text_columns(ds: DatasetConfig) -> list[str]:
    """The two sentence columns: a typed cell there must be a string (the label may be a number, as in MNLI)."""
    fp = ds.from_pairs
    assert fp is not None
    return [fp.sentence1, fp.sentence2]


def normalise_config(ds: DatasetConfig) -> DatasetConfig:
    """The triples config the derived frame is normalised with: roles in their own columns, the id in `__id`."""
    return ds.model_copy(update={"columns": {**ds.columns, "id": ID}, "from_pairs": None})


@dataclass(frozen=True)
class TranslatedPairs:
    """A pairs file row-aligned with a `from_pairs` dataset's own: its two sentence columns as lists, the reader's
    per-row errors and the file's name (for the errors)."""

    sentence1: list[str | None]
    sentence2: list[str | None]
    errors: list[str | None]
    name: str


def translation_columns(lang: str) -> dict[str, str]:
    """The derived frame's column of each role in `lang` (what the dataset's `translations` then map)."""
    return {role: f"__{lang}__{role}" for role in ("premise", "entailment", "contradiction")}


def _translated_cells(translated: Mapping[str, TranslatedPairs], row: int, c_row: int,
                      c_side: int) -> tuple[dict[str, str | None], str | None]:
    """Each language's premise, entailment (row `row`) and contradiction (row `c_row`, sentence `c_side`), and the
    reasons a used row of a translation file is bad (None when none is)."""
    cells: dict[str, str | None] = {}
    reasons: list[str] = []
    for lang, t in translated.items():
        cols = translation_columns(lang)
        cells[cols["premise"]], cells[cols["entailment"]] = t.sentence1[row], t.sentence2[row]
        cells[cols["contradiction"]] = (t.sentence1 if c_side == 1 else t.sentence2)[c_row]
        reasons += [f"{t.name}: {t.errors[r]}" for r in dict.fromkeys((row, c_row)) if t.errors[r]]
    return cells, "; ".join(reasons) or None


def _group(fp: PairsToTriplesConfig) -> dict[str, str]:
    groups = {"entailment": fp.entailment, "contradiction": fp.contradiction, "neutral": fp.neutral}
    return {v.strip().lower(): g for g, values in groups.items() for v in values}


def triples_from_pairs(ds: DatasetConfig, frame: pl.DataFrame,
                       translations: Mapping[str, TranslatedPairs] | None = None) -> pl.DataFrame:
    """The read pairs (columns of `source_columns` + `__line`) -> one row per entailment pair with premise,
    entailment, contradiction, `__id`, `__error`, `__line` and the id/split/lang columns of the pair.

    `translations` (language -> its row-aligned pairs file, read): the triple is chosen on the main file and each
    language's triple is taken from the same rows and columns (premise and entailment from the pair's row, the
    contradiction from the row and column it was found in), as `translation_columns(lang)`; a bad cell in a row
    used fails the triple, naming the file."""
    fp = ds.from_pairs
    assert fp is not None
    groups = _group(fp)
    id_col = ds.columns.get("id")
    rows = frame.to_dicts()

    def pair_id(rec: dict[str, Any]) -> str:
        return ((rec.get(id_col) or "") if id_col else "").strip() or f"L{rec[LINE]}"

    # where a sentence was found: (pair id, row index, 1 or 2 for sentence1/sentence2)
    contra: dict[str, dict[str, tuple[str, int, int]]] = defaultdict(dict)  # sentence -> {contradicting: where}
    entails: dict[str, set[str]] = defaultdict(set)
    pool: dict[str, tuple[str, int, int]] = {}  # every sentence -> the first pair it occurs in (file order)
    for row, rec in enumerate(rows):
        a, b = (rec.get(fp.sentence1) or "").strip(), (rec.get(fp.sentence2) or "").strip()
        group = groups.get((rec.get(fp.label) or "").strip().lower())
        if blank(a) or blank(b) or group is None or rec.get(ERROR):  # a blank sentence is never a negative
            continue
        pid = pair_id(rec)
        pool.setdefault(a, (pid, row, 1))
        pool.setdefault(b, (pid, row, 2))
        if group == "contradiction":
            contra[a].setdefault(b, (pid, row, 2))
            contra[b].setdefault(a, (pid, row, 1))
        elif group == "entailment":
            entails[a].add(b)
    pool_list = list(pool)

    allowed = ", ".join(f"{g} {sorted(set(v))}" for g, v in (("entailment", fp.entailment),
                                                              ("contradiction", fp.contradiction),
                                                              ("neutral", fp.neutral)))
    keep = [c for c in (id_col, ds.columns.get("split"), ds.columns.get("lang")) if c]
    out: list[dict[str, Any]] = []
    translated = dict(translations or {})
    empty = {c: None for lang in translated for c in translation_columns(lang).values()}
    for row, rec in enumerate(rows):
        raw_label = (rec.get(fp.label) or "").strip()
        group = groups.get(raw_label.lower())
        a, b = (rec.get(fp.sentence1) or "").strip(), (rec.get(fp.sentence2) or "").strip()
        pid = pair_id(rec)
        base = {c: rec.get(c) for c in keep} | {LINE: rec[LINE], "premise": a, "entailment": b} | empty
        if rec.get(ERROR):  # a cell the reader could not use (a list where a sentence belongs)
            out.append(base | {"contradiction": None, ID: pid, ERROR: rec[ERROR]})
            continue
        if group is None:
            why = f"label '{raw_label[:40]}' is not one of {allowed}" if raw_label else "empty label"
            out.append(base | {"contradiction": None, ID: pid, ERROR: why})
            continue
        if group != "entailment":
            continue
        if blank(a) or blank(b):
            why = "; ".join(r for role, col, text in (("premise", fp.sentence1, a), ("entailment", fp.sentence2, b))
                            if (r := empty_reason(text, role, col)))
            out.append(base | {"contradiction": None, ID: pid, ERROR: why})
            continue
        rng = random.Random(f"{fp.seed}:{pid}")
        chosen: tuple[str, str, tuple[str, int, int]] | None = None
        kinds = [("C", contra.get(a, {}))] + ([("I", contra.get(b, {}))] if fp.infer else [])
        for kind, found in kinds:
            candidates = sorted((c, i) for c, i in found.items() if c not in (a, b))
            if candidates:
                c, where = rng.choice(candidates)
                chosen = (kind, c, where)
                break
        if chosen is None and fp.fallback == "random":
            banned = {a, b} | entails.get(a, set())
            if len(pool_list) > len(banned):
                while chosen is None:
                    c = pool_list[rng.randrange(len(pool_list))]
                    if c not in banned:
                        chosen = ("R", c, pool[c])
        if chosen is None:
            why = (f"no contradiction for the premise in the file (from_pairs.fallback: {fp.fallback})"
                   if fp.fallback == "skip" else "no other sentence to draw a negative from")
            out.append(base | {"contradiction": None, ID: pid, ERROR: why})
            continue
        kind, c, (c_pid, c_row, c_side) = chosen
        cells, why = _translated_cells(translated, row, c_row, c_side)
        out.append(base | cells | {"contradiction": c, ID: f"{pid}/{kind}{c_pid}", ERROR: why})
    schema = {c: pl.String for c in keep} | {LINE: pl.Int64, "premise": pl.String, "entailment": pl.String,
                                             "contradiction": pl.String, ID: pl.String, ERROR: pl.String}
    schema |= {c: pl.String for c in empty}
    return pl.DataFrame(out, schema=schema)
