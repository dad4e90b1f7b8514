"""DuckDB over the warehouse: every Delta table becomes a view `<dataset>.<table>` (offline: no delta extension)."""

from __future__ import annotations

import duckdb
import polars as pl

from amrsim.warehouse.scan import SQL_TYPES, register_snapshot
from amrsim.warehouse.schemas import SCHEMAS
from amrsim.warehouse.store import BrokenTable, Warehouse


def connect(wh: Warehouse, allow_external: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one schema per dataset and one view per table. A damaged table's view
    fails any query that reads it with the table's error; queries on the other tables work.

    Sandboxed unless `allow_external`: once the views exist, file system access is turned off and the
    configuration locked, so SQL cannot write files (a table's own `_delta_log` included), read other files,
    attach databases, load extensions or turn the sandbox off. The views still read: their data comes through
    registered Arrow datasets, which DuckDB does not open as files. Python variables are never scanned by name."""
    con = duckdb.connect(config={"python_enable_replacements": False})
    for dataset, table in wh.tables():
        con.execute(f'CREATE SCHEMA IF NOT EXISTS "{dataset}"')
        try:
            snapshot = wh.snapshot(dataset, table)
        except BrokenTable as e:
            con.execute(f'CREATE OR REPLACE VIEW "{dataset}"."{table}" AS {_failing_select(table, str(e))}')
            continue
        if snapshot is None:
            continue
        alias = f"__{dataset}__{table}"
        con.register(alias, snapshot.to_pyarrow_dataset())
        con.execute(f'CREATE OR REPLACE VIEW "{dataset}"."{table}" AS SELECT * FROM "{alias}"')
    if not allow_external:
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con


def _failing_select(table: str, message: str) -> str:
    """A SELECT with the table's columns whose every read raises `message` (the filter needs the failing value,
    so no projection can skip it)."""
    columns = "".join(f', NULL::{SQL_TYPES.get(str(f.type), "VARCHAR")} AS "{f.name}"'
                      for f in SCHEMAS.get(table, []))
    quoted = message.replace("'", "''")
    return f"SELECT * EXCLUDE (__broken) FROM (SELECT error('{quoted}') AS __broken{columns}) WHERE __broken IS NULL"


def query(wh: Warehouse, sql: str, limit: int | None = None, allow_external: bool = False) -> pl.DataFrame:
    """Run SQL against the warehouse views (sandboxed, see `connect`); returns a polars frame of at most `limit`
    rows. The limit is part of the query DuckDB runs, so it stops reading once it has them."""
    relation = connect(wh, allow_external).sql(sql)
    if relation is None:  # a statement with no result set
        return pl.DataFrame()
    if limit is not None:
        relation = relation.limit(limit)
    frame = pl.from_arrow(relation.to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


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
