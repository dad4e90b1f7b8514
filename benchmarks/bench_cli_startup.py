"""Benchmark: start-up of the command line (`python -m amrsim.cli --help`), this checkout vs. an earlier commit, in
one run.

The reference tree is the commit's `amrsim`, `tasks` and `flows` (`git archive`) in a temporary directory. The two
alternate, after one warm-up each (so both read their files from the page cache); medians of --repeat runs, their
ratio, and the modules each imports before printing the help.
Usage: python benchmarks/bench_cli_startup.py --against <commit> [--repeat 15]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNT_MODULES = ("import runpy, sys\nsys.argv = ['amrsim', '--help']\n"
                 "try:\n    runpy.run_module('amrsim.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
                 "print(len(sys.modules), file=sys.stderr)")


def extract(commit: str, into: Path) -> None:
    archive = subprocess.run(["git", "archive", commit, "amrsim", "tasks", "flows"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def help_seconds(tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "120"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "amrsim.cli", "--help"], cwd=tree, env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - t0


def modules_loaded(tree: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "120"}
    proc = subprocess.run([sys.executable, "-c", COUNT_MODULES], cwd=tree, env=env, check=True, capture_output=True,
                          text=True)
    return int(proc.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the reference commit (e.g. the one before a change)")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="amrsim-startup-") as tmp:
        reference = Path(tmp)
        extract(args.against, reference)
        trees = {"this checkout": ROOT, f"commit {args.against}": reference}
        times: dict[str, list[float]] = {name: [] for name in trees}
        for tree in trees.values():
            help_seconds(tree)  # warm-up
        for _ in range(args.repeat):
            for name, tree in trees.items():
                times[name].append(help_seconds(tree))
        for name, tree in trees.items():
            print(f"{name:>24}: median {statistics.median(times[name]):.3f}s over {args.repeat} runs, "
                  f"{modules_loaded(tree)} modules loaded")
        ours, ref = (statistics.median(t) for t in times.values())
        print(f"ratio (commit / this checkout): {ref / ours:.2f}x")


if __name__ == "__main__":
    main()
