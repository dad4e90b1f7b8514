"""Can muse's cross-lingual STS be lifted by pulling its translations onto its own English? A probe beside DuEAM.

Multilingual knowledge distillation (Reimers & Gurevych 2020) with muse as both teacher and student: the teacher is
the frozen muse on the English sentence, the student is muse's PyTorch port, trained so that student(x_L) and
student(x_en) both come close (squared distance) to teacher(x_en), over the row-aligned translations of
stsb_multi_mt train (8 languages; nl and pl held out). If the gap between muse's en-en and en-X STS were a
systematic offset between languages, this would close part of it; DuEAM cannot do better than this with muse's own
token features as its anchor. Dev (stsb_multi_mt dev en-de) every 100 steps; at the end Spearman x 100 on every
stsb_multi_mt test en-X pair (and en-en) for muse and the student, in the same run.

    .venv/bin/python benchmarks/muse_align_probe.py --lr 2e-5 --train all-but-table
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from dueam_muse_sweep import DATA, TEST_LANGS, rows, sts

from amrsim.encoders.muse_torch import MuseModel, MuseTokenizer, TorchMuse, flat_batch


def translation_pairs(langs: list[str]) -> list[tuple[str, str]]:
    """(English sentence, its translation) for both sentences of every stsb_multi_mt train row, deduplicated."""
    english = rows(DATA / "stsb_multi_mt" / "stsb_en_train.tsv")
    out = set()
    for lang in langs:
        other = rows(DATA / "stsb_multi_mt" / f"stsb_{lang}_train.tsv")
        if len(other) != len(english):
            raise SystemExit(f"stsb_{lang}_train.tsv has {len(other)} rows, stsb_en_train.tsv {len(english)}")
        out.update((e[c], t[c]) for e, t in zip(english, other, strict=True) for c in (0, 1))
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--langs", default="de,es,fr,it,ja,pt,ru,zh")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--batch", type=int, default=64, help="translation pairs per step")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--train", choices=["all", "all-but-table", "table"], default="all-but-table",
                    help="which parameters train: the token table is 128k x 512 of the model's 67M")
    a = ap.parse_args()
    torch.manual_seed(0)
    pairs = translation_pairs(a.langs.split(","))
    tokenizer, base = MuseTokenizer(), TorchMuse()
    english = sorted({e for e, _ in pairs})
    teacher = dict(zip(english, base.encode(english), strict=True))
    student = MuseModel()
    for name, p in student.named_parameters():
        table = name == "embedding.weight"
        p.requires_grad_(a.train == "all" or (a.train == "table") == table)
    opt = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=a.lr, weight_decay=0.0)
    order = np.random.default_rng(0).permutation(len(pairs))

    def dev() -> float:
        student.eval()
        score = sts(TorchMuse(model=student, tokenizer=tokenizer).encode, "de", "dev")
        student.train()
        return round(score, 2)

    curve, losses, t0 = [dev()], [], time.perf_counter()
    for step in range(a.steps):
        batch = [pairs[i] for i in order[(step * a.batch) % len(order):][:a.batch]]
        feats = flat_batch(tokenizer.encode([t for _, t in batch] + [e for e, _ in batch]))
        target = torch.from_numpy(np.stack([teacher[e] for e, _ in batch])).repeat(2, 1)
        loss = ((student(feats["input_ids"], feats["lengths"]) - target) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 100 == 0:
            curve.append(dev())
    seconds = time.perf_counter() - t0
    student.eval()
    trained = TorchMuse(model=student, tokenizer=tokenizer)
    table = {f"en-{x}": (round(sts(base.encode, x), 2), round(sts(trained.encode, x), 2)) for x in [*TEST_LANGS, "en"]}
    en_x = [v for k, v in table.items() if k != "en-en"]
    print(json.dumps({"settings": vars(a), "pairs": len(pairs), "train_seconds": round(seconds),
                      "loss_first_last_100": [round(float(np.mean(losses[:100])), 4),
                                              round(float(np.mean(losses[-100:])), 4)],
                      "dev_per_100_steps": curve, "sts": table,
                      "en_x_mean": [round(float(np.mean([v[k] for v in en_x])), 2) for k in (0, 1)]}))


if __name__ == "__main__":
    main()
