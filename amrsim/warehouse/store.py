"""The warehouse: one Delta table per dataset and stage under `<root>/<dataset>/<table>`.

Delta commits are atomic (data files first, then one put-if-absent log entry), so a killed writer leaves at most
unreferenced Parquet files and never a visible half-written version. Every write holds the table's lock (see
`lock.py`) while it compares keys and commits, so concurrent runs never store a key twice.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import TableNotFoundError

from amrsim.columns import FAILED as FAILED  # re-exported with OK: the values of every table's `status` column
from amrsim.columns import OK
from amrsim.errors import AmrsimError, WarehouseError
from amrsim.files import own_dir, write_failure_reason
from amrsim.secrets import redact
from amrsim.warehouse.lock import LOCK_TIMEOUT, table_lock
from amrsim.warehouse.scan import keys_in
from amrsim.warehouse.schemas import LATER_COLUMNS, SCHEMAS

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# a reader decodes a whole Parquet row group at once: parquet-rs's default (1M rows) would make a streaming scan's
# memory grow with the table up to a million rows; 64k rows keeps it at one small group
WRITER = WriterProperties(max_row_group_size=64 * 1024)
# the action names a Delta commit's lines may hold (protocol spec); anything else means a log file was overwritten
_ACTIONS = {"add", "remove", "metaData", "protocol", "commitInfo", "txn", "cdc", "domainMetadata",
            "checkpointMetadata", "sidecar"}


class BrokenTable(WarehouseError):
    """A table's log or data files are unreadable: reported by name, never read as empty."""


