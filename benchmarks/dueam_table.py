"""DuEAM's results table (docs/methods/dueam.md): the evaluation suite's stored results for some encoders, side by
side; and the BUCC-style mining files it uses (no BUCC corpus is offline: Tatoeba deu-eng, split in two, with
unaligned English distractors).

Usage:
  python benchmarks/dueam_table.py make-bucc --out DIR        # DIR/{de,en}.{train,test}, DIR/gold.{train,test}
  python benchmarks/dueam_table.py table --warehouse W --model minilm --model dueam:latest [--bucc-dataset bucc_deu]

`table` reads `W/eval/results` (written by `amrsim evaluate suite --pipeline benchmarks` and `amrsim evaluate bucc`)
and prints one markdown row per model: STSb test, SICK-R test, stsb_multi_mt monolingual (10) and English-X (9)
averages (Spearman x100), Tatoeba mean accuracy over the suite's languages, SICK-E transfer accuracy, BUCC-style F1.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from amrsim.encoders import run_name
from amrsim.langs import normalise_lang

TATOEBA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tatoeba"


def make_bucc(out: Path, lang: str = "deu", distractors: int = 500) -> None:
    """Tatoeba `lang`-eng rows 0-499 (train) and 500-999 (test); each English side gets `distractors` English
    sentences of fra-eng (train) / spa-eng (test) that have no partner in `lang`. Files are named by the two-letter
    code (`de.train`, `nl.test`)."""
    if lang in ("fra", "spa"):
        raise SystemExit(f"make-bucc: --lang {lang} is where the English distractors come from; choose another")
    code = normalise_lang(lang)
    if code is None or not (TATOEBA / f"tatoeba.{lang}-eng.tsv").is_file():
        raise SystemExit(f"make-bucc: no Tatoeba file {TATOEBA / f'tatoeba.{lang}-eng.tsv'}")
    out.mkdir(parents=True, exist_ok=True)

    def rows(name: str) -> list[list[str]]:
        lines = (TATOEBA / name).read_text(encoding="utf-8").splitlines()[1:]
        return [line.split("\t") for line in lines if line.count("\t") == 1]

    source = rows(f"tatoeba.{lang}-eng.tsv")
    for split, part, noise in (("train", source[:500], rows("tatoeba.fra-eng.tsv")),
                               ("test", source[500:1000], rows("tatoeba.spa-eng.tsv"))):
        aligned = {en for _, en in part}
        extra = [en for _, en in noise if en not in aligned][:distractors]
        (out / f"{code}.{split}").write_text("".join(f"{code}-{split}-{i}\t{text}\n"
                                                     for i, (text, _) in enumerate(part)), encoding="utf-8")
        english = [(f"en-{split}-{i}", en) for i, (_, en) in enumerate(part)]
        english += [(f"en-{split}-x{i}", en) for i, en in enumerate(extra)]
        (out / f"en.{split}").write_text("".join(f"{k}\t{t}\n" for k, t in english), encoding="utf-8")
        (out / f"gold.{split}").write_text("".join(f"{code}-{split}-{i}\ten-{split}-{i}\n" for i in range(len(part))),
                                           encoding="utf-8")


def table(warehouse: str, models: list[str], bucc_dataset: str) -> None:
    from amrsim.warehouse import Warehouse

    res = Warehouse(warehouse).read("eval", "results").sort("created_at").unique(
        ["model", "task", "dataset", "split", "lang_pair", "metric"], keep="last")

    def value(model: str, dataset: str, lang_pair: str | None, metric: str) -> float | None:
        rows = res.filter((pl.col("model") == model) & (pl.col("dataset") == dataset) & (pl.col("metric") == metric))
        if lang_pair is not None:
            rows = rows.filter(pl.col("lang_pair") == lang_pair)
        return rows["value"].mean() if rows.height else None

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known and len(known) == len(values) else None

    mono = ["en-en", "de-de", "es-es", "fr-fr", "it-it", "nl-nl", "pl-pl", "pt-pt", "ru-ru", "zh-zh"]
    cross = ["en-de", "en-es", "en-fr", "en-it", "en-nl", "en-pl", "en-pt", "en-ru", "en-zh"]
    header = ["model", "STSb test", "SICK-R test", "multi mono (10)", "multi en-X (9)", "Tatoeba mean (10)",
              "SICK-E transfer", "BUCC-style de-en F1"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for m in models:
        tatoeba = res.filter((pl.col("model") == m) & (pl.col("task") == "bitext")
                             & pl.col("dataset").str.starts_with("tatoeba") & (pl.col("metric") == "accuracy"))
        cells = [
            value(m, "stsb_en_test", "en-en", "spearman"), value(m, "sick_test", "en-en", "spearman"),
            mean([value(m, "stsb_multi_test", lp, "spearman") for lp in mono]),
            mean([value(m, "stsb_multi_test", lp, "spearman") for lp in cross]),
            tatoeba["value"].mean() if tatoeba.height else None,
            value(m, "sick_e", "en", "accuracy"), value(m, bucc_dataset, None, "f1"),
        ]
        print("| " + " | ".join([m, *("—" if c is None else f"{c:.2f}" for c in cells)]) + " |")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    mk = sub.add_parser("make-bucc")
    mk.add_argument("--out", type=Path, required=True)
    mk.add_argument("--lang", default="deu", help="Tatoeba language paired with English (deu, nld, ...)")
    tb = sub.add_parser("table")
    tb.add_argument("--warehouse", default="warehouse")
    tb.add_argument("--model", action="append", required=True)
    tb.add_argument("--bucc-dataset", default="bucc_deu")
    args = ap.parse_args()
    if args.command == "make-bucc":
        make_bucc(args.out, args.lang)
    else:
        # rows name the run (`dueam:<run id>`): `dueam:latest` is looked up as the run it resolves to now
        table(args.warehouse, [run_name(m) for m in args.model], args.bucc_dataset)


if __name__ == "__main__":
    main()
