"""Meaning embeddings vs their base encoder: the table of docs/methods/meaning.md from `warehouse/eval/results`.

Rows: each STS language pair of `--dataset` (Spearman x 100, split test) and each Tatoeba file (accuracy x 100, mean
of both directions), one column per `--model`; then the averages over the cross-lingual pairs, over the pairs both
stages held out (`--held-out`), the monolingual pairs and Tatoeba. Run the `meaning` pipeline's suite for each model
first (`amrsim evaluate suite --pipeline meaning --encoder ...`); the latest result of each (model, pair) is used.

Usage: python benchmarks/meaning_table.py --warehouse W --model muse --model meaning:s1 --model meaning:latest
       [--dataset stsb_multi_test] [--held-out en-de,en-es,en-fr,de-fr,de-es,es-fr]
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl

from amrsim.encoders import run_name
from amrsim.stages.evaluate.results import EVAL, RESULTS
from amrsim.warehouse import Warehouse


def latest(wh: Warehouse, task: str, metric: str, models: list[str], dataset: str | None) -> pl.DataFrame:
    rows = wh.read(EVAL, RESULTS).filter((pl.col("task") == task) & (pl.col("metric") == metric)
                                         & pl.col("model").is_in(models))
    if dataset is not None:
        rows = rows.filter(pl.col("dataset") == dataset)
    return rows.sort("created_at").unique(["model", "dataset", "lang_pair"], keep="last")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warehouse", default="warehouse")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--dataset", default="stsb_multi_test")
    ap.add_argument("--held-out", default="en-de,en-es,en-fr,de-fr,de-es,es-fr")
    args = ap.parse_args()
    wh = Warehouse(args.warehouse)
    # rows name the run (`meaning:<run id>`): `meaning:latest` is looked up as the run it resolves to now
    models = [run_name(m) for m in args.model]
    sts = latest(wh, "sts", "spearman", models, args.dataset)
    bitext = latest(wh, "bitext", "accuracy", models, None)
    value = {(r["model"], r["lang_pair"]): r["value"] for r in sts.iter_rows(named=True)}
    acc = {(r["model"], r["lang_pair"]): r["value"] for r in bitext.iter_rows(named=True)}
    pairs = sorted({p for _, p in value}, key=lambda p: (p.split("-")[0] == p.split("-")[1], p))
    files = sorted({p for _, p in acc})
    held = [p for p in args.held_out.split(",") if p in pairs]

    def cell(v: float | None) -> str:
        return "—" if v is None or not np.isfinite(v) else f"{v:.2f}"

    def mean(table: dict, keys: list[str], model: str) -> float | None:
        got = [table.get((model, k)) for k in keys]
        return float(np.mean(got)) if got and all(g is not None for g in got) else None

    header = "| | " + " | ".join(models) + " |"
    print(header + "\n|---|" + "---|" * len(models))
    for p in pairs:
        print(f"| STS {p} | " + " | ".join(cell(value.get((m, p))) for m in models) + " |")
    cross = [p for p in pairs if p.split("-")[0] != p.split("-")[1]]
    mono = [p for p in pairs if p.split("-")[0] == p.split("-")[1]]
    for name, keys in ((f"**cross-lingual avg ({len(cross)})**", cross),
                       (f"**held-out cross avg ({', '.join(held)})**", held),
                       (f"monolingual avg ({len(mono)})", mono)):
        print(f"| {name} | " + " | ".join(cell(mean(value, keys, m)) for m in models) + " |")
    for f in files:
        print(f"| Tatoeba {f} | " + " | ".join(cell(acc.get((m, f))) for m in models) + " |")
    if files:
        print(f"| **Tatoeba avg ({len(files)})** | " + " | ".join(cell(mean(acc, files, m)) for m in models) + " |")


if __name__ == "__main__":
    main()
