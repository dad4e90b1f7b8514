"""Readers and normalisation into the canonical tables (sentences, pairs, triples, parallel); the ingest stage that
writes them is `amrsim.stages.ingest`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from amrsim.config import TEXT_ROLES, DatasetConfig
from amrsim.errors import InputError
from amrsim.ingest import derive
from amrsim.ingest.normalise import normalise, source_columns, text_columns
from amrsim.ingest.readers import ERROR, iter_rows, read_rows

__all__ = ["check_dataset", "normalise", "read_dataset", "read_rows", "source_columns", "text_columns"]


def check_dataset(ds: DatasetConfig, path: Path | str, resolve: Callable[[str], Path | str] = Path) -> None:
    """Read the first row of the dataset's file and of each row-aligned translation file, as `read_dataset` would
    read them: an unreadable file, or a header (JSONL: first object; Parquet: schema) that lacks a mapped column,
    raises the InputError the full read would, in milliseconds. Hub datasets are not fetched here."""
    if ds.resolved_format() == "hf":
        return
    aligned = {lang: m for lang, m in ds.translations.items() if "path" in m}
    if ds.from_pairs is not None:
        columns, texts = derive.source_columns(ds), derive.text_columns(ds)
    else:
        main = ds.model_copy(update={"translations": {k: m for k, m in ds.translations.items() if k not in aligned}})
        columns, texts = source_columns(main), text_columns(main)
    _first_row(path, ds.resolved_format(), columns, texts)
    for m in aligned.values():
        if ds.from_pairs is not None:
            t_columns = derive.text_columns(ds)
        else:
            roles = {r: c for r, c in m.items() if r not in ("path", "format")}
            roles = roles or {r: ds.column(r) for r in TEXT_ROLES[ds.kind] if ds.column(r)}
            t_columns = list(dict.fromkeys(c for c in roles.values() if c))
        t_format = DatasetConfig(path=m["path"], kind=ds.kind, format=m.get("format")).resolved_format()
        _first_row(resolve(m["path"]), t_format, t_columns, t_columns)


def _first_row(path: Path | str, fmt: str, columns: list[str], texts: list[str]) -> None:
    rows = iter_rows(path, fmt, columns, chunk_rows=1, text_columns=texts)
    try:
        next(rows, None)
    finally:
        rows.close()


def read_dataset(ds: DatasetConfig, path: Path | str,
                 resolve: Callable[[str], Path | str] = Path) -> dict[str, pl.DataFrame]:
    """Read and normalise one dataset's file (and its row-aligned translation files); raises InputError (nothing
    written) on a structurally bad file. `resolve` turns a configured path into a readable one."""
    if ds.from_pairs is not None:
        return _derived_triples(ds, path, resolve)
    aligned = {lang: m for lang, m in ds.translations.items() if "path" in m}
    if not aligned:
        frame = read_rows(path, ds.resolved_format(), source_columns(ds), ds.hf_split, text_columns(ds))
        return normalise(ds, frame, Path(str(path)).name)
    inline = {lang: m for lang, m in ds.translations.items() if "path" not in m}
    main = ds.model_copy(update={"translations": inline})
    frame = read_rows(path, ds.resolved_format(), source_columns(main), ds.hf_split, text_columns(main))
    mappings = dict(inline)
    for lang, m in aligned.items():
        roles = {r: c for r, c in m.items() if r not in ("path", "format")}
        roles = roles or {r: ds.column(r) for r in TEXT_ROLES[ds.kind] if ds.column(r)}
        t_path, t_frame = _aligned_rows(ds, lang, m, list(dict.fromkeys(roles.values())), resolve, path,
                                        frame.height)
        renamed = {c: f"__{lang}__{c}" for c in t_frame.columns}  # cannot clash with the main file's columns
        frame = frame.hstack(t_frame.rename(renamed))
        t_error = pl.format("{}: {}", pl.lit(Path(str(t_path)).name), pl.col(renamed[ERROR]))
        both = pl.concat_str([pl.col(ERROR), t_error], separator="; ", ignore_nulls=True)
        frame = frame.with_columns(pl.when(both != "").then(both).alias(ERROR))  # a bad cell in either fails the row
        mappings[lang] = {r: renamed[c] for r, c in roles.items()}
    return normalise(ds.model_copy(update={"translations": mappings}), frame, Path(str(path)).name)


def _derived_triples(ds: DatasetConfig, path: Path | str,
                     resolve: Callable[[str], Path | str]) -> dict[str, pl.DataFrame]:
    """`from_pairs`: triples derived from the labelled pairs file, and from each row-aligned translation of it."""
    frame = read_rows(path, ds.resolved_format(), derive.source_columns(ds), ds.hf_split,
                      text_columns=derive.text_columns(ds))
    translated: dict[str, derive.TranslatedPairs] = {}
    columns = derive.text_columns(ds)
    for lang, m in ds.translations.items():
        t_path, t_frame = _aligned_rows(ds, lang, m, columns, resolve, path, frame.height)
        translated[lang] = derive.TranslatedPairs(t_frame[columns[0]].to_list(), t_frame[columns[1]].to_list(),
                                                  t_frame[ERROR].to_list(), Path(str(t_path)).name)
    derived = derive.triples_from_pairs(ds, frame, translated)
    config = derive.normalise_config(ds).model_copy(
        update={"translations": {lang: derive.translation_columns(lang) for lang in translated}})
    return normalise(config, derived, Path(str(path)).name)


def _aligned_rows(ds: DatasetConfig, lang: str, mapping: dict[str, str], columns: list[str],
                  resolve: Callable[[str], Path | str], path: Path | str, rows: int) -> tuple[Path | str, pl.DataFrame]:
    """The `columns` of `translations.<lang>.path` (resolved) and the path; InputError naming the file when it does
    not have the main file's `rows`."""
    t_path = resolve(mapping["path"])
    t_format = DatasetConfig(path=mapping["path"], kind=ds.kind, format=mapping.get("format")).resolved_format()
    t_frame = read_rows(t_path, t_format, columns, text_columns=columns)
    if t_frame.height != rows:
        raise InputError(str(t_path), f"translations.{lang}.path has {t_frame.height} rows but {path} has {rows}: a "
                                      f"translation file must be row-aligned with the main file")
    return t_path, t_frame
