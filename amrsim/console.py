"""Console output: progress for long work (a bar on a terminal, periodic lines in a log), the end-of-run summary
tables (rich), and JSON documents for scripts."""

from __future__ import annotations

import datetime as dt
import json
import logging
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
PROGRESS_LEAST = 256  # jobs of fewer units show no progress (seconds of work); both read at each call: tests lower them
SUMMARY_COLUMNS = ("stage", "dataset", "rows_in", "computed", "failed", "rows_out", "seconds", "status")

# What the console shows (progress, stage summaries) as log records, for a log that does not see the console: a
# Prefect flow run's (flows/ attach Prefect's handler here). Not propagated, so a console that already shows the bar
# or table does not print it twice; the null handler keeps logging's last resort from printing a warning.
log = logging.getLogger(__name__)
log.propagate = False
log.addHandler(logging.NullHandler())


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
    and one when the work is done; on `stream`, and as records of `logger` where one is given."""

    def __init__(self, total: int, description: str, stream: IO[str] | None, every: float | None = None,
                 clock: Callable[[], float] = time.monotonic, unit: str = "rows",
                 logger: logging.Logger | None = None):
        self.total, self.description, self.stream, self.clock = total, description, stream, clock
        self.every = PROGRESS_LINE_SECONDS if every is None else every
        self.unit, self.logger = unit, logger
        self.done = self.already = 0
        self.started = self.last_line = clock()

    def advance(self, n: int) -> None:
        self.done += n
        now = self.clock()
        if now - self.last_line >= self.every and self.done < self.total:
            self._line(now)

    def plan(self, todo: int, already: int) -> None:
        """The work is `todo` rows; `already` more were computed before (a rerun)."""
        self.total, self.already = todo, already

    def finish(self) -> None:
        if self.total == 0 and self.already:
            self._say(f"{self.description}: {self.already} {self.unit} already computed")
            return
        if self.total == self.done == 0:  # planned with nothing to do, and nothing done before: no line
            return
        self._line(self.clock())

    def _line(self, now: float) -> None:
        self.last_line = now
        percent = 100 * self.done / self.total if self.total else 100
        already = f" ({self.already} already computed)" if self.already else ""
        self._say(f"{self.description}: {self.done}/{self.total} {self.unit}{already} ({percent:.0f}%), "
                  f"{now - self.started:.0f} s")

    def _say(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)
        if self.logger is not None:
            self.logger.info("%s", text)


class Advance:
    """What `progress_bar` yields: call it with the rows just done; `plan(todo, already)` once the work is known."""

    def __init__(self, advance: Callable[[int], None] = lambda n: None,
                 plan: Callable[[int, int], None] = lambda todo, already: None):
        self._advance, self.plan = advance, plan

    def __call__(self, n: int) -> None:
        self._advance(n)


# the progress shown now, per stream: work inside other work (a file's embeddings within a directory's files) adds a
# line to the bar on a terminal, and is left to the outer work's lines in a log (one line per 10 s, not one per file)
_bars: list[Progress] = []
_lines: list[IO[str]] = []


@contextmanager
def progress_bar(total: int, description: str, stream: IO[str] | None = None, unit: str = "rows",
                 least: int | None = None) -> Iterator[Advance]:
    """Yields an `advance(n)` callback (with `.plan(todo, already)`). On stderr: a bar on a terminal, periodic lines
    otherwise (a log, a pipe, CI), never on stdout, which carries results; the same lines as records of this
    module's logger (a flow run's log). Nothing for jobs of fewer than `least` units (default `PROGRESS_LEAST`).
    Work found done already (a rerun) says so instead of a bar at 0%. Inside another bar on the same terminal, a
    second line of that bar (two live displays would overwrite each other)."""
    if total < (PROGRESS_LEAST if least is None else least):
        yield Advance()
        return
    stream = stream or sys.stderr
    if not _is_terminal(stream):
        if stream in _lines:
            yield Advance()
            return
        lines = ProgressLines(total, description, stream, unit=unit, logger=log)
        _lines.append(stream)
        try:
            yield Advance(lines.advance, lines.plan)
        finally:
            _lines.pop()
        lines.finish()
        return
    records = ProgressLines(total, description, None, unit=unit, logger=log)  # the log's lines beside the bar
    outer = next((p for p in reversed(_bars) if p.console.file is stream), None)
    progress = outer or Progress(
        TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(file=stream, markup=False, emoji=False, highlight=False), transient=True)
    planned: dict[str, int] = {}
    if outer is None:
        progress.start()
    _bars.append(progress)
    try:
        task = progress.add_task(description, total=total)

        def plan(todo: int, already: int) -> None:
            planned.update(todo=todo, already=already)
            records.plan(todo, already)
            label = f"{description} ({already} already computed)" if already else description
            progress.update(task, total=todo, description=label)

        def advance(n: int) -> None:
            progress.advance(task, n)
            records.advance(n)

        yield Advance(advance, plan)
    finally:
        _bars.pop()
        if outer is None:
            progress.stop()  # transient: the bar is cleared
        else:
            progress.remove_task(task)
    records.finish()
    if planned.get("todo") == 0 and planned.get("already"):
        progress.console.print(f"{description}: {planned['already']} {unit} already computed")


def summary_table(rows: Sequence[dict[str, Any]], title: str = "Run summary") -> Table:
    table = Table(title=title)
    for c in SUMMARY_COLUMNS:
        table.add_column(c, justify="right" if c not in ("stage", "dataset", "status") else "left")
    for r in summary_rows(rows):
        table.add_row(*(str(v) for v in r.values()))
    return table


def summary_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary table's rows: its columns of each stage summary ('' where one lacks a column)."""
    return [{c: r.get(c, "") for c in SUMMARY_COLUMNS} for r in rows]


