"""DuckDB over the warehouse: every Delta table becomes a view `<dataset>.<table>` (offline: no delta extension)."""

from __future__ import annotations

import re

import duckdb
import polars as pl
import pyarrow as pa
from deltalake import DeltaTable

from amrsim.columns import declared_columns
from amrsim.warehouse.analyst import VIEW as PAIR_METRICS
from amrsim.warehouse.analyst import pair_metrics_sql, view_columns
from amrsim.warehouse.scan import SQL_TYPES, register_snapshot
from amrsim.warehouse.schemas import SCHEMAS
from amrsim.warehouse.store import BrokenTable, Warehouse


def connect(wh: Warehouse, allow_external: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one schema per dataset and one view per table, plus the analyst view
    `pair_metrics` over every dataset (amrsim/warehouse/analyst.py). A damaged table's view fails any query that
    reads it with the table's error; queries on the other tables work.

    Sandboxed unless `allow_external`: once the views exist, file system access is turned off and the
    configuration locked, so SQL cannot write files (a table's own `_delta_log` included), read other files,
    attach databases, load extensions or turn the sandbox off. The views still read: their data comes through
    registered Arrow datasets, which DuckDB does not open as files. Python variables are never scanned by name."""
    con = duckdb.connect(config={"python_enable_replacements": False})
    columns: dict[str, dict[str, list[str]]] = {}  # dataset -> table -> its columns, for the analyst view
    for dataset, table in wh.tables():
        con.execute(f'CREATE SCHEMA IF NOT EXISTS "{dataset}"')
        try:
            snapshot = wh.snapshot(dataset, table)
        except BrokenTable as e:
            con.execute(f'CREATE OR REPLACE VIEW "{dataset}"."{table}" AS {_failing_select(table, str(e))}')
            columns.setdefault(dataset, {})[table] = list(SCHEMAS.get(table, pa.schema([])).names)
            continue
        if snapshot is None:
            continue
        alias = f"__{dataset}__{table}"
        data = _dataset(snapshot)
        con.register(alias, data)
        con.execute(f'CREATE OR REPLACE VIEW "{dataset}"."{table}" AS SELECT * FROM "{alias}"')
        columns.setdefault(dataset, {})[table] = data.schema.names
    aspects = declared_columns("amr_metrics")
    analyst = (pair_metrics_sql(columns, aspects) if aspects else _failing_select(
        PAIR_METRICS, f"{PAIR_METRICS}: the aspects' declarations are not loaded in this process (import "
                      f"amrsim.metrics first); amrsim query loads them", view_columns([])))
    con.execute(f'CREATE OR REPLACE VIEW "{PAIR_METRICS}" AS {analyst}')
    if not allow_external:
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con


def _dataset(snapshot: DeltaTable):
    """The snapshot as an Arrow dataset whose text columns are `string_view`. A merge (a table rewritten after an
    input edit) writes files whose stored Arrow schema says `string_view` next to older `string` files; a filter
    DuckDB pushes into the dataset is then compared with each file's own type, and Arrow has no kernel for
    `string` against `string_view`. Declared as `string_view`, every file's text reads as that one type."""
    schema = snapshot.to_pyarrow_dataset().schema
    views = pa.schema([f.with_type(pa.string_view()) if f.type in (pa.string(), pa.large_string()) else f
                       for f in schema], metadata=schema.metadata)
    return snapshot.to_pyarrow_dataset(schema=views)


def _failing_select(table: str, message: str, names: list[str] | None = None) -> str:
    """A SELECT with the table's columns (or `names`, typed as text) whose every read raises `message` (the filter
    needs the failing value, so no projection can skip it)."""
    typed = ([(f.name, SQL_TYPES.get(str(f.type), "VARCHAR")) for f in SCHEMAS.get(table, [])] if names is None
             else [(n, "VARCHAR") for n in names])
    columns = "".join(f', NULL::{t} AS "{n}"' for n, t in typed)
    quoted = message.replace("'", "''")
    return f"SELECT * EXCLUDE (__broken) FROM (SELECT error('{quoted}') AS __broken{columns}) WHERE __broken IS NULL"


def query(wh: Warehouse, sql: str, limit: int | None = None, allow_external: bool = False) -> pl.DataFrame:
    """Run SQL against the warehouse views (sandboxed, see `connect`); returns a polars frame of at most `limit`
    rows. The limit is part of the query DuckDB runs, so it stops reading once it has them."""
    relation = connect(wh, allow_external).sql(sql)
    if relation is None:  # a statement with no result set
        return pl.DataFrame()
    relation = _for_polars(relation)
    if limit is not None:
        relation = relation.limit(limit)
    frame = pl.from_arrow(relation.to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


# DuckDB types a polars frame cannot hold (an interval or union fails or panics on import, also inside a list, struct
# or map) or would show as raw bytes (a bit string, a big number): such a column is returned as DuckDB's own text
AS_TEXT = re.compile(r"\b(INTERVAL|UNION|BIT|BIGNUM|VARINT)\b")


def _for_polars(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """`relation` as a polars frame can hold it: each column of an AS_TEXT type cast to VARCHAR, and a repeated
    column name (`SELECT 1 AS a, 2 AS a`) numbered as DuckDB numbers them in a subquery (a, a_1)."""
    types = [re.sub(r'"(?:[^"]|"")*"', "", str(t)) for t in relation.types]  # not a struct field's quoted name
    names: list[str] = []
    for name in relation.columns:
        unique, n = name, 0
        while unique in names:
            n += 1
            unique = f"{name}_{n}"
        names.append(unique)
    if names == relation.columns and not any(AS_TEXT.search(t) for t in types):
        return relation
    quoted = [n.replace('"', '""') for n in names]
    return relation.project(", ".join(f'CAST(#{i} AS VARCHAR) AS "{n}"' if AS_TEXT.search(t) else f'#{i} AS "{n}"'
                                      for i, (n, t) in enumerate(zip(quoted, types, strict=True), start=1)))


def scan_connection(wh: Warehouse, tables: dict[str, tuple[str, str]], memory_limit: str = "512MB",
                    spill_dir: str | None = None,
                    columns: dict[str, list[str]] | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection where each `name -> (dataset, table)` is a view over that table's current snapshot.
    DuckDB streams the Arrow datasets and spills joins to `spill_dir` beyond `memory_limit`, so a stage can join
    tables of any size in bounded memory. An absent table is an empty view of its schema; `columns[name]` limits
    what is read of a table (a column it lacks reads as null)."""
    con = duckdb.connect(config={"memory_limit": memory_limit, "preserve_insertion_order": False})
    if spill_dir:
        con.execute(f"SET temp_directory = '{spill_dir}'")
    for name, (dataset, table) in tables.items():
        register_table(con, wh, name, dataset, table, (columns or {}).get(name))
    return con


def register_table(con: duckdb.DuckDBPyConnection, wh: Warehouse, name: str, dataset: str, table: str,
                   columns: list[str] | None = None) -> None:
    """View `name` over a table's current snapshot, streamed (see `scan_connection`); only `columns` if given."""
    register_snapshot(con, name, wh.snapshot(dataset, table), table, columns)