class Warehouse:
    """Read, upsert and list the Delta tables under one root directory."""

    def __init__(self, root: str | Path, lock_timeout: float = LOCK_TIMEOUT):
        self.root = Path(root).resolve()
        self.models_root = self.root / "models"  # warehouse/models/<method>/<run_id>/: trained models
        self.lock_timeout = lock_timeout

    # -- naming -------------------------------------------------------------------------------------------------
    def table_path(self, dataset: str, table: str) -> Path:
        for part in (dataset, table):
            if not _NAME.fullmatch(part):  # fullmatch: '$' would let a trailing newline through
                raise WarehouseError(f"invalid table name '{dataset}/{table}': '{part}' must match {_NAME.pattern}")
        path = (self.root / dataset / table).resolve()
        if self.root not in path.parents:
            raise WarehouseError(f"table '{dataset}/{table}' resolves outside the warehouse root {self.root}")
        return path

    @contextmanager
    def lock(self, dataset: str, table: str) -> Iterator[None]:
        """Hold the table's write lock (waits up to `lock_timeout` seconds for another writer). Every write takes
        it, so here the table's log is checked to be its own directory (a linked one would take commits elsewhere)
        and a failure of the file system inside (disk full, file too large) becomes one line naming the table:
        the commit never happened, so the table stays at its last version."""
        own_dir(self.table_path(dataset, table) / "_delta_log", make=False)
        with table_lock(self.root, dataset, table, self.lock_timeout):
            try:
                yield
            except Exception as e:
                path = self.table_path(dataset, table)
                if isinstance(e, AmrsimError) or (reason := write_failure_reason(e, path)) is None:
                    raise
                raise WarehouseError(f"table '{dataset}/{table}': cannot write ({reason}); nothing was committed, "
                                     f"the table is at its last version") from None

    def snapshot(self, dataset: str, table: str, version: int | None = None) -> DeltaTable | None:
        """The table's snapshot, None if it has no commit yet; BrokenTable if its log or data files are damaged."""
        path = self.table_path(dataset, table)
        log = path / "_delta_log"
        if not log.is_dir():
            return None
        name = f"{dataset}/{table}"
        try:
            dt = DeltaTable(str(path), version=version)
        except TableNotFoundError as e:
            if not any(log.glob("*.json")) and not any(log.glob("*.checkpoint*.parquet")):
                return None  # a first commit that never happened (killed writer): the table does not exist yet
            raise BrokenTable(f"table '{name}' is unreadable: {_first_line(e)}") from None
        except Exception as e:  # deltalake raises its own DeltaError, OSError or ValueError for a damaged log
            if version is not None and self.snapshot(dataset, table) is not None:
                raise WarehouseError(f"table '{name}' has no version {version}") from None
            raise BrokenTable(f"table '{name}' is unreadable: {_first_line(e)}") from None
        _check_log(name, log)
        _check_files(name, path, dt)
        return dt

    # -- reading ------------------------------------------------------------------------------------------------
    def exists(self, dataset: str, table: str) -> bool:
        return self.snapshot(dataset, table) is not None

    def version(self, dataset: str, table: str) -> int | None:
        dt = self.snapshot(dataset, table)
        return None if dt is None else dt.version()

    def read(self, dataset: str, table: str, version: int | None = None, columns: list[str] | None = None,
             where: pl.Expr | None = None) -> pl.DataFrame:
        """A table (optionally pinned to a version) as a polars frame; an empty frame of its schema if absent."""
        dt = self.snapshot(dataset, table, version)
        if dt is None:
            if version is not None:
                raise WarehouseError(f"table '{dataset}/{table}' has no version {version}")
            schema = SCHEMAS.get(table)
            frame = pl.from_arrow(schema.empty_table()) if schema is not None else pl.DataFrame()
        else:
            # polars' own Parquet reader, not Arrow's dataset scanner: Arrow's C++ thread pool can outlive a short
            # command and abort it at exit ("terminate called without an active exception", apache/arrow#34314)
            scan = pl.scan_delta(dt)
            if columns:
                scan = scan.select([c for c in columns if c in scan.collect_schema()])
            try:
                frame = scan.collect()
            except (OSError, ValueError, pl.exceptions.PolarsError) as e:  # a data file damaged in place (same size)
                raise BrokenTable(f"table '{dataset}/{table}' is unreadable: {_first_line(e)}") from None
        assert isinstance(frame, pl.DataFrame)
        if columns and frame.width and set(columns) <= set(frame.columns):
            frame = frame.select(columns)
        return frame.filter(where) if where is not None and frame.height else frame

    def columns(self, dataset: str, table: str) -> list[str]:
        dt = self.snapshot(dataset, table)
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
        """The rows in the table's schema (its columns in order, cast to their types). A column the schema lacks is
        an error, never dropped: a table's columns are its schema's and those declared for it (`amrsim.columns`)."""
        data = frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame
        schema = SCHEMAS.get(table)
        if schema is None:
            return data
        later = LATER_COLUMNS.get(table, frozenset())
        for name in [f.name for f in schema if f.name in later and f.name not in data.column_names]:
            data = data.append_column(schema.field(name), pa.nulls(data.num_rows, schema.field(name).type))
        missing = [f.name for f in schema if f.name not in data.column_names]
        if missing:
            raise WarehouseError(f"rows for table '{table}' lack columns {missing}")
        extra = [name for name in data.column_names if name not in schema.names]
        if extra:
            raise WarehouseError(f"rows for table '{table}' have columns its schema lacks: {extra} (nothing was "
                                 f"written; a table's columns are its schema's and those declared for it)")
        data = data.select(schema.names).cast(schema)
        if "error" in data.column_names and data.column("error").null_count < data.num_rows:
            # a row's error message may quote a token from the environment or a URL: mask it before it is stored
            masked = pa.array([redact(e) for e in data.column("error").to_pylist()], pa.string())
            data = data.set_column(data.column_names.index("error"), "error", masked)
        return data

    def upsert(self, dataset: str, table: str, frame: pl.DataFrame | pa.Table, key: str = "key") -> int:
        """Insert rows whose key is new and replace rows whose key exists (a retried failure); one commit."""
        data = self._conform(table, frame)
        if data.num_rows == 0:
            return 0
        path = self.table_path(dataset, table)
        with self.lock(dataset, table):  # two first writes would both append; two merges would conflict
            dt = self.snapshot(dataset, table)
            if dt is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_deltalake(str(path), data, mode="append", writer_properties=WRITER)
                return data.num_rows
            (dt.merge(data, predicate=f"t.{key} = s.{key}", source_alias="s", target_alias="t",
                      merge_schema=bool(LATER_COLUMNS.get(table)), writer_properties=WRITER)
               .when_matched_update_all().when_not_matched_insert_all().execute())
        return data.num_rows

    def sync(self, dataset: str, table: str, frame: pl.DataFrame | pa.Table, key: str = "key",
             scope: tuple[str, str] | None = None) -> tuple[int, int]:
        """Make the table hold exactly `frame`'s keys: insert new, delete vanished, one commit; no-op if equal.
        With `scope` = (column, value) only rows having that value are compared and deleted (the `amr` table holds
        provided graphs, which ingest owns, next to parsed ones, which the parse stage owns)."""
        data = self._conform(table, frame)
        with self.lock(dataset, table):  # the keys compared are those the commit applies to
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
            dt = self.snapshot(dataset, table)
            if dt is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_deltalake(str(path), data, mode="append", writer_properties=WRITER)
            else:
                merge = dt.merge(data, predicate=f"t.{key} = s.{key}", source_alias="s", target_alias="t",
                                 merge_schema=bool(LATER_COLUMNS.get(table)), writer_properties=WRITER)
                merge = merge.when_not_matched_insert_all()
                if scope is None:
                    merge = merge.when_not_matched_by_source_delete()
                else:
                    value = scope[1].replace("'", "''")
                    merge = merge.when_not_matched_by_source_delete(predicate=f"t.{scope[0]} = '{value}'")
                merge.execute()
            return len(added), len(removed)

    def delete_keys(self, dataset: str, table: str, keys: Iterable[str], key: str = "key") -> int:
        """Delete the rows whose key is in `keys`, one commit (none when nothing matches); returns rows deleted."""
        with self.lock(dataset, table):
            dt = self.snapshot(dataset, table)
            wanted = sorted(set(keys) & self.keys(dataset, table, ok_only=False)) if dt is not None else []
            if dt is None or not wanted:
                return 0
            stats = (dt.merge(pa.table({key: pa.array(wanted, pa.string())}), predicate=f"t.{key} = s.{key}",
                              source_alias="s", target_alias="t", writer_properties=WRITER)
                     .when_matched_delete().execute())
        return int(stats.get("num_target_rows_deleted", 0))

    def append(self, dataset: str, table: str, frame: pl.DataFrame | pa.Table) -> int:
        """Append rows in one atomic commit (see `append_new`); returns the number of rows added."""
        return self.append_new(dataset, table, frame).num_rows

    def append_new(self, dataset: str, table: str, frame: pl.DataFrame | pa.Table) -> pa.Table:
        """Append rows in one atomic commit; rows whose `key` the table (or an earlier row) already has are left
        out, checked under the table's lock so a concurrent writer cannot slip the same key in. Returns the rows
        added."""
        data = self._conform(table, frame)
        if data.num_rows == 0:
            return data
        path = self.table_path(dataset, table)
        with self.lock(dataset, table):
            if "key" in data.column_names:  # tables without a content key (lineage) only ever gain rows
                data = self._new_rows(dataset, table, data)
                if data.num_rows == 0:
                    return data
            path.parent.mkdir(parents=True, exist_ok=True)
            # merge: a table written before a column was added to its schema (results.task) gains it, old rows null
            write_deltalake(str(path), data, mode="append", schema_mode="merge", writer_properties=WRITER)
        return data

    def rewrite(self, dataset: str, table: str,
                change: Callable[[pl.DataFrame], pl.DataFrame | None]) -> int | None:
        """Replace the table's rows with `change(rows)` in one commit under its lock: a migration to the current
        schema (earlier versions stay readable by version). `change` returns None when there is nothing to do.
        Returns the new version, or None when nothing was written."""
        path = self.table_path(dataset, table)
        with self.lock(dataset, table):
            if self.snapshot(dataset, table) is None:
                return None
            changed = change(self.read(dataset, table))
            if changed is None:
                return None
            write_deltalake(str(path), self._conform(table, changed), mode="overwrite", schema_mode="overwrite",
                            writer_properties=WRITER)
        return self.version(dataset, table)

    def existing_keys(self, dataset: str, table: str, keys: list[str]) -> set[str]:
        """Which of `keys` the table's current snapshot holds, reading its key column in small batches."""
        return keys_in(self.snapshot(dataset, table), table, keys)

    def _new_rows(self, dataset: str, table: str, data: pa.Table) -> pa.Table:
        """`data` less rows whose key the table holds or an earlier row of `data` repeats."""
        keys = data.column("key").to_pylist()
        present = self.existing_keys(dataset, table, keys)
        seen: set[str] = set()
        keep = []
        for k in keys:
            keep.append(k not in present and k not in seen)
            seen.add(k)
        return data if all(keep) else data.filter(pa.array(keep))


