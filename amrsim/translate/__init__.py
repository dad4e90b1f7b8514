"""Machine translation for the translation stage: what a backend returns (here), MarianMT (`marian`) and translation
over a table (`run`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from amrsim.warehouse import FAILED, OK, content_key
from amrsim.warehouse.keys import directory_fingerprint

__all__ = ["ENGLISH", "TranslationResult", "Translator", "model_key", "translation_key"]

ENGLISH = "en"


def translation_key(sentence_key: str, target_lang: str, model: str, num_beams: int, max_length: int) -> str:
    """A `translations` row's content key: the sentence, the target language, the model (`model_key`) and the
    generation settings, so a changed model or setting is a new row."""
    return content_key("translation", sentence_key, target_lang, model, num_beams, max_length)


def model_key(model: str, path: Path | str | None = None) -> str:
    """A translation model as keys name it: as configured (a hub id or a directory), plus a fingerprint of the
    directory's files when it is a local directory (`path`: where the configured name resolves, default the name
    itself), so a model directory whose files change translates again."""
    folder = Path(path if path is not None else model).expanduser()
    return f"{model}@{directory_fingerprint(folder)}" if folder.is_dir() else model


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

    def translate(self, texts: Sequence[str], on_progress: Callable[[int], None] | None = None
                  ) -> list[TranslationResult]: ...
