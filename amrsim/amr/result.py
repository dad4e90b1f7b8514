"""What every text-to-AMR backend returns: one result per input sentence, in input order, never an exception per row."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from amrsim.warehouse import FAILED, OK


@dataclass(frozen=True)
class ParseResult:
    """A graph in PENMAN (None when failed) and why it failed."""

    penman: str | None
    status: str = OK
    error: str | None = None

    @classmethod
    def failed(cls, error: str) -> ParseResult:
        return cls(None, FAILED, error)


class AMRParser(Protocol):
    """A parsing backend: `parse` maps sentences to results of the same length and order; `on_progress(n)`, where
    given, is told the sentences settled as it goes (they add up to all of them)."""

    name: str

    def parse(self, sentences: Sequence[str], on_progress: Callable[[int], None] | None = None
              ) -> list[ParseResult]: ...