def _first_line(error: BaseException) -> str:
    """deltalake's messages carry a Rust backtrace after the first line."""
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:300]


def _check_log(name: str, log: Path) -> None:
    """Every commit after the last checkpoint holds only Delta actions: deltalake would read a commit overwritten
    with other JSON (e.g. a query's COPY output) as an empty commit and silently drop that version's rows."""
    try:
        after = json.loads((log / "_last_checkpoint").read_text())["version"]
    except (OSError, ValueError, KeyError, TypeError):
        after = -1
    for commit in sorted(log.glob("[0-9]*.json")):
        if not commit.stem.isdigit() or int(commit.stem) <= after:
            continue
        try:
            lines = [json.loads(line) for line in commit.read_text(encoding="utf-8").splitlines() if line.strip()]
            valid = bool(lines) and all(isinstance(a, dict) and len(a) == 1 and set(a) <= _ACTIONS for a in lines)
        except (OSError, ValueError):
            valid = False
        if not valid:
            raise BrokenTable(f"table '{name}' is unreadable: log entry {commit} is not a Delta commit")


def _check_files(name: str, path: Path, dt: DeltaTable) -> None:
    """Every data file the snapshot names exists with the size its commit recorded (a deleted or truncated file
    would otherwise fail deep inside a scan, or in DuckDB, without naming the table)."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    for file, size in zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True):
        data = path / unquote(file)
        try:
            actual = os.stat(data).st_size
        except OSError:
            raise BrokenTable(f"table '{name}' is unreadable: data file {data} is missing") from None
        if actual != size:
            raise BrokenTable(f"table '{name}' is unreadable: data file {data} has {actual} bytes, its commit "
                              f"recorded {size}")
