"""Bitext evaluations from files: Tatoeba retrieval and BUCC mining, embeddings cached in the warehouse, results
reused while the model and the files are unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from amrsim.encoders import model_id
from amrsim.evaluate import Score
from amrsim.evaluate.bitext import (
    MODES,
    TATOEBA_METRICS,
    bucc_scores,
    tatoeba_scores,
)
from amrsim.files import file_digest
from amrsim.ingest.bitext import read_bitext, read_bitext_pair, read_bucc_sentences, read_gold_alignment
from amrsim.stages.evaluate.common import dataset_name, embed_texts, evaluated
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key

BUCC_FILES = ("src_train", "tgt_train", "gold_train", "src_test", "tgt_test", "gold_test")
BUCC_METRICS = ("precision", "recall", "f1", "threshold")


def bitext_eval(wh: Warehouse, encoder: str, path: Path, run_id: str, pipeline: str = "cli",
                batch_size: int = 64, device: str = "auto", dataset: str | None = None,
                tgt_path: Path | None = None, langs: tuple[str, str] | None = None) -> pl.DataFrame:
    """Tatoeba accuracy (both directions) for a two-column row-aligned TSV whose header names the languages, or for
    two line-aligned plain-text files (`path` = source, `tgt_path` = target, `langs` = their languages)."""
    if tgt_path is None:
        src_lang, tgt_lang, src, tgt = read_bitext(path)
    else:
        if langs is None:
            raise ValueError("two plain-text bitext files need their languages (src_lang, tgt_lang)")
        src_lang, tgt_lang = langs
        src, tgt = read_bitext_pair(path, tgt_path)
    # tatoeba.deu-eng.tsv (or LASER's tatoeba.deu-eng.deu) -> dataset "tatoeba": the language pair tells files apart
    base = re.sub(rf"\.{re.escape(src_lang)}$", "", Path(path).name)
    stem = re.sub(rf"[._-]{re.escape(src_lang)}[-_]{re.escape(tgt_lang)}(?=\.|$)", "", base)
    name = dataset or dataset_name(stem if stem != base else path)
    inputs = [path] if tgt_path is None else [path, tgt_path]
    parts = [model_id(encoder, wh.models_root), *(file_digest(p) for p in inputs)]

    def compute() -> list[Score]:
        xs = embed_texts(wh, name, encoder, src_lang, src, batch_size, device)
        ys = embed_texts(wh, name, encoder, tgt_lang, tgt, batch_size, device)
        return tatoeba_scores(encoder, name, src_lang, tgt_lang, xs, ys)

    results = [("bitext", name, "test", f"{src_lang}-{tgt_lang}", m) for m in TATOEBA_METRICS]
    return evaluated(wh, encoder, results, parts, compute, "evaluate:bitext", pipeline, run_id,
                     content_key("bitext"), {f"file{i}": str(p) for i, p in enumerate(inputs)})


def bucc_eval(wh: Warehouse, encoder: str, files: dict[str, Path], src_lang: str, tgt_lang: str, run_id: str,
              k: int = 4, mode: str = "max", dataset: str = "bucc", pipeline: str = "cli", batch_size: int = 64,
              device: str = "auto") -> pl.DataFrame:
    """BUCC-style mining from BUCC files: `files` has src_train, tgt_train, gold_train, src_test, tgt_test,
    gold_test (`id<TAB>sentence` corpora, `src_id<TAB>tgt_id` gold); threshold chosen on train, P/R/F1 on test."""
    if mode not in MODES:
        raise ValueError(f"mining mode '{mode}' unknown; use one of {', '.join(MODES)}")
    missing = [n for n in BUCC_FILES if n not in files]
    if missing:
        raise ValueError(f"BUCC evaluation needs files {', '.join(missing)}")
    parts = [model_id(encoder, wh.models_root), k, mode, sorted((n, file_digest(files[n])) for n in BUCC_FILES)]
    lang_pair = f"{src_lang}-{tgt_lang}"

    def compute() -> list[Score]:
        splits = {}
        for split in ("train", "test"):
            src_ids, src = read_bucc_sentences(files[f"src_{split}"])
            tgt_ids, tgt = read_bucc_sentences(files[f"tgt_{split}"])
            gold = read_gold_alignment(files[f"gold_{split}"], src_ids, tgt_ids)
            splits[split] = (embed_texts(wh, dataset, encoder, src_lang, src, batch_size, device),
                             embed_texts(wh, dataset, encoder, tgt_lang, tgt, batch_size, device), gold)
        return bucc_scores(encoder, dataset, lang_pair, splits["train"], splits["test"], k, mode)

    results = [("bucc", dataset, "test", lang_pair, m) for m in BUCC_METRICS]
    return evaluated(wh, encoder, results, parts, compute, "evaluate:bucc", pipeline, run_id,
                     content_key("bucc", k, mode), {n: str(p) for n, p in files.items()})
