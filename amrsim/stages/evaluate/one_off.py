"""A file given to `amrsim evaluate sts` (and its row-aligned translations) as a pairs dataset of its own: its
name, split and dataset config, checked and ingested before anything is evaluated."""

from __future__ import annotations

import re
from pathlib import Path

from amrsim.config import DatasetConfig, one_off_dataset
from amrsim.errors import InputError
from amrsim.ingest.normalise import normalise_lang
from amrsim.ingest.readers import LINE, iter_rows
from amrsim.stages.ingest import ingest_tables
from amrsim.warehouse import Warehouse
from amrsim.warehouse.sources import CLI

SPLITS = ("train", "dev", "test")  # a split a file's name may say; a file that says none is split "all"


def one_off_pairs(file: Path, columns: dict[str, str], lang1: str, lang2: str, translations: dict[str, Path],
                  split: str | None = None, dataset: str | None = None) -> tuple[str, str, DatasetConfig]:
    """(dataset name, split, config) of a one-off pairs file: the split from the file's name when not given (else
    all), the name `file_<stem>_<hash of the paths>` when not given, never a pipeline's (the two would re-ingest over
    each other: docs/pipeline.md, dataset names). ValueError naming the problem when the config is invalid."""
    stem = file.name.split(".")[0].lower()
    split = split or next((s for s in SPLITS if re.search(rf"(^|[_.-]){s}($|[_.-])", stem)), "all")
    resolved = {lang: Path(path).resolve() for lang, path in translations.items()}
    name = dataset or one_off_dataset(file, resolved)
    ds = DatasetConfig(path=str(file), kind="pairs", lang=lang1, lang2=lang2 if lang2 != lang1 else None,
                       columns=columns, split=split,
                       translations={lang: {"path": str(path)} for lang, path in resolved.items()})
    return name, split, ds


def check_row_langs(file: Path, ds: DatasetConfig) -> None:
    """A lang/lang1/lang2 value that is not a language code stops the evaluation before anything is written,
    naming the row (an empty value means the --lang default)."""
    columns = [c for c in ("lang", "lang1", "lang2") if c in ds.columns]
    if not columns:
        return
    for chunk in iter_rows(file, ds.resolved_format(), columns):
        for row in chunk.iter_rows(named=True):
            for column in columns:
                value = (row[column] or "").strip()
                if value and normalise_lang(value) is None:
                    raise InputError(str(file), f"column {column}: '{value[:40]}' is not a language code",
                                     line=row[LINE])


def ingest_one_off(wh: Warehouse, name: str, ds: DatasetConfig, file: Path, run_id: str) -> None:
    """The file's rows (languages checked first) into dataset `name`, as the CLI's source of it."""
    check_row_langs(file, ds)
    ingest_tables(wh, name, ds, file.resolve(), run_id, pipeline="cli", origin=CLI,
                  hint="choose another --dataset, or leave it out: a file then gets a dataset of its own")
