"""The evaluate stage: evaluations run against the warehouse: embeddings through the cache, results appended to
`eval/results` once per (evaluation, model, input content), a lineage row per run, and the report rendered from
them. The evaluators themselves (sts, bitext, transfer, aspects) are pure functions of vectors; this module feeds
them and records what they return."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from amrsim.config import StsEvalConfig
from amrsim.encoders import model_id, run_name
from amrsim.encoders.cache import TABLE as EMBEDDINGS
from amrsim.encoders.cache import read_embeddings
from amrsim.errors import AmrsimError, WarehouseError
from amrsim.evaluate.aspects import ASPECT_COLUMNS, aspect_scores, aspect_slices
from amrsim.evaluate.bitext import (
    MODES,
    TATOEBA_METRICS,
    bucc_scores,
    read_bitext,
    read_bitext_pair,
    read_bucc_sentences,
    read_gold_alignment,
    tatoeba_scores,
)
from amrsim.evaluate.ood import DATASETS, base_for
from amrsim.evaluate.report import ScatterData, latest_results, render_report
from amrsim.evaluate.results import EVAL, RESULTS, Score, row_key, score_rows, store_results
from amrsim.evaluate.sts import (
    correlations,
    evaluate_sts,
    is_cross_encoder,
    pair_similarities,
    result_key,
    select_pairs,
)
from amrsim.evaluate.transfer import TASKS, TransferTask, run_transfer
from amrsim.files import file_digest
from amrsim.methods.loaders import embed_sentences, load_encoder
from amrsim.warehouse.keys import config_hash, content_key
from amrsim.warehouse.lineage import META, StageRun, record_stage
from amrsim.warehouse.store import OK, Warehouse


def sts_stage(wh: Warehouse, pipeline: str, sts: StsEvalConfig, run_id: str,
              datasets: list[str] | None = None, encoders: list[str] | None = None,
              batch_size: int = 64, device: str = "auto",
              translate: dict[str, Any] | None = None) -> tuple[StageRun, pl.DataFrame]:
    """STS for every (dataset, encoder, split, language pair); results already in the warehouse are reused. A
    cross-encoder (pear:...) scores the pairs directly instead of comparing embeddings. `translate` (language ->
    TranslatorSpec): an encoder that parses (mse_amr) translates sentences of those languages into English first."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="evaluate:sts", dataset=EVAL,
                   config_hash=config_hash(sts))
    frames = []
    with record_stage(wh, run):
        existing = wh.read(EVAL, RESULTS)
        for dataset in datasets or sts.datasets:
            pairs = wh.read(dataset, "pairs")
            texts = wh.read(dataset, "sentences", columns=["key", "text"])
            run.input_versions[f"{dataset}.pairs"] = wh.version(dataset, "pairs")
            run.input_versions[f"{dataset}.embeddings"] = wh.version(dataset, EMBEDDINGS)
            for encoder in encoders or sts.encoders:
                for split in sts.splits:
                    for lang_pair in sts.lang_pairs:
                        chosen = select_pairs(pairs, split, lang_pair)
                        if chosen.height < 2:
                            continue
                        run.rows_in += 1
                        key = result_key(encoder, dataset, split, lang_pair,
                                         (chosen["sentence1_key"] + "|" + chosen["sentence2_key"]).to_list(),
                                         wh.models_root)
                        wanted = [row_key("sts", run_name(encoder, wh.models_root), dataset, split, lang_pair, m, [key])
                                  for m in ("spearman", "pearson")]
                        done = existing.filter(pl.col("key").is_in(wanted))
                        if done.height == len(wanted):
                            frames.append(done)
                            continue
                        needed = pl.concat([chosen.select(key="sentence1_key"), chosen.select(key="sentence2_key")])
                        sentences = texts.join(needed.unique(), on="key", how="semi")
                        if is_cross_encoder(encoder, wh.models_root):  # scores each pair from its texts: no vectors
                            scores = cross_encoder_sts(wh, dataset, encoder, split, lang_pair, chosen, sentences,
                                                       batch_size=batch_size, device=device)
                        else:
                            embed_sentences(wh, dataset, encoder, sentences, batch_size=batch_size, device=device,
                                            translate=translate)
                            scores = evaluate_sts(wh, dataset, encoder, split, lang_pair, chosen)
                        rows = score_rows(scores, run_id, run.config_hash, [key], wh.models_root)
                        frames.append(rows)
                        store_results(wh, rows)
                        run.rows_computed += 1
        if run.rows_computed:
            run.outputs.append(RESULTS)
        run.rows_out = len(frames)
    # diagonal: rows read back from an older table (a column added later sits last, or is missing) meet new ones
    table = pl.concat(frames, how="diagonal_relaxed") if frames else existing.clear()
    return run, table


