"""The analyst view `pair_metrics`: one row per scored pair of every dataset (and metrics configuration), with its
dataset, split, languages, gold score and every aspect's columns, so "mean Smatch per split and language" is one
GROUP BY. `amr_metrics` alone holds one row per distinct graph pair (repeated graphs share a row, whose pair columns
are one pair's) and no languages, so averaging it counts graph pairs, not pairs; the view joins each pair to its
graphs and to the metrics row of those graphs (warehouse/README.md, "The analyst view")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from amrsim.columns import declared_columns
from amrsim.warehouse.scan import SQL_TYPES

VIEW = "pair_metrics"
TABLES = ("pairs", "amr", "amr_metrics")  # what a dataset needs to appear in the view
PROVIDED = "provided"  # amr.parser of the graphs an input file gives (amrsim.amr.backends.PROVIDED, a layer above)

# the view's columns before and after the aspects' (which come from the aspect registry, in its order)
PAIR_COLUMNS = ("dataset", "pair_key", "item_id", "split", "lang1", "lang2", "sentence1_key", "sentence2_key",
                "sentence1", "sentence2", "score", "parser", "options")
ROW_COLUMNS = ("bounded", "status", "error", "metrics_key")

# a pair's graphs: provided ones are the pair's own (pairs.amr1_key/amr2_key), a parser's are its sentences' (the
# first graph by key where a sentence has several), as the metrics stage reads them (amrsim/stages/metrics.py);
# `graphs_md5` is how the stage fingerprints the two texts
_GRAPHS = """
SELECT p.key AS pair_key, a1.parser, md5(a1.penman || chr(31) || a2.penman) AS graphs_md5
FROM {pairs} p JOIN {amr} a1 ON a1.key = p.amr1_key JOIN {amr} a2 ON a2.key = p.amr2_key
WHERE p.status = 'ok' AND a1.status = 'ok' AND a2.status = 'ok'
  AND a1.parser = '{provided}' AND a2.parser = '{provided}'
UNION ALL
SELECT p.key, s1.parser, md5(s1.penman || chr(31) || s2.penman)
FROM {pairs} p JOIN parsed s1 ON s1.sentence_key = p.sentence1_key
JOIN parsed s2 ON s2.sentence_key = p.sentence2_key AND s2.parser = s1.parser
WHERE p.status = 'ok'"""
_PARSED = """SELECT sentence_key, parser, arg_min(penman, key) AS penman FROM {amr}
WHERE status = 'ok' AND parser <> '{provided}' GROUP BY sentence_key, parser"""
# a metrics row matches the pairs that have its graphs under its options' parser. Rows written before graphs_md5
# existed match their recorded pair only, where no row of the same options matches it by its graphs.
_DATASET = """
(WITH parsed AS ({parsed}), g AS ({graphs}),
m AS (SELECT {metrics}, coalesce(json_extract_string(options, '$.extra.parser'), '{provided}') AS parser
      FROM {amr_metrics}),
hit AS (SELECT g.pair_key, m.* EXCLUDE (pair_key) FROM g JOIN m ON m.graphs_md5 = g.graphs_md5 AND m.parser = g.parser)
SELECT '{dataset}' AS dataset, p.key AS pair_key, p.item_id, p.split, p.lang1, p.lang2, p.sentence1_key,
       p.sentence2_key, p.sentence1, p.sentence2, p.score, h.parser, h.options, {aspects}, h.bounded, h.status,
       h.error, h.key AS metrics_key
FROM (SELECT * FROM hit
      UNION ALL BY NAME
      SELECT * FROM m
      WHERE m.graphs_md5 IS NULL AND NOT EXISTS (SELECT 1 FROM hit WHERE hit.pair_key = m.pair_key
                                                  AND hit.options = m.options)) h
JOIN {pairs} p ON p.key = h.pair_key AND p.status = 'ok')"""


def _column(have: Sequence[str], name: str, sql_type: str = "VARCHAR") -> str:
    """`name` where the table has it, else a typed null of that name (a column added after the table was written)."""
    return f'"{name}"' if name in have else f'NULL::{sql_type} AS "{name}"'


def _sql_type(field: pa.Field) -> str:
    return SQL_TYPES.get(str(field.type), "VARCHAR")


def pair_metrics_sql(columns: Mapping[str, Mapping[str, Sequence[str]]], aspects: Sequence[pa.Field]) -> str:
    """The view's SELECT over the views `"<dataset>"."<table>"`: `columns[dataset][table]` are the columns each
    table has (a dataset lacking one of TABLES is left out). With no dataset, an empty SELECT of the same columns."""
    names = [f'"{f.name}"' for f in aspects]
    parts = []
    for dataset in sorted(columns):
        tables = columns[dataset]
        if not all(t in tables for t in TABLES):
            continue
        ref = {t: f'"{dataset}"."{t}"' for t in TABLES}
        missing = [f"NULL::VARCHAR AS {c}" for c in ("amr1_key", "amr2_key") if c not in tables["pairs"]]
        pairs = f"(SELECT *, {', '.join(missing)} FROM {ref['pairs']})" if missing else ref["pairs"]
        have = tables["amr_metrics"]
        metrics = ", ".join([*(_column(have, c) for c in ("key", "pair_key", "options", "status", "error",
                                                          "graphs_md5", "bounded")),
                             *(_column(have, f.name, _sql_type(f)) for f in aspects)])
        parts.append(_DATASET.format(
            dataset=dataset, provided=PROVIDED, pairs=pairs, amr=ref["amr"], amr_metrics=ref["amr_metrics"],
            parsed=_PARSED.format(amr=ref["amr"], provided=PROVIDED),
            graphs=_GRAPHS.format(pairs=pairs, amr=ref["amr"], provided=PROVIDED),
            metrics=metrics, aspects=", ".join(f"h.{n}" for n in names)))
    if parts:
        return "\nUNION ALL BY NAME\n".join(f"SELECT * FROM {p}" for p in parts)
    typed = {"score": "DOUBLE"} | {f.name: _sql_type(f) for f in aspects}
    empty = [f'NULL::{typed.get(c, "VARCHAR")} AS "{c}"' for c in view_columns(aspects)]
    return f"SELECT {', '.join(empty)} WHERE false"


def view_columns(aspects: Sequence[pa.Field] | None = None) -> list[str]:
    """The view's columns, in order: the pair's, every aspect's (default: the registry's), the metrics row's."""
    fields = declared_columns("amr_metrics") if aspects is None else aspects
    return [*PAIR_COLUMNS, *(f.name for f in fields), *ROW_COLUMNS]
