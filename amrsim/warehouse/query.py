"""DuckDB over the warehouse: every Delta table becomes a view `<dataset>.<table>` (offline: no delta extension)."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

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
            snapshot = wh._open(dataset, table)
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
    columns = "".join(f', NULL::{_SQL_TYPES.get(str(f.type), "VARCHAR")} AS "{f.name}"'
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
    snapshot = wh._open(dataset, table)
    if snapshot is not None:
        data = snapshot.to_pyarrow_dataset()
        # a scanner, not the dataset: DuckDB reads a dataset in 1M-row Arrow batches, which would make memory
        # grow with the table up to that size; 64k-row batches (one row group) with little read-ahead do not
        wanted = [c for c in (columns or data.schema.names) if c in data.schema.names]
        source: Any = data.scanner(columns=wanted, batch_size=64 * 1024, batch_readahead=1, fragment_readahead=1)
        names = wanted
    else:
        source = SCHEMAS[table].empty_table()
        names = source.schema.names
    con.register(f"__{name}", source)
    # a table written before a column joined its schema reads that column as null
    missing = [f for f in SCHEMAS.get(table, []) if f.name not in names and (columns is None or f.name in columns)]
    extra = "".join(f", NULL::{_SQL_TYPES[str(f.type)]} AS {f.name}" for f in missing)
    con.execute(f"CREATE VIEW {name} AS SELECT *{extra} FROM __{name}")


_SQL_TYPES = {"string": "VARCHAR", "double": "DOUBLE", "int64": "BIGINT", "bool": "BOOLEAN",
              "timestamp[us, tz=UTC]": "TIMESTAMPTZ"}


def existing_keys(wh: Warehouse, dataset: str, table: str, keys: list[str]) -> set[str]:
    """Which of `keys` the table's current snapshot holds: a semi-join that streams the table's key column in
    64k-row batches, so the memory it needs is that of `keys`, not of the table."""
    if not keys or not wh.exists(dataset, table):
        return set()
    con = duckdb.connect(config={"memory_limit": "128MB"})
    try:
        register_table(con, wh, "t", dataset, table, ["key"])
        con.register("k", pl.DataFrame({"key": keys}).to_arrow())
        found = con.execute("SELECT t.key FROM t SEMI JOIN k ON t.key = k.key").fetchall()
    finally:
        con.close()
    return {row[0] for row in found}
