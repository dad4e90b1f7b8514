"""Columns of a warehouse table declared by the package that computes them, which sits above the warehouse in the
layers (so the warehouse cannot import it): the metrics registry declares `amr_metrics`' aspect columns here and the
warehouse's schema of that table reads them here, so neither package imports the other. Likewise the values of every
table's `status` column (`OK`, `FAILED`), which the core's row builders write and the warehouse filters on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["FAILED", "OK", "declare_columns", "declared_columns"]

OK, FAILED = "ok", "failed"  # the values of every table's `status` column (a failed row's `error` says why)

_DECLARED: dict[str, Callable[[], Sequence[pa.Field]]] = {}


def declare_columns(table: str, fields: Callable[[], Sequence[pa.Field]]) -> None:
    """`fields()` gives `table`'s declared columns (Arrow fields, in order); it is asked each time the table's schema
    is built, so a column declared after import (an aspect registered later) is in it."""
    _DECLARED[table] = fields


def declared_columns(table: str) -> list[pa.Field]:
    """The columns declared for `table`; none where nothing is declared (or the declaring package is not loaded)."""
    fields = _DECLARED.get(table)
    return list(fields()) if fields is not None else []
