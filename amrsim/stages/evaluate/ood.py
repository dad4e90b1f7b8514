"""The out-of-distribution protocol (`amrsim.evaluate.ood`) on a pipeline's STSb and SICK files: each split's derived
dataset `ood_<split>` synced with the source files (rows keep ingest's content keys, source file and line, so a
rebuild from unchanged files writes nothing), scored on its `test` and `ood` pairs, each model next to its base."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import polars as pl

from amrsim.config import DatasetConfig, Pipeline, StsEvalConfig
from amrsim.errors import ConfigError
from amrsim.evaluate.ood import GENRES, IN_SPLIT, OUT_SPLIT, SOURCES, OodSplit, genre_of, split_named, split_sources
from amrsim.ingest.normalise import normalise, source_columns, text_columns
from amrsim.ingest.readers import ERROR, read_rows
from amrsim.ingest.staging import Stage, sync_staged
from amrsim.methods import METHODS
from amrsim.stages.evaluate.common import trained_meta
from amrsim.stages.evaluate.sts import sts_stage
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import config_hash, file_stat_digest
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.store import OK

GENRE_COLUMN = "genre"  # the STS benchmark's first column: main-captions, main-forum(s), main-news


def source_config(pipe: Pipeline, name: str) -> DatasetConfig:
    """A source dataset of the protocol as the pipeline configures it; its score_range is required."""
    if name not in pipe.spec.datasets:
        raise ConfigError(f"{pipe.where} has no dataset '{name}': the out-of-distribution "
                          f"protocol reads {', '.join(n for names in SOURCES.values() for n in names)}")
    ds = pipe.spec.datasets[name]
    if ds.kind != "pairs" or ds.score_range is None:
        raise ConfigError(f"{pipe.where}, datasets.{name}: the out-of-distribution protocol "
                          f"needs kind pairs with a score_range (gold is scaled to 0-1 by it)")
    return ds


def _keep_genres(frame: pl.DataFrame, genres: Iterable[str]) -> pl.DataFrame:
    """Rows of those STSb genres, and a row whose genre is none of the three, kept as a failed row naming it."""
    frame = frame.with_columns(pl.col(GENRE_COLUMN).map_elements(genre_of, return_dtype=pl.String).alias("__genre"))
    unknown = pl.col("__genre").is_null()
    reason = pl.format("genre '{}' is none of " + ", ".join(GENRES), pl.col(GENRE_COLUMN).fill_null(""))
    error = pl.concat_str([pl.col(ERROR), reason], separator="; ", ignore_nulls=True)
    return (frame.filter(unknown | pl.col("__genre").is_in(list(genres)))
            .with_columns(pl.when(unknown).then(error).otherwise(pl.col(ERROR)).alias(ERROR)).drop("__genre"))


def _source_tables(pipe: Pipeline, name: str, split: str, genres: Iterable[str] | None) -> dict[str, pl.DataFrame]:
    """Pairs and sentences of one source file as ingest normalises them, under pair split `split` (with `genres`,
    only rows of those STSb genres), gold scaled to 0-1."""
    ds = source_config(pipe, name).model_copy(update={"split": split})
    if ds.column("split"):
        ds = ds.model_copy(update={"columns": {k: v for k, v in ds.columns.items() if k != "split"}})
    path = pipe.resolve_path(ds.path)
    columns = source_columns(ds)
    if genres is not None and GENRE_COLUMN not in columns:
        columns = [*columns, GENRE_COLUMN]
    frame = read_rows(path, ds.resolved_format(), columns, ds.hf_split, text_columns(ds))
    tables = normalise(ds, frame if genres is None else _keep_genres(frame, genres), Path(str(path)).name)
    lo, hi = ds.score_range  # type: ignore[misc]
    tables["pairs"] = tables["pairs"].with_columns((pl.col("score") - lo) / (hi - lo))
    return {t: tables[t] for t in ("sentences", "pairs")}


def split_tables(pipe: Pipeline, split: OodSplit) -> dict[str, pl.DataFrame]:
    """The derived dataset's sentences and pairs (train, dev, test, ood), built from the source files."""
    train, dev, test = SOURCES[split.train_from]
    kept = [g for g in GENRES if g != split.held_out] if split.held_out else None
    parts = [_source_tables(pipe, train, "train", kept), _source_tables(pipe, dev, "dev", kept),
             _source_tables(pipe, test, IN_SPLIT, kept),
             _source_tables(pipe, SOURCES[split.test_from][2], OUT_SPLIT, [split.held_out] if split.held_out else None)]
    return {t: pl.concat([p[t] for p in parts], how="vertical_relaxed").unique("key", keep="first",
                                                                                 maintain_order=True)
            for t in ("sentences", "pairs")}


