"""Readers for TSV (no quoting), CSV, JSONL(.gz), Parquet, plain text lines, Hugging Face datasets and PENMAN files
of graphs.

Each yields polars frames of at most `chunk_rows` rows: the requested columns as strings (None where absent) plus
`__line`, the 1-based line (or row) of the file, so every later error can name it, and `__error`: why the row's
cells cannot be used (None when they can). A JSONL/Parquet cell that is a list, object or boolean, or a number in a
text column, is never turned into its Python repr: the cell reads as None and `__error` names the column and type,
so the row becomes a failed row. The file is read as a stream, so
memory holds one chunk, not the file. Structural problems (encoding, header, field count, empty file) raise
InputError naming the file and line: ingest stages chunks out of sight and commits only after the last one, so such
a file is rejected whole, before anything is written.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import numbers
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
import polars as pl
import pyarrow.parquet as pq

from amrsim.errors import InputError
from amrsim.files import absent_reason

# datasets is imported inside the functions: importing this module must stay cheap

LINE = "__line"
ERROR = "__error"  # why a row's cells cannot be used (a list where text belongs); None when they can
APPENDABLE = ("tsv", "csv", "jsonl")  # text formats a writer can append rows to, so a read can resume at an offset
CHUNK_ROWS = 50_000  # rows per chunk: a few tens of MB of Python objects for a row with two AMR graphs


def _open(path: Path) -> IO[bytes]:
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")
    except OSError as e:
        raise InputError(str(path), f"cannot read: {e.strerror}") from None


def _raw_lines(path: Path, tail: Tail | None = None, header: bool = True) -> Iterator[tuple[int, bytes]]:
    """(line number, the line's bytes with its newline) of a file; with `tail` only the header line (if `header`)
    and the lines after `tail.offset` bytes, numbered as in the whole file. Raises InputError for an unreadable file
    or a corrupt gzip stream."""
    with _open(path) as f:
        try:
            lines: Iterator[tuple[int, bytes]] = enumerate(f, start=1)
            if tail is not None:
                first = [(1, f.readline())] if header else []
                f.seek(tail.offset)
                lines = itertools.chain(first, enumerate(f, start=tail.lines + 1))
            yield from lines
        except (OSError, EOFError) as e:  # gzip reports corruption while reading
            if path.suffix == ".gz":
                raise InputError(str(path), f"not a valid gzip file: {e}") from None
            raise InputError(str(path), f"cannot read: {e}") from None


def _decoded(path: Path, number: int, raw: bytes) -> str:
    """A line's text without its newline; InputError naming the line if it is not UTF-8, or if it is line 1 and
    holds a CR inside (a file with CR-only line endings). Line 1 loses a byte-order mark."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"not valid UTF-8 (byte 0x{raw[e.start]:02x})", number) from None
    if number == 1:
        text = text.removeprefix("\ufeff")
        if "\r" in text.removesuffix("\n").removesuffix("\r"):  # never echo the file as one "line"
            raise InputError(str(path), "line endings are CR only; convert the file to LF (or CRLF) line endings", 1)
    return text.removesuffix("\n")


def _text_lines(path: Path, tail: Tail | None = None, header: bool = True) -> Iterator[tuple[int, str]]:
    """(line number, text without its newline), decoded line by line so a bad byte names its line; raises
    InputError for an unreadable, non-UTF-8 or empty file. With `tail` only the header line (if `header`) and the
    lines after `tail.offset` bytes are read, numbered as in the whole file."""
    any_text = False
    for number, raw in _raw_lines(path, tail, header):
        text = _decoded(path, number, raw)
        any_text = any_text or bool(text.strip())
        yield number, text
    if not any_text and tail is None:
        raise InputError(str(path), "empty file")


@dataclass(frozen=True)
class Tail:
    """Where the rows appended since a previous read start: after `offset` bytes, which held `lines` lines."""

    offset: int
    lines: int


def _short(value: Any, limit: int = 200) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _check_header(path: Path, header: list[str], wanted: list[str]) -> None:
    missing = [c for c in wanted if c not in header]
    if missing:
        raise InputError(str(path), f"header lacks column(s) {missing}; found {_short(header)}", 1)
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise InputError(str(path), f"header repeats column(s) {dupes}", 1)


def _frame(rows: list[list[Any]], columns: list[str]) -> pl.DataFrame:
    """Rows of [cell per column..., line, error]."""
    schema = {c: pl.String for c in columns} | {LINE: pl.Int64, ERROR: pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, numbers.Number):
        return "a number"
    return f"a {type(value).__name__} value"


def _typed_row(record: dict[str, Any], columns: list[str], text_columns: Collection[str], line: int) -> list[Any]:
    """[cell per column..., line, error] of a JSON object or Parquet row: strings as they are, numbers as their
    text outside `text_columns` (ids, scores, labels), NaN and null as None; anything else is None with a reason."""
    cells: list[str | None] = []
    problems = []
    for c in columns:
        value = record.get(c)
        if value is None or isinstance(value, str):
            cells.append(value)
        elif isinstance(value, float) and value != value:  # NaN means missing
            cells.append(None)
        elif (c not in text_columns and isinstance(value, numbers.Number)
              and not isinstance(value, (bool, complex))):
            cells.append(str(value))
        else:
            cells.append(None)
            wanted = "a string" if c in text_columns else "a string or number"
            problems.append(f"column '{c}' holds {_kind(value)}, not {wanted}")
    return [*cells, line, "; ".join(problems) or None]


def _chunked(rows: Iterator[list[Any]], columns: list[str], chunk_rows: int) -> Iterator[pl.DataFrame]:
    batch: list[list[Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= chunk_rows:
            yield _frame(batch, columns)
            batch = []
    if batch:
        yield _frame(batch, columns)


def _tsv_records(path: Path, tail: Tail | None) -> Iterator[tuple[int, int, list[str]]]:
    """(first line, last line, fields) of tab-split lines; blank lines at the end of the file are ignored, blank
    lines before data are records."""
    blank: list[tuple[int, str]] = []
    for number, text in _text_lines(path, tail):
        if not text.strip():
            blank.append((number, text))
            continue
        for b_number, b_text in blank:
            yield b_number, b_number, b_text.removesuffix("\r").split("\t")
        blank = []
        yield number, number, text.removesuffix("\r").split("\t")


BACKSLASH_QUOTE = ('backslash-escaped quote (\\") in a quoted field: CSV escapes a quote by doubling it (""); '
                   'write the file with doubled quotes (or as TSV or JSONL)')


def _backslash_escape(text: str, delimiter: str, quoted: bool) -> bool:
    r"""Whether a CSV line (`quoted`: it starts inside a quoted field) escapes a quote inside a quoted field with a
    backslash (`"he said \"hi\" to me"`), as some writers do instead of doubling it as RFC 4180 does. Such a
    quote ends the field early and the csv module reads on: the text garbled (`he said \hi\" to me"`) or a field
    too many. A backslash that ends a field (`"C:\dir\"`) and a doubled quote after a backslash (`"a \""b"`) are
    RFC 4180 and read as written; a backslash and two quotes before the delimiter or the line's end is taken for
    an escape and the closing quote (`"5'10\""`), which RFC 4180 would read as a field running on past the line."""
    n, i, start = len(text), 0, not quoted
    while i < n:
        c = text[i]
        if quoted:
            if c == '"':
                after = text[i + 1] if i + 1 < n else "\n"
                if after == '"':  # a doubled quote, or after a backslash the escape's quote and the closing one
                    if text[i - 1:i] == "\\" and (i + 2 >= n or text[i + 2] in (delimiter, "\r")):
                        return True
                    i += 2
                    continue
                if after not in (delimiter, "\r", "\n") and text[i - 1:i] == "\\":
                    return True
                quoted = False  # closed (or a stray quote: the csv module reads on unquoted)
            i += 1
            continue
        if c == '"' and start:
            quoted = True
        start = c == delimiter
        i += 1
    return False


def _csv_records(path: Path, delimiter: str, tail: Tail | None) -> Iterator[tuple[int, int, list[str]]]:
    """(first line, last line, fields) of RFC 4180 records (a quoted field may span lines). A quote left open runs
    to the end of the file: reported at the line where it opened, not where the file ended."""
    # the csv module reads one line at a time and never ahead, so the line counter is exact for each record;
    # `quoted`: the record's lines so far hold an odd number of '"', i.e. a quoted field is open (opened on `opened`)
    state = {"line": 0, "first": 0, "new": True, "quoted": False, "opened": 0}

    def lines() -> Iterator[str]:
        for number, text in _text_lines(path, tail):
            state["line"] = number
            if state["new"]:
                state.update(first=number, new=False, quoted=False)
            if '\\"' in text and _backslash_escape(text, delimiter, bool(state["quoted"])):
                raise InputError(str(path), BACKSLASH_QUOTE, number)
            if text.count('"') % 2:
                state.update(quoted=not state["quoted"], opened=number)
            yield text + "\n"

    reader = csv.reader(lines(), delimiter=delimiter)
    try:
        for rec in reader:
            state["new"] = True
            # a literal '"' inside an unquoted field (5" tall) leaves the count odd but ends at its line's newline;
            # an open quote swallows the newlines, so a field ending in one means the file ended inside the quote
            if state["quoted"] and any(f.endswith("\n") for f in rec):
                raise InputError(str(path), f"unclosed quote: the quoted field opened on line {state['opened']} "
                                            f"never closes", state["opened"])
            if rec:
                yield state["first"], state["line"], rec
    except csv.Error as e:
        raise InputError(str(path), f"malformed CSV: {e}", state["line"]) from None


def iter_delimited(path: Path, columns: list[str], delimiter: str, chunk_rows: int = CHUNK_ROWS,
                   tail: Tail | None = None) -> Iterator[pl.DataFrame]:
    """TSV: split on tabs with no quoting (as ../shared/data is written). CSV: RFC 4180 quoting; a quote escaped
    with a backslash inside a quoted field is an InputError at its line (`_backslash_escape`), never garbled text."""
    records = _tsv_records(path, tail) if delimiter == "\t" else _csv_records(path, delimiter, tail)
    try:
        _, _, header = next(records)
    except StopIteration:
        raise InputError(str(path), "empty file") from None
    header = [h.strip() for h in header]
    _check_header(path, header, columns)
    idx = [header.index(c) for c in columns]
    sep = "tabs" if delimiter == "\t" else repr(delimiter)

    def rows() -> Iterator[list[Any]]:
        for first, line_no, fields in records:
            if len(fields) != len(header):
                spans = f" in the record of lines {first}-{line_no} (a quoted field spans them)" \
                    if first != line_no else ""
                raise InputError(str(path), f"expected {len(header)} fields separated by {sep}, found {len(fields)}"
                                            f"{spans}", first)
            yield [fields[i] for i in idx] + [line_no, None]

    empty = True
    for chunk in _chunked(rows(), columns, chunk_rows):
        empty = False
        yield chunk
    if empty and tail is None:
        raise InputError(str(path), "header but no data rows", 1)


def _json_object(line: str, columns: list[str]) -> tuple[Any, bool]:
    """(`json.loads(line)`, whether json read it), by orjson (a few times faster) where that gives the same: orjson
    is stricter (no NaN, no lone surrogate, no integer beyond 64 bits: all go to json, whose errors name the problem)
    and reads a large integer as a float, so a line whose wanted cell is a float is read by json too."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line), True
    if type(obj) is not dict or any(type(obj.get(c)) is float for c in columns):
        return json.loads(line), True
    return obj, False


def _without_lone_surrogates(row: list[Any], columns: list[str]) -> list[Any]:
    """`row` ([cell per column..., line, error]) with each cell holding half a surrogate pair (JSON's `"\\ud800"`,
    which json reads into a str that is not valid Unicode and no table can store) set to None and named in the
    row's error. Only json-read lines can hold one: orjson refuses them."""
    problems = []
    for i, c in enumerate(columns):
        cell = row[i]
        if cell is None:
            continue
        try:
            cell.encode("utf-8")
        except UnicodeEncodeError as e:
            row[i] = None
            problems.append(f"column '{c}' holds a lone surrogate (\\u{ord(cell[e.start]):04x} at character "
                            f"{e.start + 1}), not valid Unicode text")
    if problems:
        row[-1] = "; ".join([*([row[-1]] if row[-1] else []), *problems])
    return row


_STR_ONLY = {str}


def iter_jsonl(path: Path, columns: list[str], chunk_rows: int = CHUNK_ROWS,
               tail: Tail | None = None, text_columns: Collection[str] = ()) -> Iterator[pl.DataFrame]:
    """Rows are kept as lists of cells and become a frame per chunk. A line past the first whose wanted cells are all
    strings takes the short way (orjson straight from its bytes, which also checks they are UTF-8); any other line
    (line 1, a blank line, a number, list or missing cell, a line orjson refuses) the general one, whose cells,
    errors and messages are those of `_typed_row` and `_json_object`."""
    seen: set[str] = set()  # keys of the lines read the general way: a line read the short way has every column
    width = len(columns)
    rows: list[list[Any]] = []
    lines: list[int] = []
    errors: list[str | None] = []
    any_text = any_short = False

    def frame() -> pl.DataFrame:
        schema = {c: pl.String for c in columns} | {LINE: pl.Int64, ERROR: pl.String}
        cells = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]
        return pl.DataFrame([*cells, lines, errors], schema=schema, orient="col")

    for number, raw in _raw_lines(path, tail, header=False):
        obj = None
        if number > 1:
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                pass
        if type(obj) is dict:
            row = [obj.get(c) for c in columns]
            short = set(map(type, row)) == _STR_ONLY
        else:
            short = False
        if short:
            rows.append(row)
            errors.append(None)
            any_short = True
        else:
            line = _decoded(path, number, raw)
            if not line.strip():
                continue
            try:
                obj, by_json = _json_object(line, columns)
            except json.JSONDecodeError as e:
                raise InputError(str(path), f"invalid JSON: {e.msg} (column {e.colno})", number) from None
            if not isinstance(obj, dict):
                raise InputError(str(path), f"expected a JSON object, found {type(obj).__name__}", number)
            seen.update(obj)
            row = _typed_row(obj, columns, text_columns, number)
            if by_json:
                row = _without_lone_surrogates(row, columns)
            rows.append(row[:width])
            errors.append(row[-1])
        any_text = True
        lines.append(number)
        if len(lines) >= chunk_rows:
            yield frame()
            rows, lines, errors = [], [], []
    if lines:
        yield frame()
    if not any_text and tail is None:
        raise InputError(str(path), "empty file")
    missing = [c for c in columns if c not in seen]
    if missing and not any_short and tail is None:  # known only at the end: ingest commits nothing before it
        raise InputError(str(path), f"no record has key(s) {missing}; found {sorted(seen)}")


def iter_parquet(path: Path, columns: list[str], chunk_rows: int = CHUNK_ROWS,
                 text_columns: Collection[str] = ()) -> Iterator[pl.DataFrame]:
    try:
        file = pq.ParquetFile(path)
        names = file.schema_arrow.names
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise InputError(str(path), f"not a readable Parquet file: {e}") from None
    _check_header(path, names, columns)
    if file.metadata.num_rows == 0:
        raise InputError(str(path), "no rows")
    start = 1
    try:
        for batch in file.iter_batches(batch_size=chunk_rows, columns=columns):
            records = batch.to_pylist()
            yield _frame([_typed_row(r, columns, text_columns, start + i) for i, r in enumerate(records)], columns)
            start += len(records)
    except InputError:
        raise
    except Exception as e:
        raise InputError(str(path), f"not a readable Parquet file: {e}", start) from None


def _from_records(records: list[dict[str, Any]], columns: list[str], text_columns: Collection[str] = ()
                  ) -> pl.DataFrame:
    return _frame([_typed_row(r, columns, text_columns, i) for i, r in enumerate(records, start=1)], columns)


def read_hf(name: str, columns: list[str], split: str | None, text_columns: Collection[str] = ()) -> pl.DataFrame:
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
    return _from_records(list(ds.select_columns(columns)), columns, text_columns)


def iter_rows(path: Path | str, fmt: str, columns: list[str], hf_split: str | None = None,
              chunk_rows: int = CHUNK_ROWS, tail: Tail | None = None,
              text_columns: Collection[str] = ()) -> Iterator[pl.DataFrame]:
    """Dispatch on format; `columns` are the file's column names to keep, in order. A Hugging Face dataset is one
    chunk (the datasets library holds it memory-mapped already). `tail`: only the rows appended after a previous
    read (text formats). `text_columns`: columns whose typed cells (JSONL, Parquet, HF) must be strings; the others
    may hold numbers too (ids, scores, labels)."""
    if tail is not None and fmt not in APPENDABLE:
        raise ValueError(f"a {fmt} file cannot be read from an offset")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    if fmt == "hf":
        yield read_hf(str(path), columns, hf_split, text_columns)
        return
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), absent_reason(path))
    if fmt == "tsv":
        yield from iter_delimited(path, columns, "\t", chunk_rows, tail)
    elif fmt == "csv":
        yield from iter_delimited(path, columns, ",", chunk_rows, tail)
    elif fmt == "jsonl":
        yield from iter_jsonl(path, columns, chunk_rows, tail, text_columns)
    elif fmt == "parquet":
        yield from iter_parquet(path, columns, chunk_rows, text_columns)
    elif fmt == "lines":  # plain text: each line (blank ones too) is a row of the one column
        lines = ([text.removesuffix("\r"), number, None] for number, text in _text_lines(path, tail, header=False))
        yield from _chunked(lines, columns[:1], chunk_rows)
    else:
        raise InputError(str(path), f"unknown format '{fmt}'")


