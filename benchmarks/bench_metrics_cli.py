"""AMR metrics on the user's path: `amrsim metrics score` (run as a user does) vs the engine vs smatch 1.0.4.

For each BAMBOO main test set, in one run:
- reference: smatch 1.0.4 in this process, as benchmarks/bench_smatch.py (one-line PENMAN, metadata dropped,
  ``match_triple_dict.clear()`` per pair, default restarts);
- engine: ``smatch(smatch_triples(a, "smatch"), smatch_triples(b, "smatch"))`` per pair in this process, the loop
  benchmarks/bench_smatch.py times;
- CLI: ``amrsim metrics score --file <set> --out <new file> --aspects smatch --convention smatch`` with the default
  (automatic) workers, in a fresh process per run: the console command's own code (`amrsim.cli.app`'s command:
  arguments, reading, content keys, scoring, writing, summary) runs once on a one-pair file (the start-up: imports,
  typer's command tree, node vectors) and is then timed on the set, wall and CPU (its worker processes included).
Then, CLI only (start-up excluded the same way): all default aspects and WWLK alone on sts.
Each figure is the best of --repeat runs (other jobs on a shared machine only ever add time); compare the ratios
within one run, not seconds across runs.

    .venv/bin/python benchmarks/bench_metrics_cli.py [--sets sts sick para] [--limit N] [--repeat 3] [--no-aspects]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "amr_bamboo"


def one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if not line.strip().startswith("#"))


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (a worker pool, once shut down)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cli_child(one: str, full: str, tmp: str, options: list[str]) -> None:
    """In a fresh process: `amrsim metrics score` on the one-pair file (imports, lazy imports, node vectors: the
    start-up), then timed on the full file, exactly as the console command runs it (`amrsim.cli.app`, its
    arguments parsed, file read, keys, scoring, output written, summary printed). Prints wall and CPU seconds."""
    import contextlib
    import io

    import typer

    from amrsim.cli import app

    command = typer.main.get_command(app)  # typer builds the command tree from the signatures: start-up, once

    def run(pairs_file: str) -> tuple[float, float]:
        out = Path(tmp) / f"out-{time.monotonic_ns()}.parquet"
        c0, t0 = _cpu(), time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            command.main(["metrics", "score", "--file", pairs_file, "--out", str(out), *options],
                         standalone_mode=False)
        return time.perf_counter() - t0, _cpu() - c0

    run(one)
    print(json.dumps(run(full)))


def cli_seconds(one: Path, full: Path, tmp: Path, *options: str) -> tuple[float, float]:
    """(wall, CPU) seconds of the CLI on `full`, start-up excluded (see `cli_child`); CPU counts its workers."""
    done = subprocess.run([sys.executable, __file__, "--cli-child", str(one), str(full), str(tmp), "--", *options],
                          cwd=ROOT, check=True, capture_output=True, text=True)
    wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
    return wall, cpu


def cli_rate(rows: list[dict], tmp: Path, name: str, repeat: int, *options: str) -> tuple[float, float]:
    """(wall, CPU) pairs per second of the CLI on `rows`, start-up excluded, best of `repeat` fresh processes."""
    full, single = tmp / f"{name}.jsonl", tmp / f"{name}-one.jsonl"
    full.write_text("".join(json.dumps({"amr1": r["amr1"], "amr2": r["amr2"]}) + "\n" for r in rows))
    single.write_text(json.dumps({"amr1": rows[0]["amr1"], "amr2": rows[0]["amr2"]}) + "\n")
    runs = [cli_seconds(single, full, tmp, *options) for _ in range(repeat)]
    return len(rows) / min(w for w, _ in runs), len(rows) / min(c for _, c in runs)


def best_rate(rows: list[dict], repeat: int, run) -> tuple[float, float]:
    """(wall, CPU) pairs per second of `run(rows)` in this process, best of `repeat`."""
    wall, cpu = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        run(rows)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return len(rows) / min(wall), len(rows) / min(cpu)


def reference(rows: list[dict]) -> None:
    import smatch as ref

    for r in rows:
        ref.match_triple_dict.clear()
        ref.get_amr_match(one_line(r["amr1"]), one_line(r["amr2"]))


def engine(rows: list[dict]) -> None:
    from amrsim.amr.graph import smatch_triples
    from amrsim.metrics.smatch import smatch

    for r in rows:
        smatch(smatch_triples(r["amr1"], "smatch"), smatch_triples(r["amr2"], "smatch"))


def read_set(name: str, limit: int | None) -> list[dict]:
    with gzip.open(DATA / f"bamboo_{name}_main_test.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return rows[:limit] if limit else rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--cli-child":
        one, full, tmp, _dashes, *options = sys.argv[2:]
        cli_child(one, full, tmp, options)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["sts", "sick", "para"], choices=["sts", "sick", "para"])
    ap.add_argument("--limit", type=int, default=None, help="first N pairs of each set")
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs of each measurement")
    ap.add_argument("--no-aspects", action="store_true", help="skip the all-aspects and WWLK runs")
    args = ap.parse_args()
    smatch_only = ("--aspects", "smatch", "--convention", "smatch")
    print("wall: pairs/s by the clock; cpu: pairs per CPU second (one core's worth; the CLI's counts its workers)")
    print("| BAMBOO main test | pairs | clock | smatch 1.0.4 pairs/s | engine pairs/s (x ref) | CLI pairs/s (x ref) "
          "| CLI / engine |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-metrics-cli-") as tmp_dir:
        tmp = Path(tmp_dir)
        for name in args.sets:
            rows = read_set(name, args.limit)
            refs, engs = best_rate(rows, args.repeat, reference), best_rate(rows, args.repeat, engine)
            clis = cli_rate(rows, tmp, name, args.repeat, *smatch_only)
            for clock, ref, eng, cli in zip(("wall", "cpu"), refs, engs, clis, strict=True):
                print(f"| {name} | {len(rows):,} | {clock} | {ref:,.0f} | {eng:,.0f} ({eng / ref:.1f}x) | "
                      f"{cli:,.0f} ({cli / ref:.1f}x) | {cli / eng:.2f} |", flush=True)
        if not args.no_aspects:
            rows = read_set("sts", args.limit)
            every = cli_rate(rows, tmp, "sts-all", args.repeat)
            wwlk = cli_rate(rows, tmp, "sts-wwlk", args.repeat, "--aspects", "wwlk")
            print(f"\nCLI on sts main test ({len(rows):,} pairs), start-up excluded, wall / per CPU second: all "
                  f"default aspects {every[0]:,.0f} / {every[1]:,.0f} pairs/s; WWLK alone {wwlk[0]:,.0f} / "
                  f"{wwlk[1]:,.0f} pairs/s")


if __name__ == "__main__":
    main()
