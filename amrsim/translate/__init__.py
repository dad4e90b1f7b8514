"""Machine translation for the translation stage: what a backend returns (here), MarianMT (`marian`) and translation
over a table (`run`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from amrsim.warehouse import FAILED, OK, content_key

__all__ = ["ENGLISH", "TranslationResult", "Translator", "translation_key"]

ENGLISH = "en"


def translation_key(sentence_key: str, target_lang: str, model: str, num_beams: int, max_length: int) -> str:
    """A `translations` row's content key: the sentence, the target language, the model as configured (hub id or
    directory) and the generation settings, so a changed model or setting is a new row."""
    return content_key("translation", sentence_key, target_lang, model, num_beams, max_length)


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
