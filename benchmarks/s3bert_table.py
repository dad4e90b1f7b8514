"""S3BERT's Table 1 on held-out BAMBOO pairs: Spearman x 100 of each aspect's similarity vs the AMR metric.

Rows, per aspect (amr_metrics column) of `--dataset` (default bamboo_sts_test, the `bamboo` pipeline's metrics):
  SB-full   the base encoder's whole-embedding cosine (no decomposition);
  random    the base encoder's embedding, dimensions permuted at random (seeded) and cut into the trained model's
            layout: what a partition gives without training;
  S3BERT    the trained model's sub-embedding cosine for that aspect;
and the gain of S3BERT over SB-full. Also the overall STS Spearman of base and trained model on --sts datasets
(warehouse pairs datasets, e.g. stsb_en_test and sick_test from the `benchmarks` pipeline). Embeddings come from
and go to the warehouse cache.

Usage: python benchmarks/s3bert_table.py [--model s3bert:latest] [--base minilm] [--dataset bamboo_sts_test]
       [--sts stsb_en_test --sts sick_test] [--warehouse warehouse]
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl

from amrsim.encoders import find_trained
from amrsim.encoders.cache import embed_sentences, read_embeddings
from amrsim.evaluate.aspects import aspect_scores
from amrsim.evaluate.sts import correlations, cosine
from amrsim.stages.evaluate.aspects import aspect_slices
from amrsim.stages.evaluate.sts import select_pairs
from amrsim.warehouse import Warehouse
from amrsim.warehouse.store import OK


def vectors(wh: Warehouse, dataset: str, encoder: str, keys1: list[str], keys2: list[str]) -> tuple[np.ndarray, ...]:
    sentences = wh.read(dataset, "sentences", columns=["key", "text"])
    needed = pl.DataFrame({"key": keys1 + keys2}).unique()
    embed_sentences(wh, dataset, encoder, sentences.join(needed, on="key", how="semi"))
    both = read_embeddings(wh, dataset, encoder, keys1 + keys2)
    return both[: len(keys1)], both[len(keys1):]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="s3bert:latest")
    ap.add_argument("--base", default="minilm")
    ap.add_argument("--dataset", default="bamboo_sts_test")
    ap.add_argument("--sts", action="append", default=None)
    ap.add_argument("--warehouse", default="warehouse")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    wh = Warehouse(args.warehouse)
    trained = find_trained(args.model, wh.models_root)
    slices = aspect_slices(args.model, wh.models_root)

    metrics = wh.read(args.dataset, "amr_metrics").filter(pl.col("status") == OK)
    metrics = metrics.unique(["sentence1_key", "sentence2_key"], keep="first", maintain_order=True)
    k1, k2 = metrics["sentence1_key"].to_list(), metrics["sentence2_key"].to_list()
    aspects = list(slices)
    base1, base2 = vectors(wh, args.dataset, args.base, k1, k2)
    perm = np.random.default_rng(args.seed).permutation(base1.shape[1])
    rows = {
        "SB-full": aspect_scores(args.base, args.dataset, "test", metrics, base1, base2, {}, aspects),
        "random": aspect_scores(args.base, args.dataset, "test", metrics, base1[:, perm], base2[:, perm], slices,
                                aspects),
        "S3BERT": aspect_scores(args.model, args.dataset, "test", metrics,
                                *vectors(wh, args.dataset, args.model, k1, k2), slices, aspects),
    }
    table = {name: {s.lang_pair: s.value for s in scores} for name, scores in rows.items()}
    print(f"{args.model} = {trained.run_id}; {metrics.height} pairs of {args.dataset}; Spearman x 100\n")
    print("| aspect | SB-full | random partition | S3BERT | S3BERT - SB-full |")
    print("|---|---|---|---|---|")

    def fmt(v: float | None) -> str:
        return "undef." if v is None else f"{v:.2f}"  # scores are x 100 already

    for a in aspects:
        full, rand, s3 = table["SB-full"].get(a), table["random"].get(a), table["S3BERT"].get(a)
        gain = None if full is None or s3 is None else s3 - full
        print(f"| {a} | {fmt(full)} | {fmt(rand)} | {fmt(s3)} | {fmt(gain)} |")

    for dataset in args.sts or []:
        pairs = select_pairs(wh.read(dataset, "pairs"), "test", "en-en")
        if pairs.height < 2:
            pairs = select_pairs(wh.read(dataset, "pairs"), None, "en-en")
        out = []
        for enc in (args.base, args.model):
            v1, v2 = vectors(wh, dataset, enc, pairs["sentence1_key"].to_list(), pairs["sentence2_key"].to_list())
            out.append(correlations(cosine(v1, v2), pairs["score"].to_numpy())["spearman"])
        print(f"\n{dataset} ({pairs.height} pairs) overall Spearman x 100: {args.base} {fmt(out[0])}, "
              f"{args.model} {fmt(out[1])}")


if __name__ == "__main__":
    main()
