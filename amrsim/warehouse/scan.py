"""DuckDB views over Delta snapshots, streamed in small batches: what stages join and the key checks under a lock."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl
from deltalake import DeltaTable

from amrsim.warehouse.schemas import SCHEMAS

SQL_TYPES = {"string": "VARCHAR", "double": "DOUBLE", "int64": "BIGINT", "bool": "BOOLEAN",
             "timestamp[us, tz=UTC]": "TIMESTAMPTZ"}


def register_snapshot(con: duckdb.DuckDBPyConnection, name: str, snapshot: DeltaTable | None, table: str,
                      columns: list[str] | None = None) -> None:
    """View `name` over a snapshot of `table` (None: an empty view of its schema); only `columns` if given, a column
    the snapshot lacks (written before it joined the schema) reading as null."""
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
    missing = [f for f in SCHEMAS.get(table, []) if f.name not in names and (columns is None or f.name in columns)]
    extra = "".join(f", NULL::{SQL_TYPES[str(f.type)]} AS {f.name}" for f in missing)
    con.execute(f"CREATE VIEW {name} AS SELECT *{extra} FROM __{name}")


def keys_in(snapshot: DeltaTable | None, table: str, keys: list[str]) -> set[str]:
    """Which of `keys` the snapshot holds: a semi-join streaming its key column in 64k-row batches, so the memory it
    needs is that of `keys`, not of the table."""
    if not keys or snapshot is None:
        return set()
    con = duckdb.connect(config={"memory_limit": "128MB"})
    try:
        register_snapshot(con, "t", snapshot, table, ["key"])
        con.register("k", pl.DataFrame({"key": keys}).to_arrow())
        found = con.execute("SELECT t.key FROM t SEMI JOIN k ON t.key = k.key").fetchall()
    finally:
        con.close()
    return {row[0] for row in found}
