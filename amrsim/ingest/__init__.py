"""Readers and normalisation into the canonical tables (sentences, pairs, triples, parallel)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from amrsim.config import TEXT_ROLES, DatasetConfig, LoadedConfig
from amrsim.errors import InputError
from amrsim.ingest.normalise import normalise, source_columns
from amrsim.ingest.readers import read_rows
from amrsim.warehouse.keys import config_hash, content_key
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.store import FAILED, Warehouse

# tables are written in dependency order: sentences before the rows that reference them
TABLE_ORDER = ("sentences", "amr", "parallel", "pairs", "triples")


def read_dataset(ds: DatasetConfig, path: Path | str,
                 resolve: Callable[[str], Path | str] = Path) -> dict[str, pl.DataFrame]:
    """Read and normalise one dataset's file (and its row-aligned translation files); raises InputError (nothing
    written) on a structurally bad file. `resolve` turns a configured path into a readable one."""
    if ds.from_pairs is not None:
        from amrsim.ingest import derive

        frame = read_rows(path, ds.resolved_format(), derive.source_columns(ds), ds.hf_split)
        return normalise(derive.normalise_config(ds), derive.triples_from_pairs(ds, frame), Path(str(path)).name)
    aligned = {lang: m for lang, m in ds.translations.items() if "path" in m}
    if not aligned:
        frame = read_rows(path, ds.resolved_format(), source_columns(ds), ds.hf_split)
        return normalise(ds, frame, Path(str(path)).name)
    inline = {lang: m for lang, m in ds.translations.items() if "path" not in m}
    frame = read_rows(path, ds.resolved_format(), source_columns(ds.model_copy(update={"translations": inline})),
                      ds.hf_split)
    mappings = dict(inline)
    for lang, m in aligned.items():
        roles = {r: c for r, c in m.items() if r not in ("path", "format")}
        roles = roles or {r: ds.column(r) for r in TEXT_ROLES[ds.kind] if ds.column(r)}
        t_ds = DatasetConfig(path=m["path"], kind=ds.kind, format=m.get("format"))
        t_path = resolve(m["path"])
        t_frame = read_rows(t_path, t_ds.resolved_format(), list(dict.fromkeys(roles.values())))
        if t_frame.height != frame.height:
            raise InputError(str(t_path), f"translations.{lang}.path has {t_frame.height} rows but {path} has "
                                          f"{frame.height}: a translation file must be row-aligned with the main file")
        renamed = {c: f"__{lang}__{c}" for c in t_frame.columns}  # cannot clash with the main file's columns
        frame = frame.hstack(t_frame.rename(renamed))
        mappings[lang] = {r: renamed[c] for r, c in roles.items()}
    return normalise(ds.model_copy(update={"translations": mappings}), frame, Path(str(path)).name)


def ingest_dataset(wh: Warehouse, cfg: LoadedConfig, pipeline: str, dataset: str, run_id: str) -> StageRun:
    """Sync the dataset's canonical tables with its source file: only changed rows are written."""
    ds = cfg.project.pipelines[pipeline].datasets[dataset]
    path = ds.path if ds.resolved_format() == "hf" else cfg.resolve_path(ds.path)
    return ingest_tables(wh, dataset, ds, path, run_id, pipeline, resolve=cfg.resolve_path)


def ingest_tables(wh: Warehouse, dataset: str, ds: DatasetConfig, path: Path | str, run_id: str,
                  pipeline: str = "", resolve: Callable[[str], Path | str] = Path) -> StageRun:
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="ingest", dataset=dataset,
                   config_hash=config_hash(ds))
    with record_stage(wh, run):
        run.input_versions = {"file": str(path), "file_digest": _file_digest(path)}
        for lang, m in ds.translations.items():
            if "path" in m:
                t_path = resolve(m["path"])
                run.input_versions[f"file_{lang}"] = str(t_path)
                run.input_versions[f"file_digest_{lang}"] = _file_digest(t_path)
        tables = read_dataset(ds, path, resolve)
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