def read_penman_graphs(path: Path | str) -> list[tuple[int, str]]:
    """The graphs of a PENMAN file as AMR releases and smatch's `-f` files write them (graphs separated by blank
    lines, ``#`` lines before a graph kept as its metadata), each with the line it starts on; a block of comment lines
    alone is no graph. InputError for an unreadable, non-UTF-8 or empty file, or one without a graph."""
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), absent_reason(path))
    graphs: list[tuple[int, str]] = []
    block: list[str] = []
    start = 0

    def close() -> None:
        if any(not line.lstrip().startswith("#") for line in block):
            graphs.append((start, "\n".join(block)))

    for number, text in _text_lines(path, header=False):
        if text.strip():
            if not block:
                start = number
            block.append(text.rstrip("\r"))
        elif block:
            close()
            block = []
    if block:
        close()
    if not graphs:
        raise InputError(str(path), "no PENMAN graph (only comment lines)")
    return graphs


def read_graph_pairs(first: Path | str, second: Path | str, columns: tuple[str, str] = ("amr1", "amr2"),
                     ) -> pl.DataFrame:
    """Two PENMAN files paired graph by graph (smatch's `-f a b`): `columns`, `__line` (the pair's number, 1-based:
    the n-th graph of each file), `__error` (None) and `__start1`/`__start2` (the line each graph starts on).
    InputError naming the second file where the counts differ."""
    a, b = read_penman_graphs(first), read_penman_graphs(second)
    if len(a) != len(b):
        raise InputError(str(second), f"holds {len(b)} graphs, {first} holds {len(a)}: the two files pair graph by "
                                      "graph")
    return pl.DataFrame({columns[0]: [t for _, t in a], columns[1]: [t for _, t in b],
                         LINE: list(range(1, len(a) + 1)), ERROR: [None] * len(a),
                         "__start1": [n for n, _ in a], "__start2": [n for n, _ in b]},
                        schema={columns[0]: pl.String, columns[1]: pl.String, LINE: pl.Int64, ERROR: pl.String,
                                "__start1": pl.Int64, "__start2": pl.Int64})


def read_rows(path: Path | str, fmt: str, columns: list[str], hf_split: str | None = None,
              text_columns: Collection[str] = ()) -> pl.DataFrame:
    """The whole file as one frame (see `iter_rows`)."""
    return pl.concat(list(iter_rows(path, fmt, columns, hf_split, text_columns=text_columns)), how="vertical")
