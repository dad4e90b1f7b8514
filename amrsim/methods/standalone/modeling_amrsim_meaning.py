"""amrsim's meaning embeddings as a sentence-transformers module, written into the run folder by amrsim so that
`SentenceTransformer(folder, trust_remote_code=True)` encodes as amrsim does with torch, transformers and
sentence-transformers alone: the frozen base encoder (`base/`, or muse from its pip package), then the run's meaning
head (meaning.safetensors) and, where stage 2 was kept, its STS head (sts_head.safetensors). Both heads are
trainable; the base stays frozen (as in amrsim's training). Settings: the folder's model.json."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model
from sentence_transformers.base.modules import Module
from torch import nn

from .modeling_amrsim_common import BaseEncoder, read_meta, write_meta

STAGE1_FILE, STAGE2_FILE = "meaning.safetensors", "sts_head.safetensors"


def weights_file(meta: dict[str, Any], default: str) -> str:
    """The weights file model.json names (`weights`), a file of the folder itself."""
    return os.path.basename(str(meta.get("weights") or default))


class Residual(nn.Module):
    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.inner(x)


def make_head(kind: str, dim: int, hidden: int | None, dropout: float, identity: bool) -> nn.Module:
    """The head as amrsim builds it (same layers, same parameter names); weights come from the file."""
    if kind == "linear":
        return nn.Linear(dim, dim)
    h = hidden or dim
    layers: list[nn.Module] = [nn.Linear(dim, h), nn.ReLU()]
    if dropout > 0:
        layers.append(nn.Dropout(dropout))
    head = nn.Sequential(*layers, nn.Linear(h, dim))
    return Residual(head) if identity else head


class Stage1(nn.Module):
    """Meaning head, language head and language classifier (only the meaning head encodes)."""

    def __init__(self, dim: int, n_langs: int, kind: str, hidden: int | None, dropout: float):
        super().__init__()
        self.meaning = make_head(kind, dim, hidden, dropout, identity=True)
        self.language = make_head(kind, dim, hidden, dropout, identity=False)
        self.classifier = nn.Linear(dim, n_langs)


class StsHead(nn.Module):
    def __init__(self, dim: int, hidden: int | None, dropout: float, residual: bool):
        super().__init__()
        h = hidden or dim
        self.residual = residual
        self.mlp = nn.Sequential(nn.Linear(dim, h), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(h, h), nn.ReLU(), nn.Dropout(dropout), nn.Linear(h, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.mlp(x)
        return x + out if self.residual else out


class MeaningEncoder(Module):
    """`sentence_embedding` = STS head(meaning head(base(text))), the STS head only where the run kept stage 2."""

    save_in_root = True

    def __init__(self, base: BaseEncoder, stage1: Stage1, head: StsHead | None, meta: dict[str, Any]):
        super().__init__()
        self.base, self.stage1, self.head, self.meta = base, stage1, head, meta
        self.dim = int(meta["dim"])

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             **kwargs: Any) -> MeaningEncoder:
        folder = str(cls.load_dir_path(model_name_or_path, subfolder, token, cache_folder, revision, local_files_only))
        meta = read_meta(folder)
        s1, s2, dim = meta["stage1"], meta.get("stage2"), int(meta["dim"])
        stage1 = Stage1(dim, len(meta["langs"]), s1["head"], s1.get("hidden"), float(s1.get("dropout", 0.0)))
        load_model(stage1, os.path.join(folder, weights_file(meta, STAGE1_FILE)), device="cpu")
        head = None
        if s2:
            head = StsHead(dim, s2.get("hidden"), float(s2.get("dropout", 0.0)), bool(s2.get("residual", True)))
            load_model(head, os.path.join(folder, weights_file(s2, STAGE2_FILE)), device="cpu")
        return cls(BaseEncoder(folder, str(meta.get("base_encoder", "muse"))), stage1, head, meta)

    def preprocess(self, inputs: list[Any], prompt: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """The frozen base's vectors of the texts, under the key sentence-transformers' trainer collects a column's
        features by (as its static-embedding modules do); `forward` puts the heads on them."""
        vectors = np.asarray(self.base.encode([str(t) for t in inputs]), np.float32)
        return {"sentence_embedding": torch.from_numpy(vectors)}

    def tokenize(self, texts: list[Any], **kwargs: Any) -> dict[str, Any]:
        return self.preprocess(texts)

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        x = features["sentence_embedding"].to(self.stage1.classifier.weight.device)
        out = self.stage1.meaning(x)
        features["sentence_embedding"] = self.head(out) if self.head is not None else out
        return features

    def get_embedding_dimension(self) -> int:
        return self.dim

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        save_model(self.stage1, os.path.join(output_path, weights_file(self.meta, STAGE1_FILE)))
        if self.head is not None:
            save_model(self.head, os.path.join(output_path, weights_file(self.meta["stage2"], STAGE2_FILE)))
        self.base.save(output_path)
        write_meta(output_path, self.meta)
