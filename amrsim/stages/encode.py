"""The encode stage: every ok sentence of a dataset embedded by an encoder, through the embedding cache."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from amrsim.config import Pipeline
from amrsim.encoders import model_id
from amrsim.encoders.cache import TABLE as EMBEDDINGS
from amrsim.methods.loaders import embed_sentences
from amrsim.warehouse import OK, Warehouse, config_hash
from amrsim.warehouse.lineage import StageRun, record_stage


def encode_stage(pipe: Pipeline, dataset: str, encoder: str, run_id: str,
                 on_progress: Callable[[int], None] | None = None,
                 on_plan: Callable[[int, int], None] | None = None) -> StageRun:
    """Embed every ok sentence of a dataset with one encoder (cached by content key)."""
    enc_cfg = pipe.spec.encode
    assert enc_cfg is not None
    wh = Warehouse(pipe.warehouse_root)
    run = StageRun(run_id=run_id, pipeline=pipe.name, stage=f"encode:{encoder}", dataset=dataset,
                   config_hash=config_hash({"model": model_id(encoder, wh.models_root)}))
    with record_stage(wh, run):
        run.input_versions = {"sentences": wh.version(dataset, "sentences")}
        sentences = wh.read(dataset, "sentences", columns=["key", "text", "status"]).filter(pl.col("status") == OK)
        run.rows_in = sentences.height
        run.rows_computed, run.rows_failed = embed_sentences(
            wh, dataset, encoder, sentences, batch_size=enc_cfg.batch_size, device=enc_cfg.device,
            on_progress=on_progress, on_plan=on_plan)
        run.wrote(EMBEDDINGS, run.rows_computed)
        run.rows_out = run.rows_computed
    return run