def results_table(rows: pl.DataFrame) -> pl.DataFrame:
    """Wide view for printing: one row per (dataset, split, lang pair, model), spearman and pearson columns."""
    if not rows.height:
        return rows
    return (rows.pivot(on="metric", index=["dataset", "split", "lang_pair", "model", "n"], values="value",
                       aggregate_function="first")
            .sort(["dataset", "split", "lang_pair", "model"]))


def dataset_name(path: Path | str, prefix: str = "") -> str:
    """A warehouse dataset name from a file name: tatoeba.deu-eng.tsv -> tatoeba_deu_eng."""
    stem = Path(str(path)).name.lower()
    for suffix in (".gz", ".tsv", ".csv", ".jsonl", ".txt", ".parquet"):
        stem = stem.removesuffix(suffix)
    name = re.sub(r"[^a-z0-9_]+", "_", prefix + stem).strip("_").lstrip("0123456789")
    return name or "file"


def embed_texts(wh: Warehouse, dataset: str, encoder: str, lang: str, texts: Sequence[str], batch_size: int = 64,
                device: str = "auto") -> np.ndarray:
    """Vectors for `texts` (row-aligned), cached in `<dataset>/embeddings`; the texts are registered in
    `<dataset>/sentences` under the same content keys ingest gives them."""
    keys = [content_key("sentence", lang, t) for t in texts]
    frame = pl.DataFrame({"key": keys, "lang": [lang] * len(keys), "text": list(texts)}).unique(
        "key", maintain_order=True).with_columns(status=pl.lit(OK), error=pl.lit(None, pl.String))
    have = wh.keys(dataset, "sentences")
    new = frame.filter(~pl.col("key").is_in(list(have)))
    if new.height:
        wh.upsert(dataset, "sentences", new)
    embed_sentences(wh, dataset, encoder, frame.select("key", "text"), batch_size=batch_size, device=device)
    return read_embeddings(wh, dataset, encoder, keys)


def stored_rows(wh: Warehouse, keys: Sequence[str]) -> pl.DataFrame | None:
    """The stored result rows with these keys, or None unless every one is there (then nothing is recomputed)."""
    found = wh.read(EVAL, RESULTS).filter(pl.col("key").is_in(list(keys)))
    return found if keys and found.height == len(keys) else None


def cached_scores(wh: Warehouse, task: str, model: str, dataset: str, split: str, lang_pair: str,
                  metrics: Sequence[str], key_parts: Sequence[object]) -> pl.DataFrame | None:
    """The stored rows of one evaluation whose inputs are unchanged, or None if any metric is missing."""
    name = run_name(model, wh.models_root)
    return stored_rows(wh, [row_key(task, name, dataset, split, lang_pair, m, key_parts) for m in metrics])