def stage_line(what: str, summary: dict[str, Any]) -> str:
    """A stage summary as one log line: `<what>: 40 rows in, 38 computed, 2 failed, 40 rows out, 1.2 s (ok)`, and a
    training run's model and steps."""
    line = (f"{what}: {summary.get('rows_in')} rows in, {summary.get('computed')} computed, "
            f"{summary.get('failed')} failed, {summary.get('rows_out')} rows out, {summary.get('seconds')} s "
            f"({summary.get('status')})")
    if summary.get("model"):
        line += f"; model {summary['model']}"
        if summary.get("total_steps"):
            line += f", step {summary.get('steps')} of {summary['total_steps']}"
    return line


def print_stage_notes(rows: Sequence[dict[str, Any]]) -> None:
    """Each stage's notes (`StageRun.notes`: e.g. a dataset's failed rows and the first reason), one line each, as
    text: they quote the user's data."""
    for r in rows:
        for note in r.get("notes") or []:
            console.print(printable(note), soft_wrap=True)


# C0 and C1 control characters but tab and newline: ESC starts the sequences that clear the screen or set the
# clipboard (OSC 52), CR overwrites a line
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with terminal control characters shown as escapes (ESC -> `\\x1b`): a cell or message holding user
    data reaches a terminal as text, never as a command to it."""
    return CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def shortest_decimals(values: Sequence[object], most: int) -> int:
    """The decimals a column of floats needs to show each value as written (0.83 needs 2), at most `most`: a value
    the user rounded (`round(value, 2)`) prints as rounded, an unrounded one with `most` decimals."""
    needed = 0
    for v in values:
        if isinstance(v, float) and math.isfinite(v):
            text = repr(v)
            if "e" in text:
                return most
            needed = max(needed, len(text.partition(".")[2].rstrip("0")))
            if needed >= most:
                return most
    return needed


def frame_table(frame: pl.DataFrame, title: str, float_digits: int = 2, as_rounded: bool = False) -> Table:
    """A rich table of a frame; floats with `float_digits` decimals, or with `as_rounded`, per column as few as
    its values need, up to `float_digits`."""
    table = Table(title=printable(title))
    for c in frame.columns:
        table.add_column(printable(c), justify="right" if frame[c].dtype.is_numeric() else "left")
    digits = [shortest_decimals(frame[c].to_list(), float_digits) if as_rounded and frame[c].dtype.is_float()
              else float_digits for c in frame.columns]
    for row in frame.iter_rows():
        table.add_row(*(f"{v:.{d}f}" if isinstance(v, float) else printable(str(v))
                        for v, d in zip(row, digits, strict=True)))
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
