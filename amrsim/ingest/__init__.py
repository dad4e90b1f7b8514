"""Readers and normalisation into the canonical tables (sentences, pairs, triples, parallel)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from amrsim.config import DatasetConfig, LoadedConfig
from amrsim.ingest.normalise import normalise, source_columns
from amrsim.ingest.readers import read_rows
from amrsim.warehouse.keys import config_hash, content_key
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.store import FAILED, Warehouse

# tables are written in dependency order: sentences before the rows that reference them
TABLE_ORDER = ("sentences", "amr", "parallel", "pairs", "triples")


def read_dataset(ds: DatasetConfig, path: Path | str) -> dict[str, pl.DataFrame]:
    """Read and normalise one dataset's file; raises InputError (nothing written) on a structurally bad file."""
    frame = read_rows(path, ds.resolved_format(), source_columns(ds), ds.hf_split)
    return normalise(ds, frame, Path(str(path)).name)


def ingest_dataset(wh: Warehouse, cfg: LoadedConfig, pipeline: str, dataset: str, run_id: str) -> StageRun:
    """Sync the dataset's canonical tables with its source file: only changed rows are written."""
    ds = cfg.project.pipelines[pipeline].datasets[dataset]
    path = ds.path if ds.resolved_format() == "hf" else cfg.resolve_path(ds.path)
    return ingest_tables(wh, dataset, ds, path, run_id, pipeline)


def ingest_tables(wh: Warehouse, dataset: str, ds: DatasetConfig, path: Path | str, run_id: str,
                  pipeline: str = "") -> StageRun:
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="ingest", dataset=dataset,
                   config_hash=config_hash(ds))
    with record_stage(wh, run):
        run.input_versions = {"file": str(path), "file_digest": _file_digest(path)}
        tables = read_dataset(ds, path)
        main = tables[ds.kind]
        run.rows_in = main.height
        run.rows_failed = main.filter(pl.col("status") == FAILED).height
        for table in TABLE_ORDER:
            if table not in tables:
                continue
            scope = ("parser", "provided") if table == "amr" else None  # parsed graphs belong to the parse stage
            added, removed = wh.sync(dataset, table, tables[table], scope=scope)
            if added or removed:
                run.outputs.append(table)
            if table == ds.kind:
                run.rows_computed = added
            run.rows_out += tables[table].height if table == ds.kind else 0
    return run


def _file_digest(path: Path | str) -> str | None:
    p = Path(str(path))
    if not p.is_file():
        return None
    st = p.stat()
    return content_key("file", st.st_size, st.st_mtime_ns)[:16]
