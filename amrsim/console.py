"""Console output: progress bars for long work and the end-of-run summary tables (rich)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:  # only annotations: the command line imports this module before it needs polars
    import polars as pl


def make_console(stderr: bool = False) -> Console:
    """A console that prints text as it is: cell values, titles and messages hold user data (sentences, SQL
    results, error text), so `[/quote]` or `:x:` must never be read as rich markup or an emoji code. Wide enough
    for summary tables when output is a pipe or a CI log (rich would default to 80 columns)."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False,
                   width=None if stream.isatty() else 160)


console = make_console()


@contextmanager
def progress_bar(total: int, description: str) -> Iterator[Callable[[int], None]]:
    """Yields an `advance(n)` callback; draws nothing for tiny jobs."""
    if total < 256:
        yield lambda n: None
        return
    with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
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


def frame_table(frame: pl.DataFrame, title: str, float_digits: int = 2) -> Table:
    table = Table(title=title)
    for c in frame.columns:
        table.add_column(c, justify="right" if frame[c].dtype.is_numeric() else "left")
    for row in frame.iter_rows():
        table.add_row(*(f"{v:.{float_digits}f}" if isinstance(v, float) else str(v) for v in row))
    return table
