"""WLK / WWLK on BAMBOO: single-core pairs/s, Pearson/Spearman x100 vs human, and robustness.

    .venv/bin/python benchmarks/bench_wlk.py [--tasks sts sick para] [--limit N] [--stability 15] [--no-robustness]

Main sets: pairs/s (parse + score, vectors loaded beforehand) and Pearson (Spearman) x 100 against the gold score.
reify / syno (meaning-preserving rewrites): Pearson x 100 and the share of pairs whose score equals the main-set score.
role_confusion: share of groups where the role-swapped graph (label 0) scores strictly below the original (label 1).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # one core: the figures are per process
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scipy.stats import pearsonr, spearmanr  # noqa: E402

from amrsim.metrics import wlk as W  # noqa: E402
from amrsim.metrics.vectors import load_node_vectors  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "amr_bamboo"


def read(task: str, subset: str, limit: int | None) -> list[dict]:
    with gzip.open(DATA / f"bamboo_{task}_{subset}_test.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    return rows[:limit] if limit else rows


def score(metric, rows: list[dict]) -> tuple[list[float], float]:
    W._CACHE = W._GraphCache()  # parse every graph again: rates include reading
    t0 = time.perf_counter()
    s = metric([(r["amr1"], r["amr2"]) for r in rows])
    return s, len(rows) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="+", default=["sts", "sick", "para"])
    ap.add_argument("--limit", type=int, default=None, help="first N pairs of each set")
    ap.add_argument("--stability", type=int, default=15)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-robustness", action="store_true")
    args = ap.parse_args()
    if not DATA.is_dir():
        sys.exit(f"{DATA} is absent")

    vectors = {name: load_node_vectors(name, seed=args.seed) for name in ("minilm", "random")}
    vectors["minilm"].vector("dog")  # load the model and POT (2 s of imports) outside the timings
    W.wwlk("(a / dog)", "(b / cat)", vectors["random"], stability_level=0)
    metrics = {
        "WLK": lambda pairs: W.wlk_batch(pairs, k=args.k),
        **{
            f"WWLK-{name}": (
                lambda pairs, v=v: W.wwlk_batch(pairs, v, k=args.k, stability_level=args.stability, seed=args.seed)
            )
            for name, v in vectors.items()
        },
    }
    print(f"k={args.k} stability_level={args.stability} seed={args.seed} single core; pe (sp) x100 vs gold")
    print(f"{'set':<6}{'metric':<13}{'pairs':>6}{'pairs/s':>9}{'pe':>8}{'sp':>8}")
    for task in args.tasks:
        main_rows = read(task, "main", args.limit)
        gold = [r["gold_norm"] for r in main_rows]
        main_scores = {}
        for name, metric in metrics.items():
            s, rate = score(metric, main_rows)
            main_scores[name] = s
            print(
                f"{task:<6}{name:<13}{len(s):>6}{rate:>9.0f}{100 * pearsonr(s, gold)[0]:>8.2f}"
                f"{100 * spearmanr(s, gold)[0]:>8.2f}",
                flush=True,
            )
        if args.no_robustness:
            continue
        for subset in ("reify", "syno"):
            rows = read(task, subset, args.limit)
            by_idx = {r["idx"]: i for i, r in enumerate(main_rows)}
            for name, metric in metrics.items():
                s, _ = score(metric, rows)
                kept = [
                    abs(x - main_scores[name][by_idx[r["idx"]]]) < 1e-9
                    for x, r in zip(s, rows, strict=True)
                    if r["idx"] in by_idx
                ]
                pe = 100 * pearsonr(s, [r["gold_norm"] for r in rows])[0]
                print(
                    f"{task:<6}{name:<13}{subset}: pe {pe:.2f}, score kept {100 * sum(kept) / len(kept):.2f}% "
                    f"of {len(kept)} pairs",
                    flush=True,
                )
        rows = read(task, "role_confusion", None)
        for name, metric in metrics.items():
            s, _ = score(metric, rows)
            groups: dict[int, dict[int, float]] = defaultdict(dict)
            for x, r in zip(s, rows, strict=True):
                groups[r["pair_group"]][r["label"]] = x
            full = [g for g in groups.values() if 0 in g and 1 in g]
            acc = 100 * sum(g[0] < g[1] for g in full) / len(full)
            print(
                f"{task:<6}{name:<13}role_confusion: swapped scores lower in {acc:.2f}% of {len(full)} groups",
                flush=True,
            )


if __name__ == "__main__":
    main()
