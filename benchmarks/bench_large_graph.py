"""A pair of large AMR graphs (a random tree of --nodes nodes, ten concepts repeated throughout): every aspect through
the engine, and each Smatch-family search with this tree's `_smatch_core` against a baseline built from the source at
--baseline (a git revision) in the same run, as a ratio. A baseline search that runs past --old-limit seconds is
stopped and reported as more than that.

    .venv/bin/python benchmarks/bench_large_graph.py [--nodes 5000] [--baseline 87e6b24] [--old-limit 300]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.metrics: the pair's generator
ROLES = ("ARG0", "ARG1", "ARG2", "mod", "location", "quant")
FAMILY = ("triples", "unlabeled", "no_wsd", "reentrancies", "srl")  # GraphView's names (triples: smatch)


def build_baseline(rev: str, tmp: Path) -> Path:
    """The baseline's `_smatch_core` built from `git show rev:...` into tmp (same flags as pyproject.toml)."""
    src = tmp / "_smatch_core.c"
    src.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:amrsim/metrics/_smatch_core.c"],
                                  check=True, capture_output=True, text=True).stdout)
    so = tmp / ("_smatch_core" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-pthread", f"-I{sysconfig.get_paths()['include']}",
                    f"-I{ROOT / 'amrsim' / 'amr'}", str(src), "-o", str(so)], check=True)
    return so


def search(so: str | None, text1: str, text2: str, name: str, queue) -> None:
    """One search (in a child process): this tree's module, or the baseline's .so; puts (seconds, f1, optimal)."""
    from amrsim.metrics.aspects import GraphView
    from amrsim.metrics.smatch import DEFAULT_NODE_BUDGET, DEFAULT_WORK_BUDGET, Labels, encode_graph

    core = None
    if so is None:
        from amrsim.metrics import _smatch_core as core
    else:
        import importlib.util

        spec = importlib.util.spec_from_file_location("baseline._smatch_core", so)
        core = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(core)
    t1, t2 = getattr(GraphView.read(text1), name), getattr(GraphView.read(text2), name)
    if not t1.variables or not t2.variables:  # (a tree has no reentrancies)
        queue.put(None)
        return
    labels = Labels()
    e1, e2 = encode_graph(t1, labels), encode_graph(t2, labels)
    t0 = time.perf_counter()
    matched, optimal, _, _ = core.align_encoded(e1.data, e2.data, 0, 4, DEFAULT_NODE_BUDGET, DEFAULT_WORK_BUDGET)
    seconds = time.perf_counter() - t0
    p, r = matched / e1.triples, matched / e2.triples
    queue.put((seconds, 2 * p * r / (p + r) if p + r else 0.0, bool(optimal)))


def timed(so, text1, text2, name, limit):
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=search, args=(so, text1, text2, name, q))
    proc.start()
    proc.join(limit)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return None
    return q.get()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--baseline", default="87e6b24", help="git revision of the code before (its _smatch_core.c)")
    ap.add_argument("--old-limit", type=float, default=300.0)
    args = ap.parse_args()
    from tests.metrics.test_large_graphs import tree

    text1, text2 = tree(args.nodes, 1, ROLES), tree(args.nodes, 2, ROLES)
    print(f"{args.nodes}-node pair: Smatch-family searches (tables built and searched; encoding excluded)")
    with tempfile.TemporaryDirectory() as tmp:
        so = str(build_baseline(args.baseline, Path(tmp)))
        for name in FAMILY:
            new = timed(None, text1, text2, name, 600)
            if new is None:
                print(f"  {name:13s} (no such structure)")
                continue
            old = timed(so, text1, text2, name, args.old_limit)
            old_s = f"> {args.old_limit:.0f} s" if old is None else f"{old[0]:.1f} s (F1 {old[1]:.4f})"
            ratio = f"> {args.old_limit / new[0]:.0f}x" if old is None else f"{old[0] / new[0]:.1f}x"
            print(f"  {name:13s} before {old_s:>24s}  after {new[0]:5.1f} s (F1 {new[1]:.4f})  {ratio} faster")
    # every aspect through the engine (one pair, in this process), random vectors (no model load)
    from amrsim.metrics.engine import ALL_ASPECTS, MetricsOptions, _score_columns

    print("every aspect through the engine, this tree:")
    total = 0.0
    for aspect in ALL_ASPECTS:
        t0 = time.perf_counter()
        row = _score_columns([text1], [text2], MetricsOptions(aspects=(aspect,), vectors="random")).to_dicts()[0]
        seconds = time.perf_counter() - t0
        total += seconds
        print(f"  {aspect:18s} {seconds:6.2f} s  {row['status']}  bounded={row['bounded']}")
    print(f"  all aspects, one at a time: {total:.1f} s")
    print(json.dumps({"nodes": args.nodes, "engine_seconds_all_aspects": round(total, 1)}))


if __name__ == "__main__":
    main()
