"""Supervised SimCSE on muse alone (its PyTorch port): XNLI's multilingual triples, each sentence in one of the 15
languages drawn at random (the paper's per-sentence mixing), batch 64, symmetric loss, linear decay, gradients clipped
at 1; prints Spearman x 100 on stsb_multi_mt dev (English against de es fr it nl pl pt ru zh, mean) after each epoch.
How `mse_amr_muse`'s `base_lr` was chosen (docs/experiments/mse_amr.md#xnli-and-a-trained-base).

Usage: python benchmarks/simcse_muse_probe.py LR EPOCHS SPLITS TRAIN_TABLE     e.g.  1e-4 3 dev,test 0
"""

from __future__ import annotations

import gzip
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from amrsim.encoders.muse_st import muse_sentence_transformer
from amrsim.evaluate.sts import StsEvaluator
from amrsim.methods.mse_amr.loss import simcse_loss
from amrsim.methods.training import st_embed

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LANGS = "ar bg de el en es fr hi ru sw th tr ur vi zh".split()
DEV = ["de", "es", "fr", "it", "nl", "pl", "pt", "ru", "zh"]


def rows(path: Path) -> list[list[str]]:
    text = gzip.open(path, "rt", encoding="utf-8").read() if path.suffix == ".gz" else path.read_text(encoding="utf-8")
    return [line.split("\t") for line in text.split("\n")[1:] if line]  # XNLI holds U+2028 inside sentences


def xnli_triples(splits: list[str]) -> list[dict[str, tuple[str, str, str]]]:
    """Each premise with an entailment and a contradiction hypothesis: language -> (premise, entailment,
    contradiction)."""
    out = []
    for split in splits:
        per = {lg: rows(DATA / "xnli" / f"xnli_{split}_{lg}.tsv.gz") for lg in LANGS}
        groups: dict[str, dict[str, int]] = {}
        for i, r in enumerate(per["en"]):
            groups.setdefault(r[0], {})[r[2]] = i
        for g in groups.values():
            if "entailment" in g and "contradiction" in g:
                e, c = g["entailment"], g["contradiction"]
                out.append({lg: (per[lg][e][0], per[lg][e][1], per[lg][c][1]) for lg in LANGS})
    return out


def main() -> None:
    lr, epochs, splits, train_table = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4] == "1"
    torch.manual_seed(0)
    triples = xnli_triples(splits)
    en_dev = rows(DATA / "stsb_multi_mt" / "stsb_en_dev.tsv")
    x_dev = {lg: rows(DATA / "stsb_multi_mt" / f"stsb_{lg}_dev.tsv") for lg in DEV}
    gold = np.array([float(r[2]) for r in en_dev])
    model = muse_sentence_transformer(train_table, "cpu")

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(texts, batch_size=256, convert_to_numpy=True, show_progress_bar=False)

    def dev() -> float:
        model.eval()
        scores = [StsEvaluator([r[0] for r in en_dev], [r[1] for r in x_dev[lg]], gold, encode)() for lg in DEV]
        model.train()
        return float(np.mean(scores))

    print(f"{len(triples)} triples; dev before {dev():.2f}", flush=True)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    batch, rng, started = 64, random.Random(0), time.perf_counter()
    total = epochs * (len(triples) // batch)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / total))
    for epoch in range(epochs):
        order = list(range(len(triples)))
        rng.shuffle(order)
        for start in range(0, len(order) - batch + 1, batch):
            idx = order[start:start + batch]
            texts = [triples[i][rng.choice(LANGS)][role] for role in range(3) for i in idx]
            anchor, positive, negative = st_embed(model, texts, "cpu").split(len(idx))
            loss = simcse_loss(anchor, positive, negative, 0.05, symmetric=True)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch + 1}: dev {dev():.2f} ({time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
