"""Benchmark: start-up of an unchanged `amrsim run` (every stage computes nothing), the CLI's own temporary Prefect
server vs. Prefect's ephemeral server, in one process tree.

  amrsim run   - `python -m amrsim.cli run`: the server is started first and boots while Prefect is imported
  ephemeral    - the same flow with the same settings, called the way `amrsim run` called it before it started its
                 own server: Prefect starts its ephemeral server on the flow's first API call
The two alternate, after one warm-up run that builds the tables; medians of --repeat runs and their ratio.
Usage: python benchmarks/bench_run_startup.py [--repeat 3] [--pairs 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amrsim.synthetic import pipeline_yaml, write_pairs  # noqa: E402

# `amrsim run` before it owned its server: the CLI's Prefect settings, then the flow; Prefect starts the server
EPHEMERAL = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from amrsim.cli.common import prefect_env
    from amrsim.config import load_config

    cfg = load_config("pipelines.yaml")
    name, _ = cfg.pipeline(None)
    prefect_env(cfg.run_dir)
    os.environ.pop("PREFECT_API_URL", None)
    from flows.demo import demo

    out = demo(name, str(cfg.path), None)
    print(sum(int(s["computed"]) for s in out["stages"]), "rows computed")
""")


def timed(cmd: list[str], workdir: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0 or "0 rows computed" not in proc.stdout:
        sys.exit(f"{cmd[:4]} failed or computed rows:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="amrsim-bench-startup-"))
    write_pairs(work / "pairs.tsv", 0, args.pairs)
    (work / "pipelines.yaml").write_text(pipeline_yaml(work / "pairs.tsv"))
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env |= {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "amrsim.cli", "run"]
    ephemeral = [sys.executable, "-c", EPHEMERAL]
    print(f"work dir {work}")
    first = subprocess.run(cli, cwd=work, env=env, capture_output=True, text=True)  # builds the tables
    if first.returncode != 0:
        sys.exit(f"warm-up run failed:\n{first.stderr[-3000:]}")
    ours, theirs = [], []
    for i in range(args.repeat):
        ours.append(timed(cli, work, env))
        theirs.append(timed(ephemeral, work, env))
        print(f"  round {i + 1}: amrsim run {ours[-1]:6.2f}s   ephemeral {theirs[-1]:6.2f}s")
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"\nmedian: amrsim run {a:.2f}s, ephemeral {b:.2f}s; ephemeral / amrsim run = {b / a:.2f}x")


if __name__ == "__main__":
    main()
