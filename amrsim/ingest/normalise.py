"""Normalise rows read from a file into the canonical tables; bad rows become failed rows with a reason."""

from __future__ import annotations

import logging
import math
from typing import Any

import polars as pl

from amrsim.amr.backends import PROVIDED
from amrsim.config import KIND_COLUMNS, TEXT_ROLES, DatasetConfig
from amrsim.ingest.readers import ERROR, LINE
from amrsim.langs import lang_code, no_language, normalise_lang  # noqa: F401 (normalise_lang: cli.evaluate imports it)
from amrsim.text import blank, empty_reason
from amrsim.warehouse import FAILED, OK
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.schemas import SCHEMAS

log = logging.getLogger(__name__)

DERIVED_ERROR = ERROR  # why a row's cells cannot be used (reader: a non-string cell; derive: no negative): it fails


def source_columns(ds: DatasetConfig) -> list[str]:
    """The file columns a dataset reads: mapped roles plus every translation column, deduplicated in order."""
    required, optional = KIND_COLUMNS[ds.kind]
    cols = [ds.column(r) for r in (*required, *optional)]
    cols += [c for mapping in ds.translations.values() for c in mapping.values()]
    return list(dict.fromkeys(c for c in cols if c))


def text_columns(ds: DatasetConfig) -> list[str]:
    """The file columns that hold text (sentences, graphs, translations): a typed cell there must be a string."""
    cols = [ds.column(r) for r in (*TEXT_ROLES[ds.kind], "amr1", "amr2")]
    cols += [c for mapping in ds.translations.values() for r, c in mapping.items() if r not in ("path", "format")]
    return list(dict.fromkeys(c for c in cols if c))


def _unknown_lang(raw: str | None) -> str:
    """A failed row's reason for a language cell `lang_code` cannot use: what a tag such as 'und' means, or that
    the value is no language code."""
    return no_language(raw) or f"unknown language code '{raw}'"


def _parse_score(raw: str | None, score_range: tuple[float, float] | None) -> tuple[float | None, str | None]:
    if raw is None or not raw.strip():
        return None, "missing score"
    try:
        value = float(raw)
    except ValueError:
        return None, f"non-numeric score '{raw[:40]}'"
    if not math.isfinite(value):
        return None, f"non-numeric score '{raw[:40]}'"
    if score_range and not (score_range[0] <= value <= score_range[1]):
        return None, f"score {value} outside {list(score_range)}"
    return value, None


class _Tables:
    """Accumulates rows per canonical table, deduplicating ok rows by key."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in ("sentences", "pairs", "triples",
                                                                          "parallel", "amr")}

    def add(self, table: str, row: dict[str, Any]) -> None:
        self.rows[table].setdefault(row["key"], row)

    def sentence(self, lang: str, text: str) -> str:
        key = content_key("sentence", lang, text)
        self.add("sentences", {"key": key, "lang": lang, "text": text, "status": OK, "error": None})
        return key

    def frames(self) -> dict[str, pl.DataFrame]:
        out = {}
        for table, rows in self.rows.items():
            schema = SCHEMAS[table]
            frame = pl.DataFrame(list(rows.values()), schema=pl.Schema(pl.from_arrow(schema.empty_table()).schema))
            out[table] = frame
        return out


def normalise(ds: DatasetConfig, frame: pl.DataFrame, source_file: str) -> dict[str, pl.DataFrame]:
    """Canonical tables for one dataset: its own kind's table (ok and failed rows), sentences and parallel."""
    return Normaliser(ds, source_file).chunk(frame)


