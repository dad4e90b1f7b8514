"""Smatch: ours vs the reference smatch 1.0.4 on BAMBOO main test pairs, one process pinned to one core.

Reference as BASELINES.md: metadata dropped, one-line PENMAN, ``smatch.match_triple_dict.clear()`` before each pair,
default 4 restarts + smart init. Ours: ``smatch_triples(text, convention)`` for both graphs + ``smatch(...)``, timed
end to end from the same strings (the "scoring only" column times ``smatch`` on pre-built triples).

    .venv/bin/python benchmarks/bench_smatch.py [--sets sts sick para] [--limit N] [--seed 0]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from pathlib import Path

from scipy.stats import pearsonr, spearmanr

from amrsim.amr.graph import smatch_triples
from amrsim.metrics.smatch import DEFAULT_WORK_BUDGET, has_duplicates, smatch

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "amr_bamboo"


def one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if not line.strip().startswith("#"))


def corr(xs: list[float], gold: list[float]) -> str:
    return f"pe {100 * pearsonr(xs, gold)[0]:.2f} sp {100 * spearmanr(xs, gold)[0]:.2f}"


def run_set(name: str, limit: int | None, seed: int) -> None:
    import smatch as ref

    path = DATA / f"bamboo_{name}_main_test.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    rows = rows[:limit] if limit else rows
    gold = [float(r["gold"]) for r in rows]

    lines = [(one_line(r["amr1"]), one_line(r["amr2"])) for r in rows]
    t0 = time.perf_counter()
    ref_out = []
    for a, b in lines:
        ref.match_triple_dict.clear()
        ref_out.append(ref.get_amr_match(a, b))
    t_ref = time.perf_counter() - t0

    t0 = time.perf_counter()
    ours = [smatch(smatch_triples(r["amr1"], "smatch"), smatch_triples(r["amr2"], "smatch"), seed=seed)
            for r in rows]
    t_ours = time.perf_counter() - t0

    triples = [(smatch_triples(r["amr1"], "smatch"), smatch_triples(r["amr2"], "smatch")) for r in rows]
    t0 = time.perf_counter()
    for t1, t2 in triples:
        smatch(t1, t2, seed=seed)
    t_score = time.perf_counter() - t0

    amr = [smatch(smatch_triples(r["amr1"], "amr"), smatch_triples(r["amr2"], "amr"), seed=seed) for r in rows]

    higher = [r["idx"] for r, (m, _, _), o in zip(rows, ref_out, ours, strict=True) if o.matched > m]
    lower = [(r["idx"], has_duplicates(t1) or has_duplicates(t2))
             for r, (m, _, _), o, (t1, t2) in zip(rows, ref_out, ours, triples, strict=True) if o.matched < m]
    size_mismatch = sum((o.n1, o.n2) != (n1, n2) for (_, n1, n2), o in zip(ref_out, ours, strict=True))
    ref_f1 = [2 * m / (n1 + n2) if n1 and n2 else 0.0 for m, n1, n2 in ref_out]
    n = len(rows)
    print(f"== {name}: {n} pairs")
    print(f"  pairs/s  reference {n / t_ref:9.0f}   ours {n / t_ours:9.0f}   ratio {t_ref / t_ours:6.1f}x"
          f"   (ours scoring only {n / t_score:.0f}/s, {t_ref / t_score:.1f}x)")
    print(f"  matched  ours > reference: {len(higher)}   ours < reference: {len(lower)}"
          f" (all with duplicated triples: {all(d for _, d in lower)}; idx {[i for i, _ in lower]})"
          f"   triple-count mismatches: {size_mismatch}")
    gains = [o.f1 - f for o, f in zip(ours, ref_f1, strict=True) if o.f1 > f]
    print(f"  exact search beats the reference on {100 * len(higher) / n:.1f}% of pairs,"
          f" max F1 gain {max(gains, default=0.0):+.3f}")
    worst = max(ours + amr, key=lambda o: o.work)
    print(f"  work     most expensive pair {worst.work:,} = {100 * worst.work / DEFAULT_WORK_BUDGET:.2f}% of the"
          f" default budget")
    print(f"  optimal  smatch convention {sum(o.optimal for o in ours)}/{n}, amr convention"
          f" {sum(o.optimal for o in amr)}/{n}")
    print(f"  vs human reference smatch 1.0.4: {corr(ref_f1, gold)}")
    print(f"           ours, convention smatch: {corr([o.f1 for o in ours], gold)}")
    print(f"           ours, convention amr:    {corr([o.f1 for o in amr], gold)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["sts", "sick", "para"], choices=["sts", "sick", "para"])
    ap.add_argument("--limit", type=int, default=None, help="first N pairs of each set")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    for name in args.sets:
        run_set(name, args.limit, args.seed)


if __name__ == "__main__":
    main()
