"""What the evaluations share: results reused while their inputs are unchanged, new ones appended once with a
lineage row (and the model cards of the runs they name rewritten), texts embedded through the cache."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from amrsim.console import progress_bar
from amrsim.encoders import find_trained, is_trained_name, run_name
from amrsim.encoders.cache import read_embeddings
from amrsim.evaluate import Score
from amrsim.methods.loaders import embed_sentences
from amrsim.stages.evaluate.card import refresh_cards
from amrsim.stages.evaluate.results import EVAL, RESULTS, row_key, score_rows, stored_rows
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.store import OK

Result = tuple[str, str, str, str, str]  # task, dataset, split, lang_pair, metric: one result of one model


def trained_meta(model: str, models_root: Path | str | None = None) -> dict | None:
    """model.json of a trained run (`<method>:<run id|latest>`); None for any other encoder name or unknown run."""
    if not is_trained_name(model):
        return None
    try:
        return find_trained(model, models_root).meta
    except ValueError:
        return None


def store_results(wh: Warehouse, rows: pl.DataFrame) -> int:
    """Append result rows (those whose key is new) and rewrite the model cards of the trained runs they name;
    returns the rows added."""
    added = wh.append_new(EVAL, RESULTS, rows)
    if added.num_rows:
        refresh_cards(wh, added.column("model").to_pylist())
    return added.num_rows


def evaluated(wh: Warehouse, model: str, results: Iterable[Result], key_parts: Sequence[object],
              compute: Callable[[], list[Score]], stage: str, pipeline: str, run_id: str, config_hash: str,
              inputs: dict[str, object]) -> pl.DataFrame:
    """The stored rows of `model`'s `results` (keyed with `key_parts`: model id, input digests) when every one is
    there; else `compute`'s scores as rows, the new ones appended, with a lineage row."""
    name = run_name(model, wh.models_root)
    stored = stored_rows(wh, [row_key(task, name, *rest, key_parts) for task, *rest in results])
    if stored is not None:
        return stored
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=stage, dataset=EVAL, config_hash=config_hash)
    with record_stage(wh, run):
        run.input_versions = dict(inputs)  # type: ignore[arg-type]
        rows = score_rows(compute(), run_id, config_hash, key_parts, wh.models_root)
        fresh = rows.filter(~pl.col("key").is_in(list(wh.keys(EVAL, RESULTS, ok_only=False))))
        run.rows_in = run.rows_out = rows.height
        if fresh.height:
            run.rows_computed = store_results(wh, fresh)  # less any a concurrent run stored meanwhile
            run.outputs.append(RESULTS)
    return rows


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
    new = frame.filter(~pl.col("key").is_in(list(wh.keys(dataset, "sentences"))))
    if new.height:
        wh.upsert(dataset, "sentences", new)
    embed_with_progress(wh, dataset, encoder, frame.select("key", "text"), batch_size=batch_size, device=device)
    return read_embeddings(wh, dataset, encoder, keys)


def embed_with_progress(wh: Warehouse, dataset: str, encoder: str, sentences: pl.DataFrame, **options: object
                        ) -> tuple[int, int]:
    """`embed_sentences` (options: batch_size, device, translate) with progress over the sentences it embeds (the
    bulk of an evaluation's time); a rerun says they were embedded before."""
    with progress_bar(sentences.height, f"embed {dataset} with {encoder}") as advance:
        return embed_sentences(wh, dataset, encoder, sentences, on_progress=advance, on_plan=advance.plan,
                               **options)
