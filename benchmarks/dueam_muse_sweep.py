"""DuEAM on muse, one setting per call: train_dueam (anchor = learner = muse in PyTorch) on XNLI dev and/or
stsb_multi_mt train pairs read straight from ../shared/data (XNLI has no gold score, so it is no `pairs` dataset of
a pipeline), dev = stsb_multi_mt dev en-de, then Spearman x 100 on every stsb_multi_mt test en-X pair for muse and the
trained model. The runs behind docs/experiments/dueam.md's muse table.

    .venv/bin/python benchmarks/dueam_muse_sweep.py --lr 1e-5 --modes monolingual,cross_lingual,parallel

`--anchor DIR --anchor-lang en` makes another model the anchor (all-MiniLM-L6-v2's directory: an English anchor)
that reads both sentences of every pair in that language (`TrainPair.anchor_texts`), the learner staying muse.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from amrsim.encoders.muse_st import MuseSentenceEncoder
from amrsim.encoders.muse_torch import TorchMuse
from amrsim.methods.dueam import NLIItem, construct_pairs, train_dueam

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TEST_LANGS = ["de", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh"]


def rows(path: Path) -> list[list[str]]:
    text = gzip.open(path, "rt", encoding="utf-8").read() if path.suffix == ".gz" else path.read_text(encoding="utf-8")
    return [line.split("\t") for line in text.splitlines()[1:]]


def items_of(source: str, langs: list[str]) -> list[NLIItem]:
    """Row-aligned files as NLI items: premise = column 0, one hypothesis = column 1, in every language found."""
    files = {"xnli": lambda lg: DATA / "xnli" / f"xnli_dev_{lg}.tsv.gz",
             "stsb": lambda lg: DATA / "stsb_multi_mt" / f"stsb_{lg}_train.tsv"}[source]
    cols = {lg: rows(files(lg)) for lg in langs if files(lg).exists()}
    return [NLIItem(f"{source}:{i}", {lg: r[i][0] for lg, r in cols.items()},
                    ({lg: r[i][1] for lg, r in cols.items()},)) for i in range(len(cols["en"]))]


def sts(encode, lang2: str, split: str = "test") -> float:
    """Spearman x 100 of cosine on stsb_multi_mt `split`, sentence 1 in English, sentence 2 in `lang2`."""
    r1, r2 = (rows(DATA / "stsb_multi_mt" / f"stsb_{lg}_{split}.tsv") for lg in ("en", lang2))
    e1, e2 = encode([r[0] for r in r1]), encode([r[1] for r in r2])
    cos = (e1 * e2).sum(1) / np.linalg.norm(e1, axis=1) / np.linalg.norm(e2, axis=1)
    return 100 * float(spearmanr(cos, [float(r[2]) for r in r1]).statistic)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-langs", default="en,de,es,fr,it,ja,pt,ru,zh,ar,th")
    ap.add_argument("--sources", default="xnli,stsb")
    ap.add_argument("--modes", default="monolingual,cross_lingual")
    ap.add_argument("--same-language", type=int, default=1, help="anchor_same_language")
    ap.add_argument("--max-pairs", type=int, default=2048)
    ap.add_argument("--max-cross", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--lam", type=float, default=0.003)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--train-embedding", type=int, default=1)
    ap.add_argument("--anchor", default="muse", help="muse or a transformers model directory")
    ap.add_argument("--anchor-lang", default=None, help="the anchor reads both sentences in this language")
    ap.add_argument("--out", default="/tmp/dueam_muse_sweep")
    a = ap.parse_args()
    langs = a.train_langs.split(",")
    items = [it for source in a.sources.split(",") for it in items_of(source, langs)]
    pairs, _ = construct_pairs(items, a.modes.split(","), langs, 0, a.max_cross)
    if len(pairs) > a.max_pairs:
        pairs = [pairs[i] for i in np.sort(np.random.default_rng(0).choice(len(pairs), a.max_pairs, replace=False))]
    en, de = rows(DATA / "stsb_multi_mt" / "stsb_en_dev.tsv"), rows(DATA / "stsb_multi_mt" / "stsb_de_dev.tsv")
    dev = ([r[0] for r in en], [r[1] for r in de], np.array([float(r[2]) for r in en]))
    shutil.rmtree(a.out, ignore_errors=True)
    t0 = time.perf_counter()
    if a.anchor_lang:
        anchor1, anchor2 = zip(*(p.anchor_texts(a.anchor_lang) for p in pairs), strict=True)
    else:
        anchor1, anchor2 = [p.text1 for p in pairs], [p.anchor_text2(bool(a.same_language)) for p in pairs]
    result = train_dueam(a.anchor, "muse", [p.text1 for p in pairs], [p.text2 for p in pairs], Path(a.out), dev=dev,
                         anchor_texts1=list(anchor1), anchor_texts2=list(anchor2), batch_size=a.batch,
                         lr=a.lr, lam=a.lam, epochs=1, warmup=10, eval_every=max(1, len(pairs) // a.batch // 4),
                         train_embedding=bool(a.train_embedding), device="cpu")
    seconds = time.perf_counter() - t0
    saved = MuseSentenceEncoder.load(a.out)  # the run's muse, as amrsim loads it
    trained, base = TorchMuse(model=saved.muse, tokenizer=saved.tokenizer), TorchMuse()
    table = {f"en-{x}": (round(sts(base.encode, x), 2), round(sts(trained.encode, x), 2)) for x in TEST_LANGS}
    print(json.dumps({"settings": vars(a), "pairs": len(pairs), "train_seconds": round(seconds),
                      "dev_initial": result["initial_dev"], "dev_best": result["best_dev"],
                      "best_step": result["best_step"], "steps": result["steps"], "en_x": table,
                      "en_x_mean": [round(float(np.mean([v[k] for v in table.values()])), 2) for k in (0, 1)]}))


if __name__ == "__main__":
    main()
