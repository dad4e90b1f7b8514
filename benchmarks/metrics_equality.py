"""Results-unchanged check for the metrics engine: every aspect column on every BAMBOO test set, against a dump.

Dump with one version of the code, check with another (both read the same shared files):

    .venv/bin/python benchmarks/metrics_equality.py dump /tmp/metrics_ref     # before a change
    .venv/bin/python benchmarks/metrics_equality.py check /tmp/metrics_ref    # after it: exit 1 on any difference

Two runs per set: all aspects with the default options (convention amr, MiniLM vectors) and Smatch alone with
convention smatch. Columns must agree to 1e-12, and status, error and bounded exactly. `--workers 0` scores in this
process on two threads (the path of a small file), the default on two worker processes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import polars as pl

from amrsim.metrics.engine import (
    ALL_ASPECTS,
    MetricsOptions,
    _score_columns,
    _with_keys,
    aspect_columns,
    score_pairs_parallel,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "amr_bamboo"
RUNS = {"all": MetricsOptions(), "smatch": MetricsOptions(aspects=("smatch",), convention="smatch")}
TOLERANCE = 1e-12


def test_sets() -> list[Path]:
    return sorted(DATA.glob("bamboo_*_test.jsonl.gz"))


def read_pairs(path: Path) -> pl.DataFrame:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return pl.DataFrame({"amr1": [r["amr1"] for r in rows], "amr2": [r["amr2"] for r in rows]})


def score(path: Path, run: str, workers: int) -> pl.DataFrame:
    options = RUNS[run]
    if workers == 0:  # in this process on two threads (the CLI's path on a small file)
        frame = read_pairs(path)
        return _with_keys(frame, _score_columns(frame["amr1"].to_list(), frame["amr2"].to_list(), options, 2),
                          options).drop("amr1", "amr2", "seconds")
    return score_pairs_parallel(read_pairs(path), options, workers=workers).drop("amr1", "amr2", "seconds")


def compare(ref: pl.DataFrame, new: pl.DataFrame, run: str) -> list[str]:
    """Differences between two scored frames of the same input, one line each."""
    problems = []
    if ref.height != new.height:
        return [f"{ref.height} rows before, {new.height} now"]
    for col in ("key", "status", "error", "bounded"):
        if col in new.columns and ref[col].to_list() != new[col].to_list():
            problems.append(f"column {col} differs")
    cols = aspect_columns(RUNS[run].aspects if run != "all" else ALL_ASPECTS)
    for col in cols:
        a, b = ref[col], new[col]
        if (a.is_null() != b.is_null()).any():
            problems.append(f"{col}: nulls differ")
            continue
        diff = (a - b).abs().max()
        if diff is not None and diff > TOLERANCE:
            problems.append(f"{col}: max |difference| {diff:.3g}")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["dump", "check"])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--workers", type=int, default=2, help="worker processes; 0: this process, two threads")
    ap.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    args = ap.parse_args()
    args.directory.mkdir(parents=True, exist_ok=True)
    failures = 0
    for path in test_sets():
        name = path.name.removesuffix(".jsonl.gz")
        for run in args.runs:
            target = args.directory / f"{name}.{run}.parquet"
            new = score(path, run, args.workers)
            if args.mode == "dump":
                new.write_parquet(target)
                print(f"{name} {run}: {new.height} rows -> {target}", flush=True)
                continue
            problems = compare(pl.read_parquet(target), new, run)
            failures += bool(problems)
            print(f"{name} {run}: {'equal' if not problems else '; '.join(problems)}", flush=True)
    if args.mode == "check":
        print("all equal" if not failures else f"{failures} set(s) differ")
        sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
