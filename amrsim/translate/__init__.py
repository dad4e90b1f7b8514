"""Machine translation backends (OPUS-MT / MarianMT) for the translation stage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

OK, FAILED = "ok", "failed"


@dataclass(frozen=True)
class TranslationResult:
    """A translation (None when failed) and why it failed; `flags` notes e.g. that the input was split."""

    text: str | None
    status: str = OK
    error: str | None = None
    flags: str | None = None

    @classmethod
    def failed(cls, error: str) -> TranslationResult:
        return cls(None, FAILED, error)


class Translator(Protocol):
    """A translation backend: `translate` maps texts to results of the same length and order."""

    name: str

    def translate(self, texts: Sequence[str]) -> list[TranslationResult]: ...
