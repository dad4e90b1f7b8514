"""The ingest stage: a dataset's source file synced into its canonical tables, only changed rows written, in one
commit per table."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Collection
from functools import partial
from pathlib import Path

import polars as pl

from amrsim.amr.backends import PROVIDED
from amrsim.config import DatasetConfig, Pipeline
from amrsim.ingest import append, check_dataset, read_dataset
from amrsim.ingest.normalise import Normaliser, source_columns, text_columns
from amrsim.ingest.readers import CHUNK_ROWS, LINE, Tail, iter_rows
from amrsim.ingest.staging import Stage, sync_staged
from amrsim.warehouse import Warehouse, config_hash
from amrsim.warehouse.keys import file_stat_digest
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.sources import OVERRIDDEN, DatasetTaken, Source, claim, conflict

log = logging.getLogger(__name__)

# tables are written in dependency order: sentences before the rows that reference them
TABLE_ORDER = ("sentences", "amr", "parallel", "pairs", "triples")


def _input(pipe: Pipeline, dataset: str) -> tuple[DatasetConfig, Path | str]:
    ds = pipe.spec.datasets[dataset]
    return ds, ds.path if ds.resolved_format() == "hf" else pipe.resolve_path(ds.path)


def _replace_hint(pipe: Pipeline, dataset: str) -> str:
    return (f"rename the dataset in {pipe.source}, or run `amrsim run {pipe.name} --replace {dataset}` to replace "
            f"its rows")


def _origin(pipe: Pipeline, dataset: str) -> str:
    return str(pipe.source) + (OVERRIDDEN if (pipe.name, dataset) in pipe.loaded.overridden else "")


def source_of(ds: DatasetConfig, path: Path | str, origin: str) -> Source:
    """The source a dataset definition read from `path` writes (amrsim.warehouse.sources)."""
    file = str(path) if ds.resolved_format() == "hf" else str(Path(str(path)).resolve())
    return Source(origin, file, config_hash(ds))


def ingest_stage(pipe: Pipeline, dataset: str, run_id: str) -> StageRun:
    """Sync the dataset's canonical tables with its source file: only changed rows are written."""
    ds, path = _input(pipe, dataset)
    return ingest_tables(Warehouse(pipe.warehouse_root), dataset, ds, path, run_id, pipe.name,
                         resolve=pipe.resolve_path, origin=_origin(pipe, dataset), hint=_replace_hint(pipe, dataset))


def check_pipeline(pipe: Pipeline, replace: Collection[str] = ()) -> None:
    """What a run would find wrong with its datasets, before anything heavy starts and without writing: each input
    file's header (or schema) lacks a column the mapping names (InputError naming the file), or the dataset's name
    holds another source's rows (DatasetTaken), unless `replace` names it. Reads only each file's first row."""
    wh = Warehouse(pipe.warehouse_root)
    for dataset in pipe.spec.datasets:
        ds, path = _input(pipe, dataset)
        check_dataset(ds, path, pipe.resolve_path)
        if dataset not in replace and (problem := conflict(wh, dataset, source_of(ds, path, _origin(pipe, dataset)),
                                                           _replace_hint(pipe, dataset))):
            raise DatasetTaken(problem)


