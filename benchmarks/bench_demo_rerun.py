"""Benchmark: `amrsim run` (demo pipeline) on a fresh warehouse vs. an unchanged rerun, in one process tree.

Reports wall seconds of four runs and their ratios:
  cold     - fresh warehouse, fresh Prefect state and no saved Prefect database (a first `make run` on a new machine)
  rerun    - the same command again: every stage finds its keys and computes nothing
  new home - fresh warehouse and Prefect home, the saved empty Prefect database copied in (a first run in another
             project on the same machine)
  warm     - fresh warehouse, but Prefect's database already migrated (isolates the pipeline's own work)
Usage: python benchmarks/bench_demo_rerun.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed_run(workdir: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "amrsim.cli", "run"], cwd=workdir, env=env, capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"amrsim run failed:\n{proc.stderr[-3000:]}")
    computed = next((line for line in proc.stdout.splitlines() if "rows computed" in line), "")
    print(f"  {elapsed:6.1f}s  {computed.split(';')[0]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in this directory instead of a temporary one")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="amrsim-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    config = (ROOT / "pipelines.yaml").read_text()
    (work / "pipelines.yaml").write_text(config.replace("warehouse: warehouse", "warehouse: wh"))
    # a cache of its own: no Prefect database template saved by an earlier run (flows/runtime.py)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": str(work / "cache")}
    env.pop("PREFECT_HOME", None)

    print(f"work dir {work}")
    print("cold (fresh warehouse, fresh Prefect state):")
    cold = timed_run(work, env)
    print("rerun (unchanged inputs):")
    rerun = timed_run(work, env)
    subprocess.run(["rm", "-rf", str(work / "wh"), str(work / ".amrsim")], check=True)
    print("new home (fresh warehouse and Prefect home, the saved Prefect database copied in):")
    new_home = timed_run(work, env)
    subprocess.run(["rm", "-rf", str(work / "wh")], check=True)
    print("warm (fresh warehouse, Prefect state kept):")
    warm = timed_run(work, env)
    print(f"\ncold / rerun = {cold / rerun:.2f}x   new home / rerun = {new_home / rerun:.2f}x   "
          f"warm / rerun = {warm / rerun:.2f}x")


if __name__ == "__main__":
    main()
