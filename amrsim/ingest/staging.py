"""Staged ingest: normalised chunks go to Parquet files out of sight, then each canonical table is synced with them
in one Delta commit. DuckDB deduplicates the chunks and compares keys with the table, spilling to disk, so ingest
holds one chunk and DuckDB's memory limit, not the file or the table."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
from deltalake import write_deltalake

from amrsim.warehouse.query import register_table
from amrsim.warehouse.schemas import LATER_COLUMNS, SCHEMAS
from amrsim.warehouse.store import WRITER, Warehouse

SEQ = "__seq"  # file order across chunks: of two staged rows with one key, the first wins (as within a chunk)
MEMORY_LIMIT = "256MB"
BATCH_ROWS = 64 * 1024


class Stage:
    """A directory of staged chunks: `<dir>/<table>/<chunk>.parquet`, each row numbered in file order."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.seq: dict[str, int] = {}
        self.chunks = 0

    def add(self, tables: dict[str, pl.DataFrame]) -> None:
        for table, frame in tables.items():  # an empty frame is staged too: its table is synced to empty
            start = self.seq.get(table, 0)
            out = self.dir / table
            out.mkdir(parents=True, exist_ok=True)
            frame.with_columns(pl.int_range(start, start + frame.height, dtype=pl.Int64).alias(SEQ)).write_parquet(
                out / f"{self.chunks:06d}.parquet")
            self.seq[table] = start + frame.height
        self.chunks += 1

    def has(self, table: str) -> bool:
        return table in self.seq

    def files(self, table: str) -> str:
        return str(self.dir / table / "*.parquet")

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection that spills into the stage beyond its memory limit (temporary tables too)."""
        con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "preserve_insertion_order": False})
        spill = self.dir / "spill"
        spill.mkdir(exist_ok=True)
        con.execute(f"SET temp_directory = '{spill}'")
        return con

    def counts(self, table: str) -> tuple[int, int]:
        """(distinct rows, failed rows) of a staged table."""
        if not self.has(table):
            return 0, 0
        with self.connect() as con:
            row = con.execute(f"SELECT count(DISTINCT key), count(DISTINCT key) FILTER (WHERE status = 'failed') "
                              f"FROM read_parquet('{self.files(table)}')").fetchall()[0]
        return int(row[0]), int(row[1])

    def first_failed(self, table: str) -> tuple[int | None, str] | None:
        """(line, reason) of the staged table's failed row of the lowest line (line None where the table keeps no
        line: a sentences dataset), or None when no row failed."""
        if not self.has(table):
            return None
        line = "source_line" if "source_line" in SCHEMAS[table].names else "NULL"
        with self.connect() as con:
            rows = con.execute(f"SELECT {line}, error FROM read_parquet('{self.files(table)}') WHERE status = 'failed' "
                               f"ORDER BY {line} NULLS LAST, {SEQ} LIMIT 1").fetchall()
        return (rows[0][0], rows[0][1] or "") if rows else None

    def repeated_ids(self, prior: tuple[Warehouse, str, str] | None = None) -> dict[int, int]:
        """Lines whose explicit id an earlier line already has -> that first line (staged `__ids` chunks, and the
        rows of a `prior` (warehouse, dataset, table) the staged lines were appended to)."""
        if not self.has("__ids"):
            return {}
        with self.connect() as con:
            earlier = ""
            if prior is not None:
                register_table(con, prior[0], "prior", prior[1], prior[2], ["item_id", "source_line"])
                earlier = ("UNION ALL SELECT item_id, min(source_line), false FROM prior "
                           "WHERE item_id IS NOT NULL GROUP BY item_id")
            rows = con.execute(f"""
                SELECT line, first FROM (
                    SELECT line, explicit, min(line) OVER (PARTITION BY item_id) AS first
                    FROM (SELECT item_id, line, explicit FROM read_parquet('{self.files("__ids")}') {earlier}))
                WHERE explicit AND line > first""").fetchall()
        return {int(line): int(first) for line, first in rows}

    def clear(self) -> None:
        for child in self.dir.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        self.seq, self.chunks = {}, 0


def sync_staged(wh: Warehouse, dataset: str, table: str, stage: Stage, scope: tuple[str, str] | None = None,
                append_only: bool = False) -> tuple[int, int]:
    """Make the table hold exactly the staged rows' keys (first staged row per key): new rows are appended and
    vanished ones deleted, in one commit; nothing is written if they are equal. With `scope` = (column, value) only
    table rows with that value are compared and deleted; `append_only` (the stage holds appended rows) deletes
    nothing. Returns (added, removed)."""
    # under the table's lock: the keys compared are those the commit applies to, whoever else writes the table
    with wh.lock(dataset, table), stage.connect() as con:
        register_table(con, wh, "target", dataset, table, ["key", *([scope[0]] if scope else [])])
        where = f"WHERE {scope[0]} = '{scope[1].replace(chr(39), chr(39) * 2)}'" if scope else ""
        staged = f"read_parquet('{stage.files(table)}')"
        con.execute(f"CREATE TABLE firsts AS SELECT key, min({SEQ}) AS seq FROM {staged} GROUP BY key")
        con.execute("CREATE TABLE added AS SELECT f.key, f.seq FROM firsts f ANTI JOIN target t ON f.key = t.key")
        con.execute(f"CREATE TABLE removed AS SELECT t.key FROM (SELECT key FROM target {where}) t "
                    f"ANTI JOIN firsts f ON t.key = f.key" + (" WHERE false" if append_only else ""))
        n_added = _count(con, "added")
        n_removed = _count(con, "removed")
        if not n_added and not n_removed:
            return 0, 0
        # the vanished keys first: the connection then streams the new rows, one open result at a time
        gone = con.sql("SELECT key FROM removed").to_arrow_table().column("key") if n_removed else None
        # a staged row's number is unique in its table: joining on it alone keeps the hash table to 8 bytes a row
        rows = con.sql(f"SELECT s.* EXCLUDE ({SEQ}) FROM {staged} s SEMI JOIN (SELECT seq FROM added) a "
                       f"ON s.{SEQ} = a.seq").to_arrow_reader(BATCH_ROWS)
        path = wh.table_path(dataset, table)
        dt = wh.snapshot(dataset, table)
        if dt is None or not n_removed:  # the common refresh: rows only added, a plain append
            path.parent.mkdir(parents=True, exist_ok=True)
            write_deltalake_stream(path, _conformed(wh, table, rows), evolve=bool(LATER_COLUMNS.get(table)))
        else:
            assert gone is not None
            source = _merge_source(wh, table, rows, gone)
            names = SCHEMAS[table].names
            # a table written before a column joined its schema gains it (its old rows read null)
            (dt.merge(source, predicate="t.key = s.key", source_alias="s", target_alias="t",
                      merge_schema=bool(LATER_COLUMNS.get(table)), writer_properties=WRITER)
               .when_matched_delete(predicate="s.__delete")
               .when_not_matched_insert(updates={c: f"s.{c}" for c in names}, predicate="NOT s.__delete")
               .execute())
        return n_added, n_removed


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    return int(con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])


def _conformed(wh: Warehouse, table: str, rows: pa.RecordBatchReader) -> pa.RecordBatchReader:
    schema = SCHEMAS[table]

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in rows:
            yield from wh._conform(table, pa.Table.from_batches([batch])).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _merge_source(wh: Warehouse, table: str, rows: pa.RecordBatchReader, gone: pa.ChunkedArray) -> pa.RecordBatchReader:
    """New rows flagged `__delete = false` then the vanished keys flagged true: one merge inserts and deletes."""
    schema = SCHEMAS[table].append(pa.field("__delete", pa.bool_()))

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in _conformed(wh, table, rows):
            yield pa.RecordBatch.from_arrays([*batch.columns, pa.array([False] * batch.num_rows)], schema=schema)
        n = len(gone)
        cols = [gone.combine_chunks().cast(f.type) if f.name == "key" else pa.nulls(n, f.type) for f in SCHEMAS[table]]
        yield pa.RecordBatch.from_arrays([*cols, pa.array([True] * n)], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def write_deltalake_stream(path: Path, rows: pa.RecordBatchReader, evolve: bool = False) -> None:
    """Append the rows in one commit; `evolve`: columns the table lacks are added to it."""
    write_deltalake(str(path), rows, mode="append", writer_properties=WRITER,
                    **({"schema_mode": "merge"} if evolve else {}))
