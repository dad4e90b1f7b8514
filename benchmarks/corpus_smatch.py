"""Corpus Smatch: `amrsim metrics corpus` vs smatch 1.0.4's corpus score on the same (test, gold) pairs.

The pairs file is JSONL with a test and a gold graph column, e.g. the `ud` parser's Little Prince output from
``benchmarks/ud_little_prince.py --dump parsed.jsonl`` (columns pred, gold). smatch 1.0.4 as its own command line
counts a corpus: match counts summed over pairs (one-line PENMAN, metadata dropped, ``match_triple_dict`` cleared
per pair, default restarts), F1 = 2 * matched / (test + gold); an unreadable test graph counts as empty, as ours.

    .venv/bin/python benchmarks/corpus_smatch.py parsed.jsonl [--test-col pred] [--gold-col gold] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if not line.strip().startswith("#"))


def reference_corpus(pairs: list[tuple[str | None, str]]) -> tuple[float, float, float]:
    import smatch as ref

    from amrsim.amr.graph import smatch_triples

    matched = n1 = n2 = 0
    for test, gold in pairs:
        ref.match_triple_dict.clear()
        if not test:
            n2 += len(smatch_triples(gold, "smatch"))
            continue
        m, t, g = ref.get_amr_match(one_line(test), one_line(gold))
        matched, n1, n2 = matched + m, n1 + t, n2 + g
    p, r = matched / n1 if n1 else 0.0, matched / n2 if n2 else 0.0
    return p, r, 2 * matched / (n1 + n2) if n1 + n2 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path)
    ap.add_argument("--test-col", default="pred")
    ap.add_argument("--gold-col", default="gold")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.file.read_text(encoding="utf-8").splitlines() if line.strip()]
    t0 = time.perf_counter()
    ours = subprocess.run([sys.executable, "-m", "amrsim.cli", "metrics", "corpus", "--file", str(args.file),
                           "--test-col", args.test_col, "--gold-col", args.gold_col, "--seed", str(args.seed)],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    p, r, f = reference_corpus([(row[args.test_col], row[args.gold_col]) for row in rows])
    t_ref = time.perf_counter() - t0
    print(f"{len(rows)} pairs from {args.file}")
    print(f"amrsim metrics corpus ({t_ours:.1f} s, start-up included):\n  " + ours.stdout.strip().replace("\n", "\n  "))
    print(f"smatch 1.0.4 ({t_ref:.1f} s): P {p:.4f}  R {r:.4f}  F1 {f:.4f}")


if __name__ == "__main__":
    main()
