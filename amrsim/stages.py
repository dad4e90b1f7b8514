"""Stage bodies the Prefect tasks call: each reads the warehouse, computes only missing keys, records lineage."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from amrsim.config import LoadedConfig, StsEvalConfig
from amrsim.encoders import model_id
from amrsim.encoders.cache import TABLE as EMBEDDINGS
from amrsim.encoders.cache import embed_sentences
from amrsim.evaluate.sts import EVAL, RESULTS, evaluate_sts, result_key, result_rows, select_pairs
from amrsim.warehouse.keys import config_hash
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.store import OK, Warehouse


def encode_stage(wh: Warehouse, cfg: LoadedConfig, pipeline: str, dataset: str, encoder: str, run_id: str,
                 on_progress: Callable[[int], None] | None = None) -> StageRun:
    """Embed every ok sentence of a dataset with one encoder (cached by content key)."""
    enc_cfg = cfg.project.pipelines[pipeline].encode
    assert enc_cfg is not None
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=f"encode:{encoder}", dataset=dataset,
                   config_hash=config_hash({"model": model_id(encoder)}))
    with record_stage(wh, run):
        run.input_versions = {"sentences": wh.version(dataset, "sentences")}
        sentences = wh.read(dataset, "sentences", columns=["key", "text", "status"]).filter(pl.col("status") == OK)
        run.rows_in = sentences.height
        run.rows_computed, run.rows_failed = embed_sentences(
            wh, dataset, encoder, sentences, batch_size=enc_cfg.batch_size, device=enc_cfg.device,
            on_progress=on_progress)
        if run.rows_computed:
            run.outputs.append(EMBEDDINGS)
        run.rows_out = run.rows_computed
    return run


def sts_stage(wh: Warehouse, pipeline: str, sts: StsEvalConfig, run_id: str,
              datasets: list[str] | None = None, encoders: list[str] | None = None,
              batch_size: int = 64, device: str = "auto") -> tuple[StageRun, pl.DataFrame]:
    """STS for every (dataset, encoder, split, language pair); results already in the warehouse are reused."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="evaluate:sts", dataset=EVAL,
                   config_hash=config_hash(sts))
    frames = []
    with record_stage(wh, run):
        existing = wh.read(EVAL, RESULTS)
        known = set(existing["key"].to_list()) if existing.height else set()
        for dataset in datasets or sts.datasets:
            pairs = wh.read(dataset, "pairs")
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
                                         (chosen["sentence1_key"] + "|" + chosen["sentence2_key"]).to_list())
                        if f"{key}:spearman" in known:
                            frames.append(existing.filter(pl.col("key").str.starts_with(key + ":")))
                            continue
                        needed = pl.concat([chosen.select(key="sentence1_key"), chosen.select(key="sentence2_key")])
                        sentences = wh.read(dataset, "sentences", columns=["key", "text"]).join(
                            needed.unique(), on="key", how="semi")
                        embed_sentences(wh, dataset, encoder, sentences, batch_size=batch_size, device=device)
                        res = evaluate_sts(wh, dataset, encoder, split, lang_pair)
                        assert res is not None
                        rows = result_rows(res, key, run_id, run.config_hash)
                        frames.append(rows)
                        wh.append(EVAL, RESULTS, rows)
                        run.rows_computed += 1
        if run.rows_computed:
            run.outputs.append(RESULTS)
        run.rows_out = len(frames)
    table = pl.concat(frames, how="vertical_relaxed") if frames else existing.clear()
    return run, table


def results_table(rows: pl.DataFrame) -> pl.DataFrame:
    """Wide view for printing: one row per (dataset, split, lang pair, model), spearman and pearson columns."""
    if not rows.height:
        return rows
    return (rows.pivot(on="metric", index=["dataset", "split", "lang_pair", "model", "n"], values="value",
                       aggregate_function="first")
            .sort(["dataset", "split", "lang_pair", "model"]))