def derive_split(wh: Warehouse, pipe: Pipeline, name: str, run_id: str) -> StageRun:
    """Sync `ood_<split>`'s sentences and pairs with the source files (ingest's staged sync: one commit per table,
    only changed keys written), with a lineage row."""
    split = split_named(name)
    sources = split_sources(name)
    run = StageRun(run_id=run_id, pipeline=pipe.name, stage="derive:ood", dataset=split.dataset,
                   config_hash=config_hash({"split": split.name, "sources": [
                       source_config(pipe, s).model_dump(mode="json") for s in sources]}))
    with record_stage(wh, run):
        run.input_versions = {s: file_stat_digest(pipe.resolve_path(source_config(pipe, s).path))
                              for s in sources}  # type: ignore[misc]
        tables = split_tables(pipe, split)
        pairs = tables["pairs"]
        run.rows_in = pairs.height
        run.rows_failed = int((pairs["status"] != OK).sum())
        wh.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".derive-{split.dataset}-", dir=wh.root) as tmp:
            stage = Stage(Path(tmp))
            stage.add(tables)
            for table in ("sentences", "pairs"):
                added, removed = sync_staged(wh, split.dataset, table, stage)
                if added or removed:
                    run.outputs.append(table)
                if table == "pairs":
                    run.rows_computed = added
        run.rows_out = pairs.height
    return run


def trained_on(model: str, models_root: Path | str | None = None) -> list[str] | None:
    """The warehouse datasets a trained model's model.json says it trained on, None when unknown: `data.datasets`,
    and meaning's files dataset (stage 1) and `sts_datasets` (stage 2)."""
    data = (trained_meta(model, models_root) or {}).get("data") or {}
    if not isinstance(data, dict) or not isinstance(data.get("datasets"), list):
        return None
    found = [*data["datasets"], *([data["files_dataset"]] if data.get("files") and data.get("files_dataset") else []),
             *(data.get("sts_datasets") or [])]
    return [str(d) for d in dict.fromkeys(found)]


def ood_note(split: str, model: str, seen: list[str], models_root: Path | str | None = None) -> str:
    """Why `model`'s score on `split`'s `ood` pairs is not out-of-distribution, and, for a method that trains on a
    split (`ood_split`), how to make it so."""
    method = (trained_meta(model, models_root) or {}).get("method")
    params = METHODS.get(str(method))
    splits = params is not None and "ood_split" in params.model_fields
    hint = f" (train with --param ood_split={split})" if splits else ""
    return (f"{split}: {model} trained on {', '.join(seen) or 'no warehouse dataset'}, not on "
            f"{split_named(split).dataset}: its 'ood' score is not out-of-distribution{hint}")


def evaluate_ood(wh: Warehouse, pipe: Pipeline, encoders: Mapping[str, Sequence[str]], run_id: str,
                 batch_size: int = 64, device: str = "auto") -> tuple[pl.DataFrame, list[str]]:
    """Derive each split's dataset (incrementally) from `pipe`'s source files, score its `test` and `ood` pairs
    with the split's encoders (results reused when unchanged) and return (result rows, notes)."""
    frames, notes = [], []
    for name, names in encoders.items():
        split = split_named(name)
        derive_split(wh, pipe, name, run_id)
        sts = StsEvalConfig(encoders=list(dict.fromkeys(names)), datasets=[split.dataset],
                            splits=[IN_SPLIT, OUT_SPLIT], lang_pairs=["en-en"])
        _, rows = sts_stage(wh, pipe.name, sts, run_id, batch_size=batch_size, device=device)
        frames.append(rows)
        for model in names:
            seen = trained_on(model, wh.models_root)
            if seen is not None and split.dataset not in seen:
                notes.append(ood_note(name, model, seen, wh.models_root))
    rows = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    return rows, notes