class Normaliser:
    """Normalises a file chunk by chunk. Within a chunk rows are deduplicated by key; across chunks the caller
    deduplicates (ingest does it in DuckDB). A repeated id is found by remembering every id's first line, or, for
    files too large for that, from `repeated_ids` (line -> first line of its id) found by a pass before."""

    def __init__(self, ds: DatasetConfig, source_file: str, repeated_ids: dict[int, int] | None = None) -> None:
        self.ds = ds
        self.source_file = source_file
        self.repeated_ids = repeated_ids
        self.first_line_of_id: dict[str, int] = {}
        self.lang_notes: dict[str, str] = {}  # a language cell read differently ('de-DE' as 'de') -> its first note

    def _lang(self, raw: str | None, line: int) -> str | None:
        """A row's language as tables key it; the first row of each region-tagged spelling is noted, once."""
        code, note = lang_code(raw)
        if note and raw not in self.lang_notes:
            self.lang_notes[raw] = f"{self.source_file}:{line}: {note}"  # type: ignore[index]
            log.warning("%s", self.lang_notes[raw])  # type: ignore[index]
        return code

    def chunk(self, frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
        ds, source_file = self.ds, self.source_file
        roles = TEXT_ROLES[ds.kind]
        col = {r: ds.column(r) for r in ("id", "split", "score", "lang", "lang1", "lang2", "target_lang", "amr1",
                                         "amr2", *roles)}
        tables = _Tables()
        first_line_of_id = self.first_line_of_id
        first_line_of_key: dict[str, int] = {}

        for rec in frame.iter_rows(named=True):
            line = rec[LINE]
            reasons: list[str] = []

            def get(role: str, rec: dict[str, Any] = rec) -> str | None:
                return rec.get(col[role]) if col.get(role) else None

            split = (get("split") or ds.split or "all").strip()

            # languages: one for the row (`lang`), or per side (`lang1`/`lang2`, `target_lang` for parallel)
            row_lang_raw = get("lang") or ds.lang
            langs: dict[str, str | None] = {}
            for role in roles:
                raw = row_lang_raw
                if ds.kind == "pairs" and role in ("sentence1", "sentence2"):
                    side_default = ds.lang2 if role == "sentence2" and ds.lang2 and not get("lang") else None
                    raw = get("lang1" if role == "sentence1" else "lang2") or side_default or row_lang_raw
                if ds.kind == "parallel" and role == "target":
                    raw = get("target_lang") or ds.target_lang
                lang = self._lang(raw, line)
                if lang is None:
                    reasons.append(_unknown_lang(raw))
                langs[role] = lang

            # a reason found while reading (a cell that is a list, not text) or deriving the row (from_pairs)
            derived_error = rec.get(DERIVED_ERROR)
            score = None
            if ds.kind == "pairs":
                score, why = _parse_score(get("score"), ds.score_range)
                if why and not (derived_error and get("score") is None):  # a typed cell's reason says it better
                    reasons.append(why)

            base_texts = {r: (get(r) or "").strip() for r in roles}
            if derived_error:
                reasons.append(derived_error)
            for r, t in base_texts.items():
                if not derived_error and (why := empty_reason(t, r)):  # '\u200b' is as empty as ''
                    reasons.append(why)
            # without an id column the line is the id: benchmark files legitimately repeat a pair (STSb test does)
            item_id = (get("id") or "").strip() or f"L{line}"
            if self.repeated_ids is not None:  # found by a pass over the whole file
                if get("id") and line in self.repeated_ids:
                    reasons.append(f"duplicate id '{item_id}' (first at line {self.repeated_ids[line]})")
            elif get("id") and item_id in first_line_of_id:
                reasons.append(f"duplicate id '{item_id}' (first at line {first_line_of_id[item_id]})")
            else:
                first_line_of_id.setdefault(item_id, line)

            graph_texts = {role: (get(graph_role) or "").strip() for role, graph_role in GRAPH_ROLES.items()
                           if col.get(graph_role) and role in roles}

            # variants: the base language plus each provided translation of every text column
            variants = [(None, langs, base_texts)]
            for tl, mapping in ds.translations.items():
                t_lang = lang_code(tl).code
                t_texts = {r: (rec.get(mapping[r]) or "").strip() if r in mapping else None for r in roles}
                variants.append((tl, {r: t_lang for r in roles}, t_texts))

            for variant, v_langs, texts in variants:
                v_reasons = list(reasons)
                if variant is not None:
                    if lang_code(variant).code is None:
                        v_reasons.append(_unknown_lang(variant))
                    v_reasons += [why for r, t in texts.items()
                                  if t is not None and (why := empty_reason(t, r, variant))]
                    if any(t is None for t in texts.values()):
                        continue  # a kind whose translation maps only some roles yields parallel rows only
                # graphs given in the row belong to its base variant; they are part of its content (a changed
                # graph is a changed row), so they join the key only where the file gives graphs
                graphs = graph_texts if variant is None else {}
                key = _row_key(ds.kind, item_id, split, v_langs, texts, score, graphs)
                if not v_reasons and key in first_line_of_key:
                    v_reasons.append(f"duplicate row (same content as line {first_line_of_key[key]})")
                if v_reasons:
                    key = content_key("failed", source_file, line, variant, texts)
                else:
                    first_line_of_key[key] = line
                # a reason once, though both sentences of a row may give it (a row's unknown language)
                status, error = (FAILED, "; ".join(dict.fromkeys(v_reasons))) if v_reasons else (OK, None)
                sent_keys = {r: tables.sentence(v_langs[r], t) if status == OK else None for r, t in texts.items()}
                graph_keys = {role: _add_provided_graph(tables, sent_keys[role], v_langs[role], text)
                              for role, text in graphs.items()} if status == OK else {}
                tables.add(_KIND_TABLE[ds.kind], _row(ds.kind, key, item_id, split, v_langs, texts, sent_keys, score,
                                                       status, error, source_file, line, graph_keys))

            if not reasons:  # parallel rows: base text -> each translation, per text column
                for tl, mapping in ds.translations.items():
                    t_lang = lang_code(tl).code
                    for r, c in mapping.items():
                        target = (rec.get(c) or "").strip()
                        if blank(target) or t_lang is None:
                            continue
                        _add_parallel(tables, f"{item_id}:{r}", split, langs[r], base_texts[r], t_lang, target,
                                      source_file, line)
        return {t: f for t, f in tables.frames().items() if f.height or t in ("sentences", _KIND_TABLE[ds.kind])}


def provided_graph_key(sentence_key: str | None, penman: str) -> str:
    """Key of a graph the input gives a sentence: of the sentence and the graph's text, so a sentence given different
    graphs in different rows keeps each (one row per distinct text), and a row's graph is found by its key."""
    return content_key("amr", sentence_key, PROVIDED, penman)


def _add_provided_graph(tables: _Tables, sentence_key: str | None, lang: str | None, text: str) -> str:
    """A graph given in the input (parser 'provided'), its key returned; it is validated when a metric reads it."""
    key = provided_graph_key(sentence_key, text)
    tables.add("amr", {"key": key, "sentence_key": sentence_key,
                       "lang": lang, "penman": text, "parser": PROVIDED, "pivot_lang": None, "parsed_text": None,
                       "linearized": None, "status": OK if text else FAILED,
                       "error": None if text else "empty graph", "seconds": None})
    return key


GRAPH_ROLES = {"sentence1": "amr1", "sentence2": "amr2"}  # the text role each graph column belongs to
_KIND_TABLE = {"pairs": "pairs", "triples": "triples", "parallel": "parallel", "sentences": "sentences"}


def _row_key(kind: str, item_id: str, split: str, langs: dict[str, str | None], texts: dict[str, Any],
             score: float | None, graphs: dict[str, str]) -> str:
    extra = (sorted(graphs.items()),) if graphs else ()  # rows without graphs keep the keys they always had
    return content_key(kind, item_id, split, sorted(langs.items()), sorted(texts.items()), score, *extra)


def _add_parallel(tables: _Tables, item_id: str, split: str, src_lang: str | None, src: str, tgt_lang: str,
                  tgt: str, source_file: str, line: int) -> None:
    assert src_lang is not None
    tables.add("parallel", {
        "key": content_key("parallel", src_lang, src, tgt_lang, tgt), "item_id": item_id, "split": split,
        "source_lang": src_lang, "target_lang": tgt_lang, "source_key": tables.sentence(src_lang, src),
        "target_key": tables.sentence(tgt_lang, tgt), "source": src, "target": tgt, "status": OK, "error": None,
        "source_file": source_file, "source_line": line,
    })


def _row(kind: str, key: str, item_id: str, split: str, langs: dict[str, str | None], texts: dict[str, Any],
         sent_keys: dict[str, str | None], score: float | None, status: str, error: str | None,
         source_file: str, line: int, graph_keys: dict[str, str]) -> dict[str, Any]:
    common = {"key": key, "item_id": item_id, "split": split, "status": status, "error": error,
              "source_file": source_file, "source_line": line}
    if kind == "pairs":
        return common | {"lang1": langs["sentence1"], "lang2": langs["sentence2"],
                         "sentence1_key": sent_keys["sentence1"], "sentence2_key": sent_keys["sentence2"],
                         "sentence1": texts["sentence1"], "sentence2": texts["sentence2"], "score": score,
                         "amr1_key": graph_keys.get("sentence1"), "amr2_key": graph_keys.get("sentence2")}
    if kind == "triples":
        return common | {"lang": langs["premise"], **{f"{r}_key": sent_keys[r] for r in texts},
                         **{r: texts[r] for r in texts}}
    if kind == "parallel":
        return common | {"source_lang": langs["source"], "target_lang": langs["target"],
                         "source_key": sent_keys["source"], "target_key": sent_keys["target"],
                         "source": texts["source"], "target": texts["target"]}
    # sentences: failed rows keep their line in the key; ok rows are content-addressed
    return {"key": key if status != OK else sent_keys["text"], "lang": langs["text"], "text": texts["text"],
            "status": status, "error": error}