def ingest_tables(wh: Warehouse, dataset: str, ds: DatasetConfig, path: Path | str, run_id: str,
                  pipeline: str = "", resolve: Callable[[str], Path | str] = Path,
                  chunk_rows: int = CHUNK_ROWS, origin: str | None = None, hint: str = "") -> StageRun:
    """Sync the canonical tables with the file: chunks are normalised and staged out of sight, then each table gets
    one commit (new rows appended, vanished rows deleted); a bad file raises before anything is committed.
    `origin` (the defining config, or `cli`): the dataset's recorded source must be this one (DatasetTaken, with
    `hint` saying how to resolve it, before anything is written), else it is recorded."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="ingest", dataset=dataset,
                   config_hash=config_hash(ds))
    source = source_of(ds, path, origin) if origin is not None else None
    hint = hint or "give one of them another dataset name"
    if source is not None and (problem := conflict(wh, dataset, source, hint)):
        raise DatasetTaken(problem)
    with record_stage(wh, run):
        run.input_versions = {"file": str(path), "file_digest": file_stat_digest(path)}
        for lang, m in ds.translations.items():
            if "path" in m:
                t_path = resolve(m["path"])
                run.input_versions[f"file_{lang}"] = str(t_path)
                run.input_versions[f"file_digest_{lang}"] = file_stat_digest(t_path)
        tail = None
        if _streamable(ds) and append.eligible(ds, path) and not older_graph_layout(wh, dataset, ds):
            tail, state = append.appended_tail(wh, dataset, run.config_hash, Path(str(path)))
            run.input_versions.update(state.record())
            if tail is not None:  # the file only grew: its old rows are in the tables already
                run.input_versions["read_from_line"] = tail.lines + 1
        wh.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".ingest-{dataset}-", dir=wh.root) as tmp:
            stage = Stage(Path(tmp))
            if tail is None:
                _stage_file(stage, ds, path, resolve, chunk_rows)
            elif tail.offset < state.size:
                _stage_file(stage, ds, path, resolve, chunk_rows, tail, (wh, dataset))
            run.rows_in, run.rows_failed = stage.counts(ds.kind)
            if run.rows_failed:
                run.notes.append(failed_rows_note(dataset, path, run.rows_in, run.rows_failed,
                                                  stage.first_failed(ds.kind)))
                log.warning("%s", run.notes[-1])
            for table in TABLE_ORDER:
                if not stage.has(table):  # the file gave no rows for it (amr, parallel): leave the table alone
                    continue
                scope = ("parser", PROVIDED) if table == "amr" else None  # parsed graphs belong to the parse stage
                added, removed = sync_staged(wh, dataset, table, stage, scope=scope, append_only=tail is not None)
                run.wrote(table, added or removed)
                if table == ds.kind:
                    run.rows_computed = added
                    run.rows_out = run.rows_in
    if source is not None:  # recorded once the rows are in: a file that failed to read claims nothing
        claim(wh, dataset, source, run_id, hint)
    return run


def failed_rows_note(dataset: str, path: Path | str, rows: int, failed: int,
                     first: tuple[int | None, str] | None) -> str:
    """The one line that says a dataset's rows failed (kept with status failed, not written as ok) and why the
    first did: the exit code stays 0, since a failed row is a row the next run retries."""
    where = f"{path}:{first[0]}" if first and first[0] is not None else str(path)
    why = f"; the first: {where}: {first[1]}" if first else ""
    return f"warning: dataset '{dataset}': {failed} of {rows} rows failed (kept with status 'failed'){why}"


def older_graph_layout(wh: Warehouse, dataset: str, ds: DatasetConfig | None = None) -> bool:
    """The dataset's pairs table predates per-pair graphs (no `amr1_key`) while it has graphs given in the input
    (the `amr` table holds provided graphs or `ds` maps graph columns): one graph was kept per sentence, so a pair
    could read another pair's graph. Reading the whole file again rewrites both tables in the current layout."""
    if ds is not None and (ds.kind != "pairs" or not (ds.column("amr1") or ds.column("amr2"))):
        return False
    if not wh.exists(dataset, "pairs") or "amr1_key" in wh.columns(dataset, "pairs"):
        return False
    return ds is not None or wh.read(dataset, "amr", columns=["parser"]).filter(
        pl.col("parser") == PROVIDED).height > 0


def _streamable(ds: DatasetConfig) -> bool:
    """A plain file is read chunk by chunk; derived triples need the whole file and row-aligned translation files
    are read beside it, so those are normalised in one piece (they are NLI- and benchmark-sized)."""
    aligned = any("path" in m for m in ds.translations.values())
    return ds.from_pairs is None and not aligned and ds.resolved_format() != "hf"


def _stage_file(stage: Stage, ds: DatasetConfig, path: Path | str, resolve: Callable[[str], Path | str],
                chunk_rows: int, tail: Tail | None = None, prior: tuple[Warehouse, str] | None = None) -> None:
    """Normalise the file (or only its `tail`) into the stage. Reading a tail, an id repeats one of the `prior`
    (warehouse, dataset) table's rows too."""
    if not _streamable(ds):
        stage.add(read_dataset(ds, path, resolve))
        return
    id_col = ds.column("id")
    source_file = Path(str(path)).name
    frames = partial(iter_rows, path, ds.resolved_format(), source_columns(ds), ds.hf_split, chunk_rows, tail,
                     text_columns(ds))
    # first pass assumes no id repeats (the usual case) and stages every line's id beside the rows
    normaliser = Normaliser(ds, source_file, repeated_ids={})
    for frame in frames():
        tables = normaliser.chunk(frame)
        if id_col:
            raw = pl.col(id_col).fill_null("")
            tables["__ids"] = frame.select(
                pl.when(raw.str.strip_chars() != "").then(raw.str.strip_chars())
                  .otherwise(pl.format("L{}", pl.col(LINE))).alias("item_id"),
                pl.col(LINE).alias("line"), (raw != "").alias("explicit"))
        stage.add(tables)
    kind_table = (prior[0], prior[1], ds.kind) if prior else None
    repeated = stage.repeated_ids(kind_table) if id_col else {}
    if repeated:  # a second pass marks the repeats as failed rows, as the in-memory normaliser would
        stage.clear()
        normaliser = Normaliser(ds, source_file, repeated_ids=repeated)
        for frame in frames():
            stage.add(normaliser.chunk(frame))
