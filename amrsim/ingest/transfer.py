"""Reading transfer-task files (TSV/CSV/JSONL in the XNLI, SICK, PAWS-X, MARC conventions, MLDoc's headerless
`label<TAB>text`) into `TransferFile`s, every row left out kept with its line; the classifiers are
`amrsim.evaluate.transfer`'s."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from amrsim.errors import InputError
from amrsim.evaluate.transfer import BadRow, TransferFile, TransferTask, check_labels
from amrsim.files import file_format

LANG_COLUMNS = ("language", "lang")  # XNLI's all-language dev/test files and MARC's JSONL carry one of these

Column = str | int  # a header name, or a 0-based index in a headerless file

# (convention, text columns, label column), tried in order; header names match case-insensitively.
CONVENTIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("XNLI", ("premise", "hypothesis"), "label"),
    ("XNLI/SNLI", ("sentence1", "sentence2"), "gold_label"),
    ("SICK", ("sentence_A", "sentence_B"), "entailment_judgment"),
    ("PAWS-X", ("sentence1", "sentence2"), "label"),
    ("MARC", ("review_body",), "stars"),
    ("single text", ("text",), "label"),
    ("single sentence", ("sentence",), "label"),
)
MLDOC_COLUMNS: tuple[tuple[int, ...], int] = ((1,), 0)  # headerless `label\ttext`
SUFFIXES = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


def detect_columns(header: Sequence[str], path: str | Path = "header") -> tuple[tuple[str, ...], str]:
    """(text columns, label column) of the first built-in convention the header satisfies, spelt as in the
    header; InputError listing the header and every accepted convention when none fits."""
    by_lower = {h.strip().lower(): h for h in header}
    for _, texts, label in CONVENTIONS:
        wanted = (*texts, label)
        if all(w.lower() in by_lower for w in wanted):
            return tuple(by_lower[t.lower()] for t in texts), by_lower[label.lower()]
    accepted = "; ".join(f"{name}: {', '.join(texts)} + {label}" for name, texts, label in CONVENTIONS)
    raise InputError(str(path), f"no known transfer-task columns in header {list(header)}; accepted: {accepted}; "
                                f"MLDoc: headerless label<TAB>text (headerless=True)", line=1)


def _first_ragged_line(path: Path, sep: str) -> tuple[int, int, int] | None:
    with path.open(encoding="utf-8", errors="replace") as fh:
        expected = None
        for i, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            n = line.count(sep) + 1
            if expected is None:
                expected = n
            elif n != expected:
                return i, n, expected
    return None


def _read_delimited(path: Path, sep: str, headerless: bool) -> pl.DataFrame:
    quote = None if sep == "\t" else '"'
    try:
        return pl.read_csv(path, separator=sep, quote_char=quote, has_header=not headerless, infer_schema=False,
                           raise_if_empty=True)
    except pl.exceptions.NoDataError as err:
        raise InputError(str(path), "empty file") from err
    except pl.exceptions.ComputeError as err:
        ragged = _first_ragged_line(path, sep) if sep == "\t" else None
        if ragged:
            raise InputError(str(path), f"expected {ragged[2]} fields, found {ragged[1]}", line=ragged[0]) from err
        raise InputError(str(path), f"cannot be read as {'TSV' if sep == chr(9) else 'CSV'}: "
                                    f"{str(err).splitlines()[0]}") from err


def _read_jsonl(path: Path) -> tuple[pl.DataFrame, list[int]]:
    """JSONL read line by line (stdlib json) so every record keeps its exact file line; blank lines are skipped."""
    records, lines = [], []
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(str(path), f"invalid JSON: {err.msg}", line=i) from err
            if not isinstance(rec, dict):
                raise InputError(str(path), "expected a JSON object per line", line=i)
            records.append({k: None if v is None else str(v) for k, v in rec.items()})
            lines.append(i)
    if not records:
        raise InputError(str(path), "empty file")
    return pl.DataFrame(records, infer_schema_length=None), lines


def _column(df: pl.DataFrame, col: Column, path: Path) -> str:
    if isinstance(col, int):
        if not 0 <= col < df.width:
            raise InputError(str(path), f"column index {col} out of range: the file has {df.width} columns")
        return df.columns[col]
    if col not in df.columns:
        raise InputError(str(path), f"no column '{col}' in header {df.columns}", line=1)
    return col


def transfer_format(path: str | Path) -> str | None:
    """tsv, csv or jsonl by suffix (.txt is TSV); None for anything else (MLDoc's `german.train.1000`, a gzipped
    file: the readers take plain text)."""
    return file_format(path, SUFFIXES, gz=False)


def read_transfer_file(path: str | Path, text_cols: Sequence[Column] | None = None, label_col: Column | None = None,
                       lang: str | None = None, *, headerless: bool = False, fmt: str | None = None) -> TransferFile:
    """Texts and labels of one TSV/CSV/JSONL file (`fmt`, else by suffix; TSV unquoted). Columns default to the detected
    convention, or to MLDoc's `label\\ttext` when `headerless` (then columns are 0-based indices). `lang` keeps the
    rows of that language where the file has a language column (XNLI, MARC), else takes the file as that
    language. Rows with an empty text or label are returned in `bad_rows` with their line, never silently dropped."""
    path = Path(path)
    fmt = fmt or transfer_format(path)
    if fmt == "jsonl":
        if headerless:
            raise InputError(str(path), "headerless applies to TSV/CSV, not JSONL")
        df, lines = _read_jsonl(path)
    elif fmt in ("tsv", "csv"):
        df = _read_delimited(path, "," if fmt == "csv" else "\t", headerless)
        first = 1 if headerless else 2
        lines = list(range(first, first + df.height))
    else:
        raise InputError(str(path), f"unknown file type '{fmt or path.suffix}': expected .tsv, .txt, .csv or "
                                    f".jsonl, or fmt=tsv|csv|jsonl")

    if text_cols is None or label_col is None:
        default = MLDOC_COLUMNS if headerless else detect_columns(df.columns, path)
        text_cols = default[0] if text_cols is None else text_cols
        label_col = default[1] if label_col is None else label_col
    if not 1 <= len(text_cols) <= 2:
        raise InputError(str(path), f"expected 1 or 2 text columns, got {list(text_cols)}")
    names = [_column(df, c, path) for c in text_cols]
    label_name = _column(df, label_col, path)

    keep = np.ones(df.height, dtype=bool)
    if lang is not None:
        lang_col = next((c for c in df.columns if c.lower() in LANG_COLUMNS), None)
        if lang_col is not None:
            keep = (df[lang_col].fill_null("").str.strip_chars() == lang).to_numpy()

    cols = [df[n].to_list() for n in names]
    labels_raw = df[label_name].to_list()
    texts: list[list[str]] = [[] for _ in names]
    labels: list[str] = []
    bad: list[BadRow] = []
    for i in np.flatnonzero(keep):
        values = [c[i] for c in cols]
        label = (labels_raw[i] or "").strip()
        empty = [n for n, v in zip(names, values, strict=True) if v is None or not v.strip()]
        if empty or not label:
            reasons = [f"empty text in '{n}'" for n in empty] + ([f"missing label '{label_name}'"] if not label
                                                                    else [])
            bad.append(BadRow(lines[i], "; ".join(reasons)))
            continue
        for t, v in zip(texts, values, strict=True):
            t.append(v.strip())
        labels.append(label)
    return TransferFile(texts[0], texts[1] if len(texts) == 2 else None, labels, bad)


def load_task_file(task: TransferTask, path: str | Path, lang: str | None = None,
                   text_cols: Sequence[Column] | None = None, label_col: Column | None = None, *,
                   headerless: bool | None = None) -> TransferFile:
    """`read_transfer_file` checked against the task: the number of text columns fits its kind and every label
    is in its label set. MLDoc files (`english.train.1000`, any suffix but .csv/.jsonl) default to headerless TSV."""
    fmt = transfer_format(path)
    if task.name == "mldoc" and fmt is None:
        fmt = "tsv"
    if headerless is None:
        headerless = task.name == "mldoc" and fmt == "tsv"
    data = read_transfer_file(path, text_cols, label_col, lang, headerless=headerless, fmt=fmt)
    n_texts = 1 if data.texts2 is None else 2
    if n_texts != task.n_texts:
        raise InputError(str(path), f"task '{task.name}' is a {task.kind} task but the file gives {n_texts} "
                                    f"text column(s)")
    if task.label_names:
        check_labels(data.labels, task.label_names, path, what=f"task '{task.name}' labels")
    return data
