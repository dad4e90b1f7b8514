"""The warehouse: one Delta table per dataset and stage under `<root>/<dataset>/<table>`.

Delta commits are atomic (data files first, then one put-if-absent log entry), so a killed writer leaves at most
unreferenced Parquet files and never a visible half-written version.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import TableNotFoundError

from amrsim.errors import WarehouseError
from amrsim.warehouse.schemas import SCHEMAS

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
OK = "ok"
FAILED = "failed"
# a reader decodes a whole Parquet row group at once: parquet-rs's default (1M rows) would make a streaming scan's
# memory grow with the table up to a million rows; 64k rows keeps it at one small group
WRITER = WriterProperties(max_row_group_size=64 * 1024)


class Warehouse:
    """Read, upsert and list the Delta tables under one root directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        self.models_root = self.root / "models"  # warehouse/models/<method>/<run_id>/: trained models

    # -- naming -------------------------------------------------------------------------------------------------
    def table_path(self, dataset: str, table: str) -> Path:
        for part in (dataset, table):
            if not _NAME.fullmatch(part):  # fullmatch: '$' would let a trailing newline through
                raise WarehouseError(f"invalid table name '{dataset}/{table}': '{part}' must match {_NAME.pattern}")
        path = (self.root / dataset / table).resolve()
        if self.root not in path.parents:
            raise WarehouseError(f"table '{dataset}/{table}' resolves outside the warehouse root {self.root}")
        return path

    def _open(self, dataset: str, table: str, version: int | None = None) -> DeltaTable | None:
        path = self.table_path(dataset, table)
        if not (path / "_delta_log").is_dir():
            return None
        try:
            return DeltaTable(str(path), version=version)
        except TableNotFoundError:
            return None

    # -- reading ------------------------------------------------------------------------------------------------
    def exists(self, dataset: str, table: str) -> bool:
        return self._open(dataset, table) is not None

    def version(self, dataset: str, table: str) -> int | None:
        dt = self._open(dataset, table)
        return None if dt is None else dt.version()

    def read(self, dataset: str, table: str, version: int | None = None, columns: list[str] | None = None,
             where: pl.Expr | None = None) -> pl.DataFrame:
        """A table (optionally pinned to a version) as a polars frame; an empty frame of its schema if absent."""
        dt = self._open(dataset, table, version)
        if dt is None:
            if version is not None:
                raise WarehouseError(f"table '{dataset}/{table}' has no version {version}")
            schema = SCHEMAS.get(table)
            frame = pl.from_arrow(schema.empty_table()) if schema is not None else pl.DataFrame()
        else:
            frame = pl.from_arrow(dt.to_pyarrow_table(columns=columns))
        assert isinstance(frame, pl.DataFrame)
        if columns and frame.width and set(columns) <= set(frame.columns):
            frame = frame.select(columns)
        return frame.filter(where) if where is not None and frame.height else frame

    def columns(self, dataset: str, table: str) -> list[str]:
        dt = self._open(dataset, table)
        return [] if dt is None else [f.name for f in dt.schema().fields]

    def count(self, dataset: str, table: str, status: str | None = None) -> int:
        """Rows in a table (optionally only those with `status`), reading one column."""
        cols = self.columns(dataset, table)
        if not cols or (status and "status" not in cols):
            return 0
        frame = self.read(dataset, table, columns=["status" if status else cols[0]])
        return frame.filter(pl.col("status") == status).height if status else frame.height

    def keys(self, dataset: str, table: str, ok_only: bool = True) -> set[str]:
        """Keys already computed (by default only rows with status ok, so failed rows are retried)."""
        cols = ["key", "status"] if ok_only else ["key"]
        frame = self.read(dataset, table, columns=cols)
        if ok_only and "status" in frame.columns:
            frame = frame.filter(pl.col("status") == OK)
        return set(frame["key"].to_list()) if frame.height else set()

    def tables(self) -> list[tuple[str, str]]:
        """Every (dataset, table) under the root that has a Delta log."""
        found = []
        if self.root.is_dir():
            for log in sorted(self.root.glob("*/*/_delta_log")):
                found.append((log.parent.parent.name, log.parent.name))
        return found

    # -- writing ------------------------------------------------------------------------------------------------
    def _conform(self, table: str, frame: pl.DataFrame | pa.Table) -> pa.Table:
        data = frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame
        schema = SCHEMAS.get(table)
        if schema is None:
            return data
        missing = [f.name for f in schema if f.name not in data.column_names]
        if missing:
            raise WarehouseError(f"rows for table '{table}' lack columns {missing}")
        data = data.select(schema.names).cast(schema)
        if "error" in data.column_names and data.column("error").null_count < data.num_rows:
            # a row's error message may quote a token from the environment or a URL: mask it before it is stored
            from amrsim.secrets import redact

            masked = pa.array([redact(e) for e in data.column("error").to_pylist()], pa.string())
            data = data.set_column(data.column_names.index("error"), "error", masked)
        return data

    def upsert(self, dataset: str, table: str, frame: pl.DataFrame | pa.Table, key: str = "key") -> int:
        """Insert rows whose key is new and replace rows whose key exists (a retried failure); one commit."""
        data = self._conform(table, frame)
        if data.num_rows == 0:
            return 0
        path = self.table_path(dataset, table)
        dt = self._open(dataset, table)
        if dt is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_deltalake(str(path), data, mode="append", writer_properties=WRITER)
            return data.num_rows
        (dt.merge(data, predicate=f"t.{key} = s.{key}", source_alias="s", target_alias="t",
                  writer_properties=WRITER)
           .when_matched_update_all().when_not_matched_insert_all().execute())
        return data.num_rows

    def sync(self, dataset: str, table: str, frame: pl.DataFrame | pa.Table, key: str = "key",
             scope: tuple[str, str] | None = None) -> tuple[int, int]:
        """Make the table hold exactly `frame`'s keys: insert new, delete vanished, one commit; no-op if equal.
        With `scope` = (column, value) only rows having that value are compared and deleted (the `amr` table holds
        provided graphs, which ingest owns, next to parsed ones, which the parse stage owns)."""
        data = self._conform(table, frame)
        if scope is None:
            existing = self.keys(dataset, table, ok_only=False)
        else:
            rows = self.read(dataset, table, columns=[key, scope[0]])
            existing = set(rows.filter(pl.col(scope[0]) == scope[1])[key].to_list()) if rows.height else set()
        incoming = set(data.column(key).to_pylist())
        added, removed = incoming - existing, existing - incoming
        if not added and not removed:
            return 0, 0
        path = self.table_path(dataset, table)
        dt = self._open(dataset, table)
        if dt is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_deltalake(str(path), data, mode="append", writer_properties=WRITER)
        else:
            merge = dt.merge(data, predicate=f"t.{key} = s.{key}", source_alias="s", target_alias="t",
                             writer_properties=WRITER)
            merge = merge.when_not_matched_insert_all()
            if scope is None:
                merge = merge.when_not_matched_by_source_delete()
            else:
                value = scope[1].replace("'", "''")
                merge = merge.when_not_matched_by_source_delete(predicate=f"t.{scope[0]} = '{value}'")
            merge.execute()
        return len(added), len(removed)

    def append(self, dataset: str, table: str, frame: pl.DataFrame | pa.Table) -> int:
        """Append rows (lineage, results): one atomic commit."""
        data = self._conform(table, frame)
        if data.num_rows == 0:
            return 0
        path = self.table_path(dataset, table)
        path.parent.mkdir(parents=True, exist_ok=True)
        # merge: a table written before a column was added to its schema (results.task) gains it, old rows null
        write_deltalake(str(path), data, mode="append", schema_mode="merge",
                        writer_properties=WRITER)
        return data.num_rows
