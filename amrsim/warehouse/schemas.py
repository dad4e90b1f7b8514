"""Arrow schemas of the canonical tables: the contract analysts query (documented in warehouse/README.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pyarrow as pa

from amrsim.columns import declared_columns
from amrsim.errors import WarehouseError

_STATUS = [pa.field("status", pa.string()), pa.field("error", pa.string())]
_SOURCE = [pa.field("source_file", pa.string()), pa.field("source_line", pa.int64())]

# columns added to a schema after tables were written: rows may lack them (null), and a commit adds them to an
# older table
LATER_COLUMNS: dict[str, frozenset[str]] = {"amr": frozenset({"pivot_source"}),
                                             "pairs": frozenset({"amr1_key", "amr2_key"}),
                                             "lineage": frozenset({"settings"})}

_FIXED: dict[str, pa.Schema] = {
    "sentences": pa.schema([
        pa.field("key", pa.string()), pa.field("lang", pa.string()), pa.field("text", pa.string()), *_STATUS,
    ]),
    "pairs": pa.schema([
        pa.field("key", pa.string()), pa.field("item_id", pa.string()), pa.field("split", pa.string()),
        pa.field("lang1", pa.string()), pa.field("lang2", pa.string()),
        pa.field("sentence1_key", pa.string()), pa.field("sentence2_key", pa.string()),
        pa.field("sentence1", pa.string()), pa.field("sentence2", pa.string()),
        pa.field("score", pa.float64()), *_STATUS, *_SOURCE,
        # keys into `amr` of the graphs this row gave (parser provided); null where the input gives no graphs
        pa.field("amr1_key", pa.string()), pa.field("amr2_key", pa.string()),
    ]),
    "triples": pa.schema([
        pa.field("key", pa.string()), pa.field("item_id", pa.string()), pa.field("split", pa.string()),
        pa.field("lang", pa.string()),
        pa.field("premise_key", pa.string()), pa.field("entailment_key", pa.string()),
        pa.field("contradiction_key", pa.string()),
        pa.field("premise", pa.string()), pa.field("entailment", pa.string()), pa.field("contradiction", pa.string()),
        *_STATUS, *_SOURCE,
    ]),
    "parallel": pa.schema([
        pa.field("key", pa.string()), pa.field("item_id", pa.string()), pa.field("split", pa.string()),
        pa.field("source_lang", pa.string()), pa.field("target_lang", pa.string()),
        pa.field("source_key", pa.string()), pa.field("target_key", pa.string()),
        pa.field("source", pa.string()), pa.field("target", pa.string()), *_STATUS, *_SOURCE,
    ]),
    # Delta has no fixed-size list type: vectors are list<float32> plus `dim`; readers return (n, dim) float32.
    "embeddings": pa.schema([
        pa.field("key", pa.string()), pa.field("sentence_key", pa.string()), pa.field("encoder", pa.string()),
        pa.field("model_id", pa.string()), pa.field("dim", pa.int32()),
        pa.field("vector", pa.list_(pa.float32())), *_STATUS,
    ]),
    "amr": pa.schema([
        pa.field("key", pa.string()), pa.field("sentence_key", pa.string()), pa.field("lang", pa.string()),
        pa.field("penman", pa.string()), pa.field("parser", pa.string()),
        pa.field("pivot_lang", pa.string()), pa.field("parsed_text", pa.string()), pa.field("linearized", pa.string()),
        *_STATUS, pa.field("seconds", pa.float64()),
        pa.field("pivot_source", pa.string()),  # where a pivoted English text came from: given, or the MT model
    ]),
    "translations": pa.schema([
        pa.field("key", pa.string()), pa.field("source_key", pa.string()), pa.field("source_lang", pa.string()),
        pa.field("target_lang", pa.string()), pa.field("source", pa.string()), pa.field("text", pa.string()),
        pa.field("model", pa.string()), pa.field("flags", pa.string()), *_STATUS, pa.field("seconds", pa.float64()),
    ]),
    "augmented_pairs": pa.schema([
        pa.field("key", pa.string()), pa.field("sentence1_key", pa.string()), pa.field("sentence2_key", pa.string()),
        pa.field("rank", pa.int64()), pa.field("cosine", pa.float64()), pa.field("weak_label", pa.float64()),
        pa.field("scorer", pa.string()), pa.field("k", pa.int64()), pa.field("index_kind", pa.string()), *_STATUS,
    ]),
    "amr_metrics": pa.schema([
        pa.field("key", pa.string()), pa.field("pair_key", pa.string()), pa.field("item_id", pa.string()),
        pa.field("split", pa.string()), pa.field("sentence1_key", pa.string()), pa.field("sentence2_key", pa.string()),
        pa.field("score", pa.float64()),
        # here: every aspect's columns (DECLARED_AFTER), null where not computed, so one table holds any choice
        pa.field("options", pa.string()), *_STATUS, pa.field("seconds", pa.float64()),
        pa.field("graphs_md5", pa.string()),  # md5(amr1 \x1f amr2): lets a refresh skip done pairs without hashing
        pa.field("bounded", pa.string()),  # aspects whose per-pair work budget cut the search (comma-separated)
    ]),
    "results": pa.schema([
        pa.field("key", pa.string()), pa.field("run_id", pa.string()),
        pa.field("created_at", pa.timestamp("us", tz="UTC")), pa.field("task", pa.string()),
        # model names the run (`<method>:<run id>`); model_requested is the name asked for (`<method>:latest`)
        pa.field("model", pa.string()), pa.field("dataset", pa.string()), pa.field("split", pa.string()),
        pa.field("lang_pair", pa.string()), pa.field("metric", pa.string()), pa.field("value", pa.float64()),
        pa.field("n", pa.int64()), pa.field("config_hash", pa.string()), pa.field("model_requested", pa.string()),
    ]),
    # meta/sources: one row per dataset name, the source its tables came from (amrsim.warehouse.sources)
    "sources": pa.schema([
        pa.field("key", pa.string()), pa.field("origin", pa.string()), pa.field("file", pa.string()),
        pa.field("definition", pa.string()), pa.field("run_id", pa.string()),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
    ]),
    "lineage": pa.schema([
        pa.field("run_id", pa.string()), pa.field("pipeline", pa.string()), pa.field("stage", pa.string()),
        pa.field("dataset", pa.string()), pa.field("table", pa.string()),
        pa.field("input_versions", pa.string()), pa.field("output_version", pa.int64()),
        pa.field("config_hash", pa.string()), pa.field("code_version", pa.string()),
        pa.field("rows_in", pa.int64()), pa.field("rows_computed", pa.int64()), pa.field("rows_failed", pa.int64()),
        pa.field("rows_out", pa.int64()), pa.field("seconds", pa.float64()),
        pa.field("started_at", pa.timestamp("us", tz="UTC")), pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        pa.field("settings", pa.string()),  # JSON: what a stage chose at run time (GPU batch budgets); null: none
    ]),
}

# tables whose schema also holds the columns declared for them (amrsim.columns) by the package computing them, which
# sits above the warehouse: amr_metrics' aspect columns come from the metrics registry, after its `score` column
DECLARED_AFTER: dict[str, str] = {"amr_metrics": "score"}


class TableSchemas(Mapping[str, pa.Schema]):
    """The tables' schemas. A table in DECLARED_AFTER has its declared columns put in after the named column each
    time its schema is read, so a column declared after import (an aspect registered later) is in it."""

    def __init__(self, fixed: dict[str, pa.Schema], declared_after: dict[str, str]):
        self._fixed, self._after = fixed, declared_after

    def __getitem__(self, table: str) -> pa.Schema:
        schema = self._fixed[table]
        after = self._after.get(table)
        if after is None:
            return schema
        declared = declared_columns(table)
        clash = [f.name for f in declared if f.name in schema.names]
        if clash:
            raise WarehouseError(f"table '{table}': declared column(s) {', '.join(clash)} are its own columns")
        at = schema.get_field_index(after) + 1
        return pa.schema([*schema][:at] + declared + [*schema][at:], metadata=schema.metadata)

    def __iter__(self) -> Iterator[str]:
        return iter(self._fixed)

    def __len__(self) -> int:
        return len(self._fixed)


SCHEMAS: Mapping[str, pa.Schema] = TableSchemas(_FIXED, DECLARED_AFTER)
