"""Which source each dataset's tables came from: `meta/sources`, one row per dataset name. Every config sharing a
warehouse, and every file evaluated one-off, writes the same `<root>/<dataset>/` tables, so a second definition of a
name would replace the first's rows without a word; a write from a source other than the recorded one is refused
until the name is released (`amrsim run --replace`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl

from amrsim.errors import WarehouseError
from amrsim.warehouse.store import Warehouse

META, SOURCES = "meta", "sources"
CLI = "cli"  # the origin of a dataset a command defines from its options (`evaluate sts --file`)
OVERRIDDEN = " with --set"  # ends the origin of a config's dataset that a `--set datasets.<name>...` changed


class DatasetTaken(WarehouseError):
    """A dataset name's tables hold another source's rows."""


@dataclass(frozen=True)
class Source:
    """Where a dataset's rows come from: the config file that defines it (or `cli`; `<config> with --set` where an
    override changed it for one run), the resolved input file (or `hf:<id>`) and the hash of its definition."""

    origin: str
    file: str
    definition: str

    def describe(self) -> str:
        return f"{self.file} (defined by {self.origin})" if self.origin != CLI else f"{self.file} (a one-off --file)"

    def replaces(self, recorded: Source) -> bool:
        """Whether writing this source would replace `recorded`'s rows: another file, or another definition from
        another origin. The config that recorded a dataset may edit it as written (path, columns, split): a refresh
        of its own dataset; a one-off file or an override may not move it to another file."""
        if self.origin == recorded.origin and self.origin != CLI and not self.origin.endswith(OVERRIDDEN):
            return False
        if self.file != recorded.file:
            return True
        return self.origin != recorded.origin and self.definition != recorded.definition


def recorded_source(wh: Warehouse, dataset: str) -> Source | None:
    """The source recorded for `dataset`, or None (never written, or released)."""
    rows = wh.read(META, SOURCES, where=pl.col("key") == dataset)
    if not rows.height:
        return None
    row = rows.row(0, named=True)
    return Source(row["origin"], row["file"], row["definition"])


def conflict(wh: Warehouse, dataset: str, source: Source, hint: str) -> str | None:
    """The one-line refusal of writing `dataset` from `source`, or None when it may."""
    recorded = recorded_source(wh, dataset)
    if recorded is None or not source.replaces(recorded):
        return None
    return (f"dataset '{dataset}' in warehouse {wh.root} holds the rows of {recorded.describe()}; "
            f"{source.describe()} would replace them: {hint}")


def claim(wh: Warehouse, dataset: str, source: Source, run_id: str, hint: str) -> None:
    """Record `source` as `dataset`'s, under the table's lock; DatasetTaken (nothing written) when another source
    holds the name."""
    with wh.lock(META, SOURCES):
        if problem := conflict(wh, dataset, source, hint):
            raise DatasetTaken(problem)
        if recorded_source(wh, dataset) == source:
            return
        wh.upsert(META, SOURCES, pl.DataFrame({
            "key": [dataset], "origin": [source.origin], "file": [source.file], "definition": [source.definition],
            "run_id": [run_id], "recorded_at": [datetime.now(UTC)]}))


def release(wh: Warehouse, dataset: str) -> bool:
    """Forget `dataset`'s source, so the next write records its own (its rows then replace the old ones)."""
    return wh.exists(META, SOURCES) and wh.delete_keys(META, SOURCES, [dataset]) > 0
