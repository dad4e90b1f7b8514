"""Console output: progress for long work (a bar on a terminal, periodic lines in a log), the end-of-run summary
tables (rich), and JSON documents for scripts."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from pathlib import PurePath
from typing import IO, TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:  # only annotations: the command line imports this module before it needs polars
    import polars as pl

PROGRESS_LINE_SECONDS = 10.0  # a log gets one progress line per stage at most this often


def make_console(stderr: bool = False) -> Console:
    """A console that prints text as it is: cell values, titles and messages hold user data (sentences, SQL
    results, error text), so `[/quote]` or `:x:` must never be read as rich markup or an emoji code. Wide enough
    for summary tables when output is a pipe or a CI log (rich would default to 80 columns)."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False,
                   width=None if stream.isatty() else 160)


console = make_console()


def quiet_library_progress_bars(stream: IO[str] | None = None) -> bool:
    """When `stream` (stderr) is not a terminal, turn off the progress bars of transformers, huggingface_hub and
    tqdm: in a log file each redraw is another line, and loading bars would fill minutes of it. Set through the
    environment so libraries imported later and child processes (Prefect tasks, Ray workers) follow; a value the
    user set is kept. Returns whether bars were turned off."""
    if _is_terminal(stream or sys.stderr):
        return False
    for name in ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE"):
        os.environ.setdefault(name, "1")
    if "transformers" in sys.modules:  # it read the variable at import
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    return True


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


class ProgressLines:
    """Progress as plain lines for a log: `<what>: 1200/5000 rows (24%), 35 s`, at most one every `every` seconds,
    and one when the work is done."""

    def __init__(self, total: int, description: str, stream: IO[str], every: float = PROGRESS_LINE_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.description, self.stream, self.every, self.clock = total, description, stream, every, clock
        self.done = 0
        self.started = self.last_line = clock()

    def advance(self, n: int) -> None:
        self.done += n
        now = self.clock()
        if now - self.last_line >= self.every and self.done < self.total:
            self._line(now)

    def finish(self) -> None:
        self._line(self.clock())

    def _line(self, now: float) -> None:
        self.last_line = now
        percent = 100 * self.done / self.total if self.total else 100
        print(f"{self.description}: {self.done}/{self.total} rows ({percent:.0f}%), {now - self.started:.0f} s",
              file=self.stream, flush=True)


@contextmanager
def progress_bar(total: int, description: str, stream: IO[str] | None = None) -> Iterator[Callable[[int], None]]:
    """Yields an `advance(n)` callback. On stderr: a bar on a terminal, periodic lines otherwise (a log, a pipe,
    CI), never on stdout, which carries results. Nothing for tiny jobs."""
    if total < 256:
        yield lambda n: None
        return
    stream = stream or sys.stderr
    if not _is_terminal(stream):
        lines = ProgressLines(total, description, stream)
        yield lines.advance
        lines.finish()
        return
    with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(file=stream, markup=False, emoji=False, highlight=False),
                  transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


def summary_table(rows: Sequence[dict[str, Any]], title: str = "Run summary") -> Table:
    table = Table(title=title)
    columns = ["stage", "dataset", "rows_in", "computed", "failed", "rows_out", "seconds", "status"]
    for c in columns:
        table.add_column(c, justify="right" if c not in ("stage", "dataset", "status") else "left")
    for r in rows:
        table.add_row(*(str(r.get(c, "")) for c in columns))
    return table


# C0 and C1 control characters but tab and newline: ESC starts the sequences that clear the screen or set the
# clipboard (OSC 52), CR overwrites a line
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with terminal control characters shown as escapes (ESC -> `\\x1b`): a cell or message holding user
    data reaches a terminal as text, never as a command to it."""
    return CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def frame_table(frame: pl.DataFrame, title: str, float_digits: int = 2) -> Table:
    table = Table(title=printable(title))
    for c in frame.columns:
        table.add_column(printable(c), justify="right" if frame[c].dtype.is_numeric() else "left")
    for row in frame.iter_rows():
        table.add_row(*(f"{v:.{float_digits}f}" if isinstance(v, float) else printable(str(v)) for v in row))
    return table


def jsonable(value: Any) -> Any:
    """`value` as JSON types: dates and times as ISO 8601 strings, paths as strings, NaN and infinities (an
    undefined correlation) as null, numpy and Decimal numbers as numbers, bytes as hex, data frames as lists of
    row objects; anything else as its text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (dt.date, dt.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return jsonable(float(value))
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "to_dicts"):  # a polars DataFrame
        return jsonable(value.to_dicts())
    if hasattr(value, "tolist"):  # numpy arrays and scalars, polars Series
        return jsonable(value.tolist())
    return str(value)


def print_json(document: Any, stream: IO[str] | None = None) -> None:
    """One JSON document (see `jsonable`) on `stream` (stdout), followed by a newline."""
    out = stream or sys.stdout
    out.write(json.dumps(jsonable(document), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    out.flush()
