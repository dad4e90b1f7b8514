"""Readers for TSV (no quoting), CSV, JSONL(.gz), Parquet and Hugging Face datasets.

Each returns a polars frame of the requested columns as strings (None where absent) plus `__line`, the 1-based
line (or row) of the file, so every later error can name it. Structural problems (encoding, header, field count,
empty file) raise InputError naming the file and line: such a file is rejected whole, before anything is written.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import Any

import polars as pl

from amrsim.errors import InputError

LINE = "__line"


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(str(path), f"cannot read: {e.strerror}") from None
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise InputError(str(path), f"not a valid gzip file: {e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(str(path), f"not valid UTF-8 (byte 0x{raw[e.start]:02x})", line) from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputError(str(path), "empty file")
    return text


def _check_header(path: Path, header: list[str], wanted: list[str]) -> None:
    missing = [c for c in wanted if c not in header]
    if missing:
        raise InputError(str(path), f"header lacks column(s) {missing}; found {header}", 1)
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise InputError(str(path), f"header repeats column(s) {dupes}", 1)


def _frame(rows: list[list[Any]], columns: list[str]) -> pl.DataFrame:
    schema = {c: pl.String for c in columns} | {LINE: pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _as_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value != value:  # NaN means missing
        return None
    return value if isinstance(value, str) else str(value)


def read_delimited(path: Path, columns: list[str], delimiter: str) -> pl.DataFrame:
    """TSV: split on tabs with no quoting (as ../shared/data is written). CSV: RFC 4180 quoting."""
    text = _read_text(path)
    if delimiter == "\t":
        lines = text.split("\n")
        while lines and not lines[-1].strip():
            lines.pop()
        records = ((i + 1, line.removesuffix("\r").split("\t")) for i, line in enumerate(lines))
    else:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        records = ((reader.line_num, rec) for rec in reader if rec)
    try:
        _, header = next(records)
    except StopIteration:
        raise InputError(str(path), "empty file") from None
    header = [h.strip() for h in header]
    _check_header(path, header, columns)
    idx = [header.index(c) for c in columns]
    rows: list[list[Any]] = []
    try:
        for line_no, fields in records:
            if len(fields) != len(header):
                raise InputError(str(path), f"expected {len(header)} fields separated by "
                                 f"{'tabs' if delimiter == chr(9) else repr(delimiter)}, found {len(fields)}",
                                 line_no)
            rows.append([fields[i] for i in idx] + [line_no])
    except csv.Error as e:
        raise InputError(str(path), f"malformed CSV: {e}", reader.line_num) from None
    if not rows:
        raise InputError(str(path), "header but no data rows", 1)
    return _frame(rows, columns)


def read_jsonl(path: Path, columns: list[str]) -> pl.DataFrame:
    text = _read_text(path)
    rows: list[list[Any]] = []
    seen: set[str] = set()
    for i, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(str(path), f"invalid JSON: {e.msg} (column {e.colno})", i) from None
        if not isinstance(obj, dict):
            raise InputError(str(path), f"expected a JSON object, found {type(obj).__name__}", i)
        seen.update(obj)
        rows.append([_as_str(obj.get(c)) for c in columns] + [i])
    missing = [c for c in columns if c not in seen]
    if missing:
        raise InputError(str(path), f"no record has key(s) {missing}; found {sorted(seen)}")
    return _frame(rows, columns)


def read_parquet(path: Path, columns: list[str]) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(path)
    except Exception as e:  # polars raises several types for corrupt files
        raise InputError(str(path), f"not a readable Parquet file: {e}") from None
    _check_header(path, frame.columns, columns)
    if frame.height == 0:
        raise InputError(str(path), "no rows")
    return _from_records(frame.select(columns).to_dicts(), columns)


def _from_records(records: list[dict[str, Any]], columns: list[str]) -> pl.DataFrame:
    rows = [[_as_str(r.get(c)) for c in columns] + [i] for i, r in enumerate(records, start=1)]
    return _frame(rows, columns)


def read_hf(name: str, columns: list[str], split: str | None) -> pl.DataFrame:
    """`hf:<dataset id>[:<config>]`, needs `pip install amrsim[hf]` and a network (or a local HF cache)."""
    try:
        import datasets  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise InputError(name, "reading a Hugging Face dataset needs the optional extra: "
                         "pip install 'amrsim[hf]'") from None
    ident = name.removeprefix("hf:")
    repo, _, subset = ident.partition(":")
    try:
        ds = datasets.load_dataset(repo, subset or None, split=split or "train")
    except Exception as e:  # offline, unknown id, bad split: all surface as one line
        raise InputError(name, f"cannot load from the hub: {type(e).__name__}: {e}") from None
    missing = [c for c in columns if c not in ds.column_names]
    if missing:
        raise InputError(name, f"dataset lacks column(s) {missing}; found {ds.column_names}")
    return _from_records(list(ds.select_columns(columns)), columns)


def read_rows(path: Path | str, fmt: str, columns: list[str], hf_split: str | None = None) -> pl.DataFrame:
    """Dispatch on format; `columns` are the file's column names to keep, in order."""
    if fmt == "hf":
        return read_hf(str(path), columns, hf_split)
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), "file not found")
    if fmt == "tsv":
        return read_delimited(path, columns, "\t")
    if fmt == "csv":
        return read_delimited(path, columns, ",")
    if fmt == "jsonl":
        return read_jsonl(path, columns)
    if fmt == "parquet":
        return read_parquet(path, columns)
    raise InputError(str(path), f"unknown format '{fmt}'")
