"""The `embeddings` table: vectors cached by (model, sentence) content key; only missing keys are encoded."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Protocol

import numpy as np
import polars as pl

from amrsim.encoders import Encoder, TrainedLoader, load_encoder_with, model_id, resolve
from amrsim.errors import WarehouseError
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.store import FAILED, OK, Warehouse

TABLE = "embeddings"
COMMIT_ROWS = 4096  # rows per commit: a crash loses at most this much work


def embedding_key(mid: str, sentence_key: str, inputs: str = "") -> str:
    """A vector's key: the model id, the sentence and, for a model that reads more than the text, what else it read
    (`TrainedInputs`)."""
    return content_key("embedding", mid, sentence_key, *([inputs] if inputs else []))


class VectorInputs(Protocol):
    """What an encoder's vectors of `sentences` (key, text) read besides the model and the text, one string per row,
    found without loading the model; None for an encoder that reads only the text."""

    def __call__(self, wh: Warehouse, dataset: str, encoder: str, sentences: pl.DataFrame,
                 translate: dict[str, Any] | None = None) -> list[str] | None: ...


RUN_ID = re.compile(r"^(trained:[^@#]+)(?:@[0-9a-f]+)?(#.*)?$")  # trained:<method>/<run>[@<fingerprint>][#<part>]


def superseded(wh: Warehouse, dataset: str, mid: str) -> list[str]:
    """Keys of the vectors of the trained run `mid` names, and part, from other weights: the run trained again
    under its id, or stored before model ids held a fingerprint. No model id can read them any more."""
    match = RUN_ID.match(mid)
    if match is None or not wh.exists(dataset, TABLE):
        return []
    run, part = match[1], match[2] or ""
    table = wh.read(dataset, TABLE, columns=["key", "model_id"]).filter(
        pl.col("model_id").str.starts_with(run) & (pl.col("model_id") != mid))
    return [k for k, m in zip(table["key"], table["model_id"], strict=True)
            if (found := RUN_ID.match(m)) is not None and found[1] == run and (found[2] or "") == part]


def embed_sentences(wh: Warehouse, dataset: str, encoder_name: str, sentences: pl.DataFrame,
                    batch_size: int = 64, device: str = "auto", encoder: Encoder | None = None,
                    on_progress: Callable[[int], None] | None = None,
                    on_plan: Callable[[int, int], None] | None = None,
                    translate: dict[str, Any] | None = None,
                    loaders: Mapping[str, TrainedLoader] | None = None,
                    inputs: VectorInputs | None = None) -> tuple[int, int]:
    """Encode the sentences (columns key, text) that lack an embedding; returns (computed, failed). An encoder with
    `encode_sentences(wh, dataset, frame) -> (vectors, errors)` (one that reads more than the text, e.g. a graph from
    the dataset's `amr` table) gets the batch's rows and fails single rows; others get the texts. `translate`
    (language -> TranslatorSpec) goes to such an encoder when it takes it: the models that put text of languages
    without a parser into English. `loaders`: as `load_encoder_with`'s, for a trained run that is loaded only when
    something is missing; `inputs`: what else the vectors read (part of their keys: a sentence whose graph changed
    is encoded again, its old vector removed). `on_plan(todo, already)` is called once
    the rows to embed are known. Rows name the encoder as asked, except `<method>:latest`, which they name by the
    run it resolved to (`<method>:<run id>`): a later run must not change what a stored row says."""
    recorded, mid = resolve(encoder_name, wh.models_root)
    frame = sentences.select("key", "text").unique("key", maintain_order=True)
    read = inputs(wh, dataset, encoder_name, frame, translate) if inputs is not None else None
    frame = frame.with_columns(pl.Series("emb_key", [embedding_key(mid, k, r) for k, r in zip(
        frame["key"].to_list(), read or [""] * frame.height, strict=True)], pl.String))
    done = wh.keys(dataset, TABLE)
    todo = frame.filter(~pl.col("emb_key").is_in(list(done)))
    if on_plan is not None:  # rows to embed, rows embedded before
        on_plan(todo.height, frame.height - todo.height)
    if todo.height == 0:
        return 0, 0
    # length-sorted batches pad less
    todo = todo.with_columns(pl.col("text").str.len_chars().alias("_len")).sort("_len", maintain_order=True)
    model = encoder or load_encoder_with(encoder_name, batch_size=batch_size, device=device,
                                          models_root=wh.models_root, loaders=loaders)
    computed = failed = 0
    per_call = max(batch_size, int(getattr(model, "call_batch", batch_size)))  # texts per encode() call
    by_row = getattr(model, "encode_sentences", None)
    if by_row is not None and translate and "translate" in inspect.signature(by_row).parameters:
        by_row = partial(by_row, translate=translate)
    for start in range(0, todo.height, COMMIT_ROWS):
        chunk = todo.slice(start, COMMIT_ROWS)
        parts: list[pl.DataFrame] = []
        for b in range(0, chunk.height, per_call):
            batch = chunk.slice(b, per_call)
            try:
                if by_row is not None:
                    vecs, errors = by_row(wh, dataset, batch.select("key", "text"))
                    vecs = np.asarray(vecs, dtype=np.float32)
                else:
                    vecs, errors = np.asarray(model.encode(batch["text"].to_list()), dtype=np.float32), None
                if vecs.shape[0] != batch.height:
                    raise ValueError(f"encoder returned {vecs.shape[0]} vectors for {batch.height} texts")
                vector = pl.Series("vector", vecs).cast(pl.List(pl.Float32))  # columnar: no per-float Python
                status, error, dim = pl.lit(OK), pl.lit(None, pl.String), pl.lit(vecs.shape[1], pl.Int32)
                if errors is not None and any(e is not None for e in errors):
                    bad = pl.Series([e is not None for e in errors])
                    vector = vector.zip_with(~bad, pl.Series([None] * batch.height, dtype=pl.List(pl.Float32)))
                    status = pl.Series("status", [OK if e is None else FAILED for e in errors])
                    error = pl.Series("error", [None if e is None else e[:500] for e in errors], pl.String)
                    dim = pl.Series("dim", [vecs.shape[1] if e is None else None for e in errors], pl.Int32)
            except Exception as e:  # a model error fails these rows, kept with the reason; others go on
                vector = pl.Series("vector", [None] * batch.height, dtype=pl.List(pl.Float32))
                status, error, dim = pl.lit(FAILED), pl.lit(f"{type(e).__name__}: {e}"[:500]), pl.lit(None, pl.Int32)
            parts.append(batch.select(key="emb_key", sentence_key="key").with_columns(
                encoder=pl.lit(recorded), model_id=pl.lit(mid), dim=dim, vector=vector,
                status=status, error=error))
            if on_progress:
                on_progress(batch.height)
        out = pl.concat(parts, how="vertical_relaxed")
        wh.upsert(dataset, TABLE, out)
        failed += out.filter(pl.col("status") == FAILED).height
        computed += out.height
    stale = superseded(wh, dataset, mid)
    if read is not None:  # a sentence keeps one vector per model: the one of what it reads now
        mine = wh.read(dataset, TABLE, columns=["key", "model_id", "sentence_key"]).filter(
            (pl.col("model_id") == mid) & pl.col("sentence_key").is_in(frame["key"].to_list())
            & ~pl.col("key").is_in(frame["emb_key"].to_list()))
        stale += mine["key"].to_list()
    wh.delete_keys(dataset, TABLE, stale)
    return computed, failed


def read_embeddings(wh: Warehouse, dataset: str, encoder_name: str, sentence_keys: list[str]) -> np.ndarray:
    """An (n, dim) float32 matrix aligned with `sentence_keys`; raises naming the first key without a vector."""
    mid = model_id(encoder_name, wh.models_root)
    wanted = pl.DataFrame({"sentence_key": sentence_keys}).unique()
    table = wh.read(dataset, TABLE, columns=["sentence_key", "model_id", "vector", "status", "error"])
    mine = table.filter(pl.col("model_id") == mid).join(wanted, on="sentence_key", how="semi")
    have = mine.filter(pl.col("status") == OK).unique("sentence_key")
    index = {k: i for i, k in enumerate(have["sentence_key"].to_list())}
    missing = [k for k in sentence_keys if k not in index]
    if missing:
        failed = mine.filter((pl.col("status") != OK) & (pl.col("sentence_key") == missing[0]))
        why = (f"its embedding failed: {failed['error'][0]}" if failed.height else "run the encode stage first")
        raise WarehouseError(f"{dataset}/{TABLE}: no '{encoder_name}' vector for sentence key {missing[0]} "
                             f"({len(set(missing))} missing); {why}")
    matrix = have["vector"].list.to_array(int(have["vector"].list.len().max())).to_numpy().astype(np.float32)
    return matrix[[index[k] for k in sentence_keys]]
