"""Corpus Smatch and one-core throughput of the rule-based `ud` parser on the Little Prince gold AMRs.

DEV = the first 781 sentences (lpp_1943.1 .. lpp_1943.781, where the rules were tuned), TEST = the other 781.
Corpus Smatch: per sentence ``smatch_triples(text, convention="smatch")`` for both graphs and
``amrsim.metrics.smatch.smatch(test, gold)``; F1 = 2 * sum(matched) / (sum(n1) + sum(n2)); a failed parse counts
matched 0, n1 0, n2 = the gold triple count. Throughput: ``UDParser.parse`` over the selected sentences after the
model is loaded (scoring excluded), this process pinned to one core with BLAS/OpenMP threads set to 1.

The parse is timed ``--repeat`` times (default 3) and the median and best are reported: this machine's second core
runs other work, so a single timing varies by +-30 %.

    .venv/bin/python benchmarks/ud_little_prince.py [--split dev|test|all] [--limit N] [--repeat N]
        [--batch-size N] [--dump out.jsonl]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy / spaCy import

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "amr_little_prince" / "little_prince_v3.0.jsonl"
DEV_SIZE = 781


def corpus_smatch(preds: list[str | None], golds: list[str]) -> tuple[float, float, float]:
    """(P, R, F1) over the corpus; a None prediction counts as an empty graph."""
    from amrsim.amr.graph import smatch_triples
    from amrsim.metrics.smatch import smatch

    matched = n1 = n2 = 0
    for pred, gold in zip(preds, golds, strict=True):
        g = smatch_triples(gold, convention="smatch")
        if pred is None:
            n2 += len(g)
            continue
        score = smatch(smatch_triples(pred, convention="smatch"), g)
        matched += score.matched
        n1 += score.n1
        n2 += score.n2
    p = matched / n1 if n1 else 0.0
    r = matched / n2 if n2 else 0.0
    return p, r, (2 * matched / (n1 + n2) if n1 + n2 else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all")
    ap.add_argument("--limit", type=int, default=None, help="only the first N sentences of the split")
    ap.add_argument("--lang", default="en")
    ap.add_argument("--repeat", type=int, default=3, help="time the parse N times; report median and best")
    ap.add_argument("--batch-size", type=int, default=None, help="spaCy batch size (default: UDParser's)")
    ap.add_argument("--dump", type=Path, default=None, help="write id, snt, pred, gold as JSON lines")
    args = ap.parse_args()

    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})

    from amrsim.amr.ud import UDParser

    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    for n, row in enumerate(rows):
        row["split"] = "dev" if n < DEV_SIZE else "test"
    if args.split != "all":
        rows = [r for r in rows if r["split"] == args.split]
    if args.limit is not None:
        rows = rows[: args.limit]

    parser = UDParser(args.lang) if args.batch_size is None else UDParser(args.lang, batch_size=args.batch_size)
    parser.parse(["A warm-up sentence for the model."])
    sentences = [r["snt"] for r in rows]
    timings = []
    for _ in range(max(1, args.repeat)):
        start = time.perf_counter()
        results = parser.parse(sentences)
        timings.append(time.perf_counter() - start)

    preds = [r.penman for r in results]
    failed = [(row["id"], res.error) for row, res in zip(rows, results, strict=True) if res.status != "ok"]
    for split in ("dev", "test", "all"):
        idx = [n for n, r in enumerate(rows) if split == "all" or r["split"] == split]
        if not idx or (args.split != "all" and split != args.split):
            continue
        p, r, f = corpus_smatch([preds[n] for n in idx], [rows[n]["amr"] for n in idx])
        print(f"{split:4s} n={len(idx):4d}  Smatch P {p:.4f}  R {r:.4f}  F1 {f:.4f}")
    print(f"failed rows: {len(failed)}" + "".join(f"\n  {i}: {e}" for i, e in failed[:10]))
    median, best = statistics.median(timings), min(timings)
    print(f"throughput: median {len(sentences) / median:.1f}, best {len(sentences) / best:.1f} sentences/s on one "
          f"core (cpu {cpu}, batch size {parser.batch_size}), {len(sentences)} sentences, "
          f"{len(timings)} runs: " + " ".join(f"{t:.2f}" for t in timings) + " s")
    if args.dump is not None:
        with args.dump.open("w", encoding="utf-8") as f:
            for row, pred in zip(rows, preds, strict=True):
                f.write(json.dumps({"id": row["id"], "snt": row["snt"], "pred": pred, "gold": row["amr"]}) + "\n")


if __name__ == "__main__":
    main()
