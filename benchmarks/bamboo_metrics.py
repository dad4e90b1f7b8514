"""BAMBOO: every metric aspect vs human scores, robustness sets, and the suite's throughput on both cores.

Prints markdown tables:
  1. Pearson / Spearman x 100 of each aspect vs the human score on main test (sts, sick, para) and on the reify and
     synonym sets;
  2. robustness: share of reify / synonym pairs whose score equals the main pair's, and share of role-confusion
     groups where the role-swapped pair scores strictly lower;
  3. pairs/s of all aspects together on bamboo_sts_main_test with 1 and 2 processes: cold (the call starts its
     worker processes, which import and load vectors) and warm (a pool already started, as a long-lived batch job).
Usage: python benchmarks/bamboo_metrics.py [--data ../shared/data/amr_bamboo] [--vectors minilm] [--limit N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import pearsonr, spearmanr

from amrsim.metrics.engine import (
    ALL_ASPECTS,
    MetricsOptions,
    aspect_columns,
    score_pairs,
    score_pairs_parallel,
    worker_pool,
)

ROOT = Path(__file__).resolve().parent.parent


def load(path: Path, limit: int | None) -> pl.DataFrame:
    rows = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    frame = pl.DataFrame([{k: str(v) for k, v in r.items()} for r in rows[:limit]])
    return frame


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "amr_bamboo")
    ap.add_argument("--vectors", default="minilm")
    ap.add_argument("--convention", default="amr")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    options = MetricsOptions(aspects=ALL_ASPECTS, vectors=args.vectors, convention=args.convention)
    cols = aspect_columns(ALL_ASPECTS)

    scored: dict[tuple[str, str], pl.DataFrame] = {}
    pool = worker_pool(args.workers, options)
    for task in ("sts", "sick", "para"):
        for subset in ("main", "reify", "syno", "role_confusion"):
            frame = load(args.data / f"bamboo_{task}_{subset}_test.jsonl.gz", args.limit)
            t0 = time.perf_counter()
            scored[task, subset] = score_pairs_parallel(frame, options, pool=pool)
            rate = frame.height / (time.perf_counter() - t0)
            failed = scored[task, subset].filter(pl.col("status") != "ok").height
            print(f"scored {task}/{subset}: {frame.height} pairs, {failed} failed, {rate:.0f} pairs/s "
                  f"({args.workers} processes)", flush=True)

    print(f"\n## Pearson / Spearman x 100 vs human (vectors={args.vectors}, convention={args.convention})\n")
    sets = [(t, s) for s in ("main", "reify", "syno") for t in ("sts", "sick", "para")]
    print("| aspect | " + " | ".join(f"{t} {s}" for t, s in sets) + " |")
    print("|---|" + "---|" * len(sets))
    for col in cols:
        cells = []
        for key in sets:
            f = scored[key].filter(pl.col("status") == "ok")
            x, y = f[col].to_numpy(), f["gold"].cast(pl.Float64).to_numpy()
            if np.std(x) == 0:
                cells.append("const")
                continue
            cells.append(f"{pearsonr(x, y)[0] * 100:.2f} / {spearmanr(x, y)[0] * 100:.2f}")
        print(f"| {col} | " + " | ".join(cells) + " |")

    print("\n## Robustness: reify / synonym keep the main score; role confusion scores below the original\n")
    heads = [f"{t} {s}" for s in ("reify", "syno", "role") for t in ("sts", "sick", "para")]
    print("| aspect | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for col in cols:
        cells = []
        for subset in ("reify", "syno"):
            for task in ("sts", "sick", "para"):
                main, var = scored[task, "main"][col].to_numpy(), scored[task, subset][col].to_numpy()
                ok = ~(np.isnan(main) | np.isnan(var))
                cells.append(f"{np.mean(np.abs(main[ok] - var[ok]) < 1e-9) * 100:.1f}")
        for task in ("sts", "sick", "para"):
            f = scored[task, "role_confusion"].select("pair_group", "label", col)
            wide = f.pivot(on="label", index="pair_group", values=col, aggregate_function="first").drop_nulls()
            cells.append(f"{(wide['0'] < wide['1']).mean() * 100:.1f}")
        print(f"| {col} | " + " | ".join(cells) + " |")

    frame = load(args.data / "bamboo_sts_main_test.jsonl.gz", args.limit)
    print("\n## Throughput, all aspects, bamboo_sts_main_test\n")
    pool.shutdown()
    print("| processes | cold pairs/s | warm pairs/s |\n|---|---|---|")
    for workers in (1, 2):
        t0 = time.perf_counter()
        score_pairs_parallel(frame, options, workers=workers)  # one process: in this one, imports already paid
        cold = frame.height / (time.perf_counter() - t0)
        if workers == 1:
            t0 = time.perf_counter()
            score_pairs(frame, options)
            warm = frame.height / (time.perf_counter() - t0)
        else:
            with worker_pool(workers, options) as warm_pool:
                score_pairs_parallel(frame.head(256 * workers), options, pool=warm_pool)  # workers started
                t0 = time.perf_counter()
                score_pairs_parallel(frame, options, pool=warm_pool)
                warm = frame.height / (time.perf_counter() - t0)
        print(f"| {workers} | {cold:.0f} | {warm:.0f} |")


if __name__ == "__main__":
    main()
