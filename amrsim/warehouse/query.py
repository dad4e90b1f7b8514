"""DuckDB over the warehouse: every Delta table becomes a view `<dataset>.<table>` (offline: no delta extension)."""

from __future__ import annotations

import duckdb
import polars as pl
from deltalake import DeltaTable

from amrsim.warehouse.store import Warehouse


def connect(wh: Warehouse) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one schema per dataset and one view per table."""
    con = duckdb.connect()
    for dataset, table in wh.tables():
        dataset_obj = DeltaTable(str(wh.table_path(dataset, table))).to_pyarrow_dataset()
        alias = f"__{dataset}__{table}"
        con.register(alias, dataset_obj)
        con.execute(f'CREATE SCHEMA IF NOT EXISTS "{dataset}"')
        con.execute(f'CREATE OR REPLACE VIEW "{dataset}"."{table}" AS SELECT * FROM "{alias}"')
    return con


def query(wh: Warehouse, sql: str) -> pl.DataFrame:
    """Run SQL against the warehouse views; returns a polars frame."""
    relation = connect(wh).sql(sql)
    if relation is None:  # a statement with no result set
        return pl.DataFrame()
    frame = pl.from_arrow(relation.to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame
