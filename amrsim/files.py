"""Files: written whole or not at all, and only amrsim's own; their format from the name; their header.

amrsim writes a file under the warehouse or the run directory in one of three ways, all here: whole (`atomic_write`:
a new temporary file renamed over the path, which replaces a link there rather than following it), in place
(`open_own`: lock files and logs, opened with O_NOFOLLOW and checked by fstat) or through a library that writes
into a directory (a model's `save`: `own_tree` checks the directory first). Each refuses (UnsafeFile) a path that
holds what amrsim did not make: a symlink, FIFO, device, socket or directory where a file goes; for a file written
in place also one with more than one hard link (writing it would change the other name's file) or of another
user. A concurrent attacker who swaps files while amrsim writes is not defended against: they can already rewrite
the warehouse; what is planted beforehand is found."""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from amrsim.errors import InputError, UnsafeFile

# pyarrow is imported inside the functions: importing this module must stay cheap

_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a stat mode is, in the words of an error message."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


LINK_LOOP = "symbolic link loop (too many levels of symbolic links)"


def absent_reason(path: Path | str, absent: str = "file not found") -> str:
    """Why a path `Path.is_file` or `exists` says is not there is not: a loop of symbolic links (ELOOP, which they
    read as absent) is named as such, anything else is `absent`."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return LINK_LOOP
    return absent


def _judge(path: Path, st: os.stat_result, in_place: bool) -> None:
    """Refuse `path` (its lstat or fstat `st`) unless it is a regular file; one written in place must also be
    this user's and have one name only."""
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFile(path, f"a symbolic link (to {os.readlink(path)})")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(path, file_kind(st.st_mode))
    if in_place and st.st_uid != os.geteuid():
        raise UnsafeFile(path, f"a file owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})")
    if in_place and st.st_nlink > 1:
        raise UnsafeFile(path, f"a file with {st.st_nlink} hard links (writing it would change the others too)")


def check_own(path: Path | str, in_place: bool = False) -> None:
    """Refuse (UnsafeFile) a `path` amrsim is about to write that holds anything but a regular file (see `_judge`);
    a missing path is fine."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _judge(path, st, in_place)


def own_dir(path: Path | str, make: bool = True) -> Path:
    """Make directory `path` (and its parents; `make=False`: a missing one is left missing) and refuse it if it is
    a symlink or not a directory: the files amrsim then creates in it by name stay in it."""
    path = Path(path)
    if make:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # a file or a dangling link: named below
            pass
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    if not stat.S_ISDIR(st.st_mode):
        what = f"a symbolic link (to {os.readlink(path)})" if stat.S_ISLNK(st.st_mode) else file_kind(st.st_mode)
        raise UnsafeFile(path, f"{what} where amrsim keeps a directory")
    return path


def open_own(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """A descriptor of `path` for writing in place (a lock, a log), created when missing: never through a symlink
    (O_NOFOLLOW), never blocking on a FIFO, never a file `check_own(in_place=True)` refuses (checked again on the
    open descriptor, so what was judged is what is written). Its directory must be `own_dir`'s."""
    path = Path(path)
    check_own(path, in_place=True)  # before opening: opening a device may already act
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            check_own(path, in_place=True)  # swapped since: name what is there now
        raise
    try:
        _judge(path, os.fstat(fd), in_place=True)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def own_tree(top: Path | str) -> None:
    """Refuse a directory amrsim is about to write into through a library (a model's `save`, `save_pretrained`,
    a checkpoint) if anything in it is not a directory or a regular file of one name (`check_own`): those write by
    name, through whatever they find. A missing `top` is fine."""
    top = Path(top)
    if not os.path.lexists(top):
        return
    if not top.is_dir():  # the top itself may be a link to a directory: `run_dir` judged where it leads
        _judge(top, os.lstat(top), in_place=True)  # a dangling link, a FIFO, ...: named
        raise UnsafeFile(top, "a regular file where amrsim keeps a directory")
    for folder, dirs, files in os.walk(top, onerror=_raise):  # not into linked folders: they are in `dirs`
        for name in [*dirs, *files]:
            path = Path(folder) / name
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                _judge(path, st, in_place=True)


def _raise(error: OSError) -> None:
    raise error



def write_failure_reason(e: BaseException, path: Path) -> str | None:
    """The reason a write of `path` failed as one phrase ('No space left on device'), or None when `e` is not about
    the file system. Polars and deltalake (Rust) report the operating system's error inside their own text: '...
    (os error 28)', except where polars' Parquet writer loses it in the footer ('Invalid thrift: transport error'):
    then the limit met is looked up."""
    if isinstance(e, OSError):
        return e.strerror or str(e)
    if (found := re.search(r"\(os error (\d+)\)", str(e))) is not None:
        return os.strerror(int(found.group(1)))
    if "transport error" in str(e):
        import resource

        if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
            return os.strerror(errno.EFBIG)
        try:
            if os.statvfs(path.parent).f_bavail == 0:
                return os.strerror(errno.ENOSPC)
        except OSError:
            pass
        return "the write failed"
    return None


def atomic_write(path: Path | str, write: Callable[[Path], object], own: bool = True) -> None:
    """`write(tmp)` to a new temporary file next to `path`, then rename it over `path`: readers see the old file or
    the new one, never half of one. The temporary file is created new (O_EXCL: not through a link planted under
    its name, which nobody can guess) with the mode open() would give. `own`: `path` is amrsim's (under the
    warehouse or the run directory), so anything there but a regular file is refused (`check_own`); a hard link
    is fine, the rename replaces only this name. `own=False` for a path the user named (--out, judged by
    `check_out`): a link there is replaced by the file. If writing or the rename fails, the temporary file is
    removed and the error raised; `path` is left as it was."""
    path = Path(path)
    if own:
        check_own(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    tmp = Path(name)
    try:
        try:
            os.fchmod(fd, 0o666 & ~process_umask())  # mkstemp's 0600 would hide the file from the umask's readers
        finally:
            os.close(fd)
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
    for folder, _, files in os.walk(root):  # never into a linked folder
        for path in (Path(folder) / name for name in files if Path(name).match(pattern)):
            check_own(path, in_place=True)  # a link or a hard link: chmod would change the file it leads to
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

