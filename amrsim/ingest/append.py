"""Append-only refresh: when a file only grew since the last ingest of the dataset (its old bytes are unchanged, by
SHA-256), only the appended rows are read. A dataset that gains rows on a schedule is then refreshed in time
proportional to the new rows, not to the file."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from amrsim.config import DatasetConfig
from amrsim.ingest.readers import APPENDABLE, Tail
from amrsim.warehouse.lineage import META
from amrsim.warehouse.store import OK, Warehouse

BLOCK = 1 << 20


@dataclass(frozen=True)
class FileState:
    """What the next ingest needs to recognise this file's bytes as its prefix."""

    size: int
    lines: int
    sha256: str
    clean_end: bool  # ends with a newline after a non-blank line: appended rows start a new line, nothing pending
    prefix_sha256: str | None = None  # of the first `prefix` bytes asked for, when the file has that many

    def record(self) -> dict[str, Any]:
        return {"file_bytes": self.size, "file_lines": self.lines, "file_sha256": self.sha256,
                "file_clean_end": self.clean_end}


def scan(path: Path, prefix: int | None = None) -> FileState:
    """One pass over the file: its SHA-256, that of its first `prefix` bytes, its size and newline count."""
    whole = hashlib.sha256()
    prefix_sha, size, lines, last = None, 0, 0, b""
    with path.open("rb") as f:
        while block := f.read(BLOCK):
            if prefix is not None and size <= prefix < size + len(block):
                head = whole.copy()
                head.update(block[:prefix - size])
                prefix_sha = head.hexdigest()
            whole.update(block)
            size += len(block)
            lines += block.count(b"\n")
            last = (last + block)[-4096:]
    if prefix is not None and prefix == size:
        prefix_sha = whole.hexdigest()
    final_line = last.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    clean = last.endswith(b"\n") and not last.endswith(b"\n\n") and bool(final_line.strip())
    return FileState(size, lines, whole.hexdigest(), clean, prefix_sha)


def eligible(ds: DatasetConfig, path: Path | str) -> bool:
    return ds.resolved_format() in APPENDABLE and Path(str(path)).suffix != ".gz" and Path(str(path)).is_file()


def last_ingest(wh: Warehouse, dataset: str) -> dict[str, Any] | None:
    """The newest successful ingest of the dataset: its config hash and recorded input state."""
    if not wh.exists(META, "lineage"):
        return None
    rows = wh.read(META, "lineage", columns=["dataset", "stage", "status", "started_at", "config_hash",
                                             "input_versions"],
                   where=(pl.col("dataset") == dataset) & (pl.col("stage") == "ingest"))
    if not rows.height:
        return None
    newest = rows.sort("started_at").row(-1, named=True)
    if newest["status"] != OK:  # a failed ingest may have committed some tables: read the whole file again
        return None
    return {"config_hash": newest["config_hash"], **json.loads(newest["input_versions"] or "{}")}


def appended_tail(wh: Warehouse, dataset: str, ds_hash: str, path: Path) -> tuple[Tail | None, FileState]:
    """The part of the file after what the last ingest read, if the file only grew since; else None (read it all).
    Also the file's state, to record for the next ingest."""
    prev = last_ingest(wh, dataset)
    usable = (prev is not None and prev.get("config_hash") == ds_hash and prev.get("file") == str(path)
              and prev.get("file_clean_end") and isinstance(prev.get("file_bytes"), int))
    state = scan(path, prev["file_bytes"] if usable and prev else None)
    if usable and prev and state.prefix_sha256 == prev.get("file_sha256"):
        return Tail(prev["file_bytes"], prev["file_lines"]), state
    return None, state
