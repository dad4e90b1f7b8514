"""Cost of a concurrency-safe commit: appending a chunk of new `amr_metrics` rows to a table that already holds
many, three ways, each from a fresh copy of the same table, interleaved, median of the repeats:
  plain   - write_deltalake append (what the metrics stage did: unsafe when two runs commit the same keys);
  locked  - Warehouse.append: the table's flock, a streamed semi-join of the new keys against the table, append;
  merge   - Delta's own conflict detection: an insert-only merge on the key (a losing writer must retry).
Prints seconds and the ratios to `plain`; then the cost of the checks every open of a table makes (commits since
the last checkpoint are Delta actions, data files exist with their recorded sizes): Warehouse.version() against a
bare DeltaTable(path).version() on the same table.
Usage: python benchmarks/bench_safe_commit.py [--existing 200000] [--rows 20000] [--commits 10] [--repeats 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

import amrsim.metrics  # noqa: F401 - declares amr_metrics' aspect columns: the rows have the table's real width
from amrsim.warehouse import Warehouse
from amrsim.warehouse.schemas import SCHEMAS
from amrsim.warehouse.store import WRITER


def metric_rows(start: int, n: int, seed: int) -> pl.DataFrame:
    """`n` amr_metrics rows with distinct keys start..start+n-1 and random scores (other columns null)."""
    rng = np.random.default_rng(seed)
    keys = [f"{i:032x}" for i in range(start, start + n)]
    given = {"key": keys, "pair_key": keys, "split": ["train"] * n, "status": ["ok"] * n,
             "options": ['{"aspects": "all"}'] * n}
    columns = {}
    for field in SCHEMAS["amr_metrics"]:
        dtype = pl.from_arrow(pa.array([], field.type)).dtype
        values = given.get(field.name, rng.random(n) if str(field.type) == "double" else [None] * n)
        columns[field.name] = pl.Series(field.name, values, dtype=dtype)
    return pl.DataFrame(columns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--existing", type=int, default=200_000)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--commits", type=int, default=10, help="commits the existing rows arrive in")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-safe-commit-") as tmp:
        base = Warehouse(Path(tmp) / "base")
        per = args.existing // args.commits
        for c in range(args.commits):
            base.append("d", "amr_metrics", metric_rows(c * per, per, c))
        chunk = metric_rows(args.existing, args.rows, 99)
        data = base._conform("amr_metrics", chunk)

        def plain(wh: Warehouse) -> None:
            write_deltalake(str(wh.table_path("d", "amr_metrics")), data, mode="append", schema_mode="merge",
                            writer_properties=WRITER)

        def locked(wh: Warehouse) -> None:
            assert wh.append("d", "amr_metrics", data) == args.rows

        def merge(wh: Warehouse) -> None:
            (DeltaTable(str(wh.table_path("d", "amr_metrics")))
             .merge(data, predicate="t.key = s.key", source_alias="s", target_alias="t", writer_properties=WRITER)
             .when_not_matched_insert_all().execute())

        table = str(base.table_path("d", "amr_metrics"))
        opens = {"bare DeltaTable": lambda: DeltaTable(table).version(),
                 "Warehouse (checked)": lambda: base.version("d", "amr_metrics")}
        open_seconds: dict[str, list[float]] = {name: [] for name in opens}
        for _ in range(args.repeats * 10):
            for name, call in opens.items():
                t0 = time.perf_counter()
                call()
                open_seconds[name].append(time.perf_counter() - t0)

        ways = {"plain": plain, "locked": locked, "merge": merge}
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        for r in range(args.repeats):
            for name, commit in ways.items():
                root = Path(tmp) / f"{name}-{r}"
                shutil.copytree(base.root, root)
                wh = Warehouse(root)
                t0 = time.perf_counter()
                commit(wh)
                seconds[name].append(time.perf_counter() - t0)
                assert wh.read("d", "amr_metrics", columns=["key"]).height == args.existing + args.rows
                shutil.rmtree(root)

    med = {name: statistics.median(s) for name, s in seconds.items()}
    print(f"{args.rows} new rows onto {args.existing} ({args.commits} commits), median of {args.repeats}:")
    print("| commit | seconds | ratio to plain append |\n|---|---|---|")
    for name in ways:
        print(f"| {name} | {med[name]:.3f} | {med[name] / med['plain']:.2f} |")
    opened = {name: statistics.median(s) for name, s in open_seconds.items()}
    print(f"\nopening the table ({args.commits} commits), median of {args.repeats * 10}:")
    print("| open | ms | ratio to bare |\n|---|---|---|")
    for name, value in opened.items():
        print(f"| {name} | {value * 1000:.2f} | {value / opened['bare DeltaTable']:.2f} |")


if __name__ == "__main__":
    main()