def record(wh: Warehouse, stage: str, pipeline: str, run_id: str, config_hash: str, inputs: dict[str, object],
           compute: Callable[[], list[Score]], key_parts: Sequence[object]) -> pl.DataFrame:
    """Run `compute`, append its scores (those not stored already) and a lineage row; returns the rows."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=stage, dataset=EVAL, config_hash=config_hash)
    with record_stage(wh, run):
        run.input_versions = dict(inputs)  # type: ignore[arg-type]
        scores = compute()
        rows = score_rows(scores, run_id, config_hash, key_parts, wh.models_root)
        known = wh.keys(EVAL, RESULTS, ok_only=False)
        fresh = rows.filter(~pl.col("key").is_in(list(known)))
        run.rows_in = rows.height
        run.rows_out = rows.height
        if fresh.height:
            run.rows_computed = store_results(wh, fresh)  # less any a concurrent run stored meanwhile
            run.outputs.append(RESULTS)
    return rows


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
    metrics = TATOEBA_METRICS
    lang_pair = f"{src_lang}-{tgt_lang}"
    stored = cached_scores(wh, "bitext", encoder, name, "test", lang_pair, metrics, parts)
    if stored is not None:
        return stored

    def compute() -> list[Score]:
        xs = embed_texts(wh, name, encoder, src_lang, src, batch_size, device)
        ys = embed_texts(wh, name, encoder, tgt_lang, tgt, batch_size, device)
        return tatoeba_scores(encoder, name, src_lang, tgt_lang, xs, ys)

    return record(wh, "evaluate:bitext", pipeline, run_id, content_key("bitext"),
                  {f"file{i}": str(p) for i, p in enumerate(inputs)}, compute, parts)


def aspects_eval(wh: Warehouse, encoder: str, dataset: str, run_id: str, split: str | None = None,
                 pipeline: str = "cli", batch_size: int = 64, device: str = "auto") -> pl.DataFrame:
    """S3BERT-style aspect Spearman over the dataset's `amr_metrics` rows (ok rows of `split`, or all)."""
    metrics = wh.read(dataset, "amr_metrics").filter(pl.col("status") == OK)
    if split and split != "all":
        metrics = metrics.filter(pl.col("split") == split)
    if metrics.height < 2:
        raise AmrsimError(f"{dataset}/amr_metrics: fewer than 2 ok metric rows"
                          f"{f' in split {split!r}' if split else ''}; run the metrics stage first")
    metrics = metrics.unique(["sentence1_key", "sentence2_key"], keep="first", maintain_order=True)
    version = wh.version(dataset, "amr_metrics")
    parts = [model_id(encoder, wh.models_root), dataset, version, sorted(metrics["key"].to_list())]
    run_split = split or "all"
    aspects = [a for a in ASPECT_COLUMNS if metrics[a].is_not_null().any()]
    named = run_name(encoder, wh.models_root)
    stored = stored_rows(wh, [row_key("aspects", named, dataset, run_split, a, "spearman", parts) for a in aspects])
    if stored is not None:
        return stored

    def compute() -> list[Score]:
        sentences = wh.read(dataset, "sentences", columns=["key", "text"])
        needed = pl.concat([metrics.select(key="sentence1_key"), metrics.select(key="sentence2_key")]).unique()
        embed_sentences(wh, dataset, encoder, sentences.join(needed, on="key", how="semi"), batch_size=batch_size,
                        device=device)
        k1, k2 = metrics["sentence1_key"].to_list(), metrics["sentence2_key"].to_list()
        both = read_embeddings(wh, dataset, encoder, k1 + k2)
        return aspect_scores(encoder, dataset, run_split, metrics, both[: len(k1)], both[len(k1):],
                             aspect_slices(encoder, wh.models_root), aspects)

    return record(wh, "evaluate:aspects", pipeline, run_id, content_key("aspects"),
                  {f"{dataset}.amr_metrics": version}, compute, parts)


def transfer_eval(wh: Warehouse, encoder: str, task_name: str, train: Path, devs: dict[str, Path],
                  tests: dict[str, Path], run_id: str, kind: str | None = None, pipeline: str = "cli",
                  batch_size: int = 64, device: str = "auto") -> tuple[pl.DataFrame, dict[str, list]]:
    """A SentEval-style transfer task from files; returns the result rows and the rows each file left out."""
    if task_name in TASKS:
        task = TASKS[task_name]
    elif kind in ("single", "pair"):
        task = TransferTask(task_name, kind)  # type: ignore[arg-type]
    else:
        raise ValueError(f"transfer task '{task_name}' is not built in ({', '.join(TASKS)}): give its kind "
                         "(single or pair)")
    dataset = dataset_name(task_name, "transfer_")
    files = {"train": train, **{f"dev_{k}": v for k, v in devs.items()}, **{f"test_{k}": v for k, v in tests.items()}}
    parts = [model_id(encoder, wh.models_root), task.name, task.kind,
             sorted((k, file_digest(v)) for k, v in files.items())]
    bad: dict[str, list] = {}
    named = run_name(encoder, wh.models_root)
    wanted = [row_key("transfer", named, task.name, "test", lang, "accuracy", parts) for lang in tests]
    wanted += [row_key("transfer", named, task.name, "dev", "all", m, parts) for m in ("dev_accuracy", "C")]
    stored = stored_rows(wh, wanted)
    if stored is not None:
        return stored, bad

    def compute() -> list[Score]:
        def encode(texts: list[str]) -> np.ndarray:
            return embed_texts(wh, dataset, encoder, "mul", texts, batch_size, device)

        out = run_transfer(task, encode, encoder, train, devs, tests, dataset=task.name)
        bad.update(out.bad_rows)
        return out.scores

    rows = record(wh, "evaluate:transfer", pipeline, run_id, content_key("transfer", task.name),
                  {k: str(v) for k, v in files.items()}, compute, parts)
    return rows, bad


