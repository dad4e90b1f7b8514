"""Files: written whole or not at all; their format from the name; their header."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from amrsim.errors import InputError

# pyarrow is imported inside the functions: importing this module must stay cheap


def atomic_write(path: Path | str, write: Callable[[Path], object]) -> None:
    """`write(tmp)` to a temporary file next to `path`, then rename it over `path`: readers see the old file or the
    new one, never half of one. If writing or the rename fails, the temporary file is removed and the error raised;
    `path` is left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # a file system that fails the write may fail this too: the write's error is the news
            pass
        raise



def atomic_json(path: Path, obj: Any) -> None:
    """Write JSON to a temporary file and rename it over `path`: readers never see half a file."""
    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))



def process_umask() -> int:
    """The process umask, read without changing it where Linux shows it (/proc/self/status); elsewhere set and
    restored at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def ordinary_modes(root: Path, pattern: str = "*.safetensors") -> None:
    """Give the files under `root` matching `pattern` the mode open() gives a new file (0o666 less the umask).
    safetensors 0.8 writes through a temporary file created 0600 whatever the umask (safetensors#782), so weights
    would be readable by their writer only, unlike the JSON beside them."""
    mode = 0o666 & ~process_umask()
    for path in root.rglob(pattern):
        os.chmod(path, mode)


def looks_like_path(model: str) -> bool:
    """A model named by a filesystem path (absolute, ./, ~, deeper than org/name) rather than a hub id ('name' or
    'org/name', e.g. Helsinki-NLP/opus-mt-en-de)."""
    return model.startswith(("/", ".", "~")) or model.count("/") > 1 or "\\" in model


TABLE_FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}


def file_format(path: Path | str, formats: Mapping[str, str] = TABLE_FORMATS, default: str | None = None,
                gz: bool = True) -> str | None:
    """The format a file's name says (`formats` maps suffix -> format; .tsv, .csv, .jsonl, .parquet by default),
    looking past a final .gz (data.tsv.gz is tsv) unless the reader cannot decompress (`gz=False`); `default` when
    no suffix matches."""
    name = Path(str(path)).name.lower()
    name = name.removesuffix(".gz") if gz else name
    return next((fmt for suffix, fmt in formats.items() if name.endswith(suffix)), default)


def header_columns(path: Path | str, fmt: str | None) -> list[str]:
    """Column names of a file of format `fmt`: its TSV/CSV header line, its first JSON object's keys or its Parquet
    schema ([] for another format or an unreadable first line). Reads only the start of the file (and a Parquet
    file's footer: one that is not Parquet is an InputError naming it)."""
    path = Path(str(path))
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq  # pyarrow loads in ~0.3 s: only for Parquet files

        try:
            return list(pq.ParquetFile(path).schema_arrow.names)
        except pa.ArrowException as e:  # not Parquet, truncated: the reader would fail the same way later
            raise InputError(str(path), f"not a readable Parquet file ({str(e).splitlines()[0]})") from None
    if fmt not in ("tsv", "csv", "jsonl"):
        return []
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        first = f.readline().rstrip("\r\n")
    if fmt == "jsonl":
        try:
            record = json.loads(first) if first.strip() else None
        except ValueError:
            return []
        return list(record) if isinstance(record, dict) else []
    return [c.strip() for c in first.split("\t" if fmt == "tsv" else ",")]


def file_digest(path: Path | str) -> str:
    """Content digest of a file (size + sha256 of its bytes): part of an evaluation result's key."""
    p = Path(str(path))
    h = hashlib.sha256()
    with p.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"{p.stat().st_size}:{h.hexdigest()[:16]}"

