"""Load: refresh a dataset of N synthetic sentence pairs with provided graphs through ingest and the metrics stage,
then an incremental refresh that adds 1% new pairs.

Each phase runs in its own process so its peak RSS is its own (ru_maxrss of the process; metric workers are its
children and reported apart). The metrics stage streams the pairs/amr join out of DuckDB in chunks of
`--commit-rows`, so its peak RSS should not grow with N: run it at two sizes and compare.

    python benchmarks/bench_load.py --pairs 1000000 --pairs 100000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amrsim.synthetic import pipeline_yaml, write_pairs  # noqa: E402


def phase(work: Path, name: str, workers: int) -> dict[str, object]:
    """Run one phase (ingest or metrics) of the refresh in this process; returns counts, seconds, peak RSS."""
    from amrsim.config import load_config
    from amrsim.metrics.engine import PairScorer
    from amrsim.stages import metrics_stage
    from amrsim.stages.ingest import ingest_stage
    from amrsim.warehouse import Warehouse

    cfg = load_config(work / "pipelines.yaml")
    wh = Warehouse(cfg.warehouse_root)
    t0 = time.perf_counter()
    workers_peak = 0.0
    if name == "ingest":
        run = ingest_stage(cfg.section("load"), "synthetic", "bench")
    else:
        m = cfg.project.pipelines["load"].metrics
        assert m is not None
        options = m.options()
        # as the metrics task runs the stage without Ray: one scorer, its pool (if it pays off) shared by all chunks
        with PairScorer(options, workers=workers or None) as scorer:
            run = metrics_stage(wh, "load", "synthetic", options, "bench", scorer, m.commit_rows)
            pool = scorer._pool
            workers_peak = max((_peak_rss_mib(pid) for pid in (pool._processes if pool else {})), default=0.0)
    seconds = time.perf_counter() - t0
    return {"phase": name, "rows_in": run.rows_in, "computed": run.rows_computed, "failed": run.rows_failed,
            "seconds": round(seconds, 2),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "workers_peak_rss_mib": round(workers_peak, 1)}


def _peak_rss_mib(pid: int) -> float:
    """A live process's peak RSS (VmHWM; exec starts it afresh, unlike ru_maxrss, which a forked child inherits)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_phase(work: Path, name: str, workers: int) -> dict[str, object]:
    out = subprocess.run([sys.executable, __file__, "--phase", name, "--work", str(work), "--workers", str(workers)],
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"phase {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cpu_rate(n: int, aspects: list[str], seed: int) -> float:
    """Pairs per CPU second of the engine on n synthetic pairs in this process (start-up excluded): the rate the
    stage reaches on cores no other job takes."""
    import random

    from amrsim.metrics.engine import MetricsOptions, _score_columns
    from amrsim.synthetic import synthetic_graph

    rng = random.Random(seed)
    pairs = [(synthetic_graph(rng), synthetic_graph(rng)) for _ in range(n)]
    options = MetricsOptions(aspects=tuple(aspects))
    _score_columns([pairs[0][0]], [pairs[0][1]], options)  # imports, node vectors
    t0 = time.process_time()
    _score_columns([a for a, _ in pairs], [b for _, b in pairs], options)
    return n / (time.process_time() - t0)


def bench_size(n: int, args: argparse.Namespace) -> list[dict[str, object]]:
    work = Path(tempfile.mkdtemp(prefix=f"amrsim-load-{n}-", dir=args.tmp))
    data = work / "pairs.tsv"
    t0 = time.perf_counter()
    write_pairs(data, 0, n, args.seed)
    print(f"[{n}] wrote {n} pairs in {time.perf_counter() - t0:.1f}s -> {data}", file=sys.stderr)
    (work / "pipelines.yaml").write_text(pipeline_yaml(data, args.aspects, args.commit_rows))
    rows = []
    steps = [("full", 0)] + ([] if args.full_only else [("incremental", int(n * args.new_fraction))])
    for step, n_new in steps:
        if n_new:
            write_pairs(data, n, n_new, args.seed)
        for name in ("ingest", "metrics"):
            r = run_phase(work, name, args.workers) | {"pairs": n, "refresh": step, "new_pairs": n_new}
            print(json.dumps(r), file=sys.stderr)
            rows.append(r)
    if not args.keep:
        import shutil

        shutil.rmtree(work)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, action="append", help="dataset sizes (repeat); default 1000000")
    ap.add_argument("--new-fraction", type=float, default=0.01)
    ap.add_argument("--aspects", nargs="+", default=["smatch", "concepts", "negation", "named_entities"],
                    help="engine aspects, or `s3bert` for S3BERT's 15")
    ap.add_argument("--commit-rows", type=int, default=20_000)
    ap.add_argument("--workers", type=int, default=2, help="metric worker processes; 0: chosen as the pipeline does")
    ap.add_argument("--project", type=int, default=0, help="also print the metrics phase extrapolated to N pairs, "
                    "from its wall time and from the engine's CPU rate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", default=None, help="where the synthetic data and warehouse go (default: system tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--full-only", action="store_true", help="only the full refresh (a memory point at a larger size)")
    ap.add_argument("--phase", choices=["ingest", "metrics"], help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.aspects == ["s3bert"]:
        from amrsim.metrics.aspects import S3BERT_ASPECTS

        args.aspects = [c.removesuffix("_f1") for c in S3BERT_ASPECTS.values()]
    if args.phase:
        print(json.dumps(phase(Path(args.work), args.phase, args.workers)))
        return
    if args.project:
        rate = cpu_rate(2000, args.aspects, args.seed)
        print(f"engine, {len(args.aspects)} aspects, 2,000 synthetic pairs: {rate:,.0f} pairs per CPU second -> "
              f"{args.project:,} pairs in {args.project / rate / 2 / 3600:.2f} h on 2 idle cores")
    rows = [r for n in (args.pairs or [1_000_000]) for r in bench_size(n, args)]
    print("| pairs | refresh | phase | rows in | computed | seconds | pairs/s | peak RSS MiB | workers' peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rate = float(r["computed"]) / float(r["seconds"]) if r["computed"] else 0.0  # type: ignore[arg-type]
        print(f"| {r['pairs']:,} | {r['refresh']} (+{r['new_pairs']:,}) | {r['phase']} | {r['rows_in']:,} | "
              f"{r['computed']:,} | {r['seconds']} | {rate:,.0f} | {r['peak_rss_mib']} | {r['workers_peak_rss_mib']} |")
    for r in rows:
        if args.project and r["phase"] == "metrics" and r["refresh"] == "full" and r["computed"]:
            hours = args.project * float(r["seconds"]) / float(r["computed"]) / 3600  # type: ignore[arg-type]
            print(f"metrics stage, {len(args.aspects)} aspects: {r['computed']:,} pairs in {r['seconds']} s -> "
                  f"{args.project:,} pairs in {hours:.2f} h at this rate")
    for n in sorted({int(r["pairs"]) for r in rows}):  # type: ignore[call-overload]
        full = sum(float(r["seconds"]) for r in rows if r["pairs"] == n and r["refresh"] == "full")  # type: ignore
        inc = sum(float(r["seconds"]) for r in rows if r["pairs"] == n and r["refresh"] == "incremental")  # type: ignore
        if not inc:
            continue
        print(f"{n:,} pairs: full refresh {full:.1f}s, incremental (+{args.new_fraction:.0%}) {inc:.1f}s, "
              f"ratio {full / inc:.1f}x")


if __name__ == "__main__":
    main()
