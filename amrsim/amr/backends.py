"""The text-to-AMR backends, one registry: the languages each parses, its default batch size and how to build it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from amrsim.amr.amrlib_parser import AmrlibParser
from amrsim.amr.result import AMRParser, ParseResult
from amrsim.amr.ud import UDParser

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "PIVOT_LANG", "PROVIDED", "AMRParser", "Backend", "ParseResult",
           "ParserSpec"]

PIVOT_LANG = "en"  # a sentence in a language without a parser is parsed through its English side
PROVIDED = "provided"  # graphs given in the input, not parsed: the `amr.parser` of ingested graphs
DEFAULT_BACKEND = "ud"  # offline, no model to fetch: the parse section's default, and what parses at encode time


@dataclass(frozen=True)
class ParserSpec:
    """Everything that builds a backend; `id` names it in the `amr.parser` column and in content keys."""

    backend: str  # a key of BACKENDS
    lang: str = "en"
    model_dir: str | None = None
    batch_size: int | None = None  # None: the backend's default
    num_beams: int = 4
    device: str = "auto"
    dtype: str = "auto"  # amrlib: bf16 on CUDA, fp32 on the CPU
    batch_budget: int | str | None = "auto"  # amrlib on CUDA: beam tokens per batch (auto: from free memory)

    @property
    def id(self) -> str:
        return f"{self.backend}:{Path(self.model_dir or '').name}" if BACKENDS[self.backend].model_dir else self.backend

    @property
    def batch(self) -> int:
        """Sentences per batch: the spec's, else the backend's default."""
        return self.batch_size or BACKENDS[self.backend].batch_size


@dataclass(frozen=True)
class Backend:
    """A parse backend. `build` None: it parses nothing (its graphs come with the input)."""

    langs: tuple[str, ...]  # the languages it parses
    batch_size: int = 64  # default sentences per batch
    build: Callable[[ParserSpec], AMRParser] | None = None
    model_dir: str | None = None  # what a model directory must hold, for a backend that needs one
    gpu: bool = False  # worth a GPU: distributed stages run it on GPU actors


def _amrlib(spec: ParserSpec) -> AMRParser:
    if not spec.model_dir:
        raise ValueError("backend amrlib needs a model directory")
    return AmrlibParser(spec.model_dir, device=spec.device, batch_size=spec.batch, num_beams=spec.num_beams,
                        dtype=spec.dtype, batch_budget=spec.batch_budget)


# spaCy gains from big batches; a seq2seq beam batch is GPU memory
BACKENDS: dict[str, Backend] = {
    "ud": Backend(("en", "fr"), 1000, lambda spec: UDParser(spec.lang, batch_size=spec.batch)),
    "amrlib": Backend(("en",), 16, _amrlib, model_dir="a parse_xfm model directory", gpu=True),
    PROVIDED: Backend(()),
}