def write_report(wh: Warehouse, out_dir: Path | None = None, max_scatters: int = 24):
    """Render `eval/results` (latest row per result) into `warehouse/reports/report.{html,md}` with STS score
    distributions from the cached embeddings; returns the ReportPaths."""
    results = wh.read(EVAL, RESULTS)
    lineage = wh.read(META, "lineage")
    scatters = []
    if results.height:
        latest = latest_results(results)
        sts = (latest.filter((pl.col("task") == "sts") & (pl.col("metric") == "spearman"))
               .unique(["model", "dataset", "split", "lang_pair"], maintain_order=True)
               .sort(["dataset", "lang_pair", "model"]))
        for row in sts.head(max_scatters).iter_rows(named=True):
            if not wh.exists(row["dataset"], "pairs"):
                continue  # results of a warehouse dataset since removed
            chosen = select_pairs(wh.read(row["dataset"], "pairs"), row["split"], row["lang_pair"])
            try:
                pred, gold = pair_similarities(wh, row["dataset"], row["model"], chosen)
            except (WarehouseError, ValueError):
                continue  # embeddings no longer cached (or a trained model removed): no scatter for it
            if len(pred):
                scatters.append(ScatterData(row["model"], row["dataset"], row["split"], row["lang_pair"], pred, gold))

    ood_models = results.filter(pl.col("dataset").is_in(list(DATASETS)))["model"].unique().to_list()
    bases = {m: base_for(m, wh.models_root) for m in ood_models}
    return render_report(results, lineage, out_dir or wh.root / "reports", scatters, ood_bases=bases)


def bucc_eval(wh: Warehouse, encoder: str, files: dict[str, Path], src_lang: str, tgt_lang: str, run_id: str,
              k: int = 4, mode: str = "max", dataset: str = "bucc", pipeline: str = "cli", batch_size: int = 64,
              device: str = "auto") -> pl.DataFrame:
    """BUCC-style mining from BUCC files: `files` has src_train, tgt_train, gold_train, src_test, tgt_test,
    gold_test (`id<TAB>sentence` corpora, `src_id<TAB>tgt_id` gold); threshold chosen on train, P/R/F1 on test."""
    if mode not in MODES:
        raise ValueError(f"mining mode '{mode}' unknown; use one of {', '.join(MODES)}")
    needed = ("src_train", "tgt_train", "gold_train", "src_test", "tgt_test", "gold_test")
    missing = [n for n in needed if n not in files]
    if missing:
        raise ValueError(f"BUCC evaluation needs files {', '.join(missing)}")
    parts = [model_id(encoder, wh.models_root), k, mode, sorted((n, file_digest(files[n])) for n in needed)]
    lang_pair = f"{src_lang}-{tgt_lang}"
    metrics = ("precision", "recall", "f1", "threshold")
    stored = cached_scores(wh, "bucc", encoder, dataset, "test", lang_pair, metrics, parts)
    if stored is not None:
        return stored

    def compute() -> list[Score]:
        splits = {}
        for split in ("train", "test"):
            src_ids, src = read_bucc_sentences(files[f"src_{split}"])
            tgt_ids, tgt = read_bucc_sentences(files[f"tgt_{split}"])
            gold = read_gold_alignment(files[f"gold_{split}"], src_ids, tgt_ids)
            splits[split] = (embed_texts(wh, dataset, encoder, src_lang, src, batch_size, device),
                             embed_texts(wh, dataset, encoder, tgt_lang, tgt, batch_size, device), gold)
        return bucc_scores(encoder, dataset, lang_pair, splits["train"], splits["test"], k, mode)

    return record(wh, "evaluate:bucc", pipeline, run_id, content_key("bucc", k, mode),
                  {n: str(p) for n, p in files.items()}, compute, parts)


def cross_encoder_sts(wh: Warehouse, dataset: str, encoder: str, split: str | None, lang_pair: str,
                      chosen: pl.DataFrame, sentences: pl.DataFrame, batch_size: int = 64,
                      device: str = "auto") -> list[Score]:
    """Spearman and Pearson of a cross-encoder's pair predictions against gold, for pairs `chosen` whose texts are
    in `sentences` (key, text)."""
    model = load_encoder(encoder, batch_size=batch_size, device=device, models_root=wh.models_root)
    text = dict(zip(sentences["key"].to_list(), sentences["text"].to_list(), strict=True))
    pred = model.score([text[k] for k in chosen["sentence1_key"]],  # type: ignore[attr-defined]
                       [text[k] for k in chosen["sentence2_key"]])
    return [Score("sts", encoder, dataset, split or "all", lang_pair, metric, value, chosen.height)
            for metric, value in correlations(pred, chosen["score"].to_numpy()).items()]
