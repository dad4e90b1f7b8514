"""Where a model trained on STSb gains or loses on SICK-R: the table of docs/methods/pear.md (sixth round).

Scores SICK test with each `--model` (a bi-encoder by its cosine, a cross-encoder such as `pear:<run>` or
`pear_fused:<run>` by its pair scores) and reports Spearman x 100 on all pairs and within each of SICK's entailment
labels, and the mean of (the model's rank of a pair - gold's rank) per label, as a percentage of the pairs: positive
means the model puts that label's pairs higher than SICK-R's relatedness does.

Usage: python benchmarks/pear_sick_by_label.py --models-root W/models --model minilm --model pear:R --model pear_fused:R
       [--file ../shared/data/sick/sick_test.tsv]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import rankdata, spearmanr

from amrsim.evaluate.sts import cosine
from amrsim.methods.loaders import load_encoder
from amrsim.stages.evaluate import is_cross_encoder

LABELS = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")


def scores(model: str, texts1: list[str], texts2: list[str], models_root: Path) -> np.ndarray:
    encoder = load_encoder(model, device="cpu", models_root=models_root)
    if is_cross_encoder(model, models_root):
        return np.asarray(encoder.score(texts1, texts2), np.float64)  # type: ignore[attr-defined]
    return cosine(np.asarray(encoder.encode(texts1)), np.asarray(encoder.encode(texts2)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-root", type=Path, default=Path("warehouse/models"))
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--file", default=str(Path(__file__).resolve().parents[2] / "shared/data/sick/sick_test.tsv"))
    args = ap.parse_args()
    sick = pl.read_csv(args.file, separator="\t", quote_char=None)
    texts1, texts2 = sick["sentence_A"].to_list(), sick["sentence_B"].to_list()
    gold, label = sick["relatedness_score"].to_numpy(), sick["entailment_judgment"].to_numpy()
    gold_rank = rankdata(gold) / len(gold)
    counts = [f"{name.lower()} ({int((label == name).sum()):,})" for name in LABELS]
    print("| model | all | " + " | ".join(counts) + " | rank − gold rank: " + " / ".join(n.lower() for n in LABELS)
          + " |")
    print("|---" * 6 + "|")
    for model in args.model:
        pred = scores(model, texts1, texts2, args.models_root)
        rank = rankdata(pred) / len(pred)
        within = [100 * spearmanr(pred[label == name], gold[label == name])[0] for name in LABELS]
        shift = [100 * float(np.mean(rank[label == name] - gold_rank[label == name])) for name in LABELS]
        print(f"| {model} | {100 * spearmanr(pred, gold)[0]:.2f} | " + " | ".join(f"{x:.2f}" for x in within)
              + " | " + " / ".join(f"{x:+.1f}" for x in shift) + " |")


if __name__ == "__main__":
    main()
