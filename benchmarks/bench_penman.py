"""PENMAN reading: the Python path (amrsim's tokenizer + ``penman.decode``) vs the C reader, on every BAMBOO graph.

Times, in one process and alternating rounds, ``amrsim.amr.graph.parse`` as it was (``read_surface`` +
``penman.decode``) against ``parse`` now (the C reader + ``penman.Graph``), and the surface-only reads behind
``smatch_triples(text)``. Reports the best round of each and the ratio.

    .venv/bin/python benchmarks/bench_penman.py [--data ../shared/data/amr_bamboo] [--rounds 3] [--limit N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path

import penman

from amrsim.amr.graph import AMRError, parse, read_surface, surface_of

ROOT = Path(__file__).resolve().parent.parent


def bamboo_graphs(data: Path, limit: int | None) -> list[str]:
    """Both sides of every pair in every BAMBOO file, duplicates kept (as a metrics run reads them)."""
    texts: list[str] = []
    for path in sorted(data.glob("bamboo_*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                texts += [row["amr1"], row["amr2"]]
    return texts[:limit] if limit else texts


def python_path(text: str) -> None:
    read_surface(text)
    penman.decode(text)


def timed(fn: Callable[[str], object], texts: list[str]) -> tuple[float, int]:
    failed = 0
    t0 = time.perf_counter()
    for text in texts:
        try:
            fn(text)
        except AMRError:
            failed += 1
    return time.perf_counter() - t0, failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "amr_bamboo")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    texts = bamboo_graphs(args.data, args.limit)
    if not texts:
        raise SystemExit(f"no BAMBOO graphs under {args.data}")
    contenders = {"parse: Python path (tokenizer + penman.decode)": python_path, "parse: C reader": parse,
                  "surface only: Python tokenizer": read_surface, "surface only: C reader": surface_of}
    best = dict.fromkeys(contenders, float("inf"))
    failed = {}
    for _ in range(args.rounds):
        for name, fn in contenders.items():
            seconds, failed[name] = timed(fn, texts)
            best[name] = min(best[name], seconds)
    print(f"{len(texts)} graphs ({len(set(texts))} distinct), best of {args.rounds} rounds")
    print("| reader | seconds | graphs/s | failed | ratio |\n|---|---|---|---|---|")
    names = list(contenders)
    for i, name in enumerate(names):
        ratio = best[names[i - i % 2]] / best[name]
        print(f"| {name} | {best[name]:.2f} | {len(texts) / best[name]:,.0f} | {failed[name]} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
