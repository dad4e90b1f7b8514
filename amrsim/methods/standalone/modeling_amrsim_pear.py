"""amrsim's PEAR cross-encoder as a sentence-transformers module, written into the run folder by amrsim so that
`CrossEncoder(folder, trust_remote_code=True)` scores pairs as amrsim does with torch, transformers and
sentence-transformers alone. `PearScorer`: the network at the folder's root, the mean of both sentence orders
(model.json `symmetric`), plus a residual run's base cosine on the gold scale (`residual`, its base in `base/`).
`PearFused`: a PEAR run (in `pear/`) fused with a bi-encoder's cosine (in `base/`). `scores` are logits of the
probability (sigmoid activation) for PearScorer, the fused z-score sum as it is for PearFused; the network's
weights are trainable, the base stays frozen (as in amrsim's training)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from sentence_transformers.base.modules import Module
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from .modeling_amrsim_common import BaseEncoder, read_meta, write_meta

PEAR = "pear"  # the folder of a fused model's PEAR run
MAX_LENGTH = 128
EPS = 1e-12  # keeps the logit of a probability of exactly 0 or 1 finite


def _pairs(features: dict[str, Any]) -> tuple[list[str], list[str]]:
    pairs = features["pairs"]
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"input {i}: a cross-encoder scores sentence pairs [text1, text2], got {pair!r}")
    return [str(a) for a, _ in pairs], [str(b) for _, b in pairs]


class _RunModule(Module):
    """Saved in the model's root; its configuration is the run's model.json."""

    save_in_root = True

    def preprocess(self, inputs: list[Any], prompt: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """The pairs as they are: the module tokenises both sentence orders itself."""
        return {"pairs": [list(p) if isinstance(p, (list, tuple)) else p for p in inputs]}

    def tokenize(self, texts: list[Any], **kwargs: Any) -> dict[str, Any]:
        return self.preprocess(texts)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             **kwargs: Any) -> _RunModule:
        folder = cls.load_dir_path(model_name_or_path, subfolder, token, cache_folder, revision, local_files_only)
        return cls.from_folder(str(folder))

    @classmethod
    def from_folder(cls, folder: str) -> _RunModule:
        raise NotImplementedError


class PearScorer(_RunModule):
    """σ(network logit [+ residual offset]), the mean over both sentence orders when `symmetric`."""

    def __init__(self, network: torch.nn.Module, tokenizer: Any, meta: dict[str, Any],
                 base: BaseEncoder | None = None):
        super().__init__()
        self.network, self.tokenizer, self.meta, self.base = network, tokenizer, meta, base
        self.max_length = int(meta.get("max_length", MAX_LENGTH))
        self.symmetric = bool(meta.get("symmetric", False))
        self.residual = meta.get("residual") or None

    @classmethod
    def from_folder(cls, folder: str) -> PearScorer:
        meta = read_meta(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        network = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1, use_safetensors=True)
        residual = meta.get("residual") or None
        base = BaseEncoder(folder, str(residual["base"])) if residual else None
        return cls(network, tokenizer, meta, base)

    def _offsets(self, texts1: list[str], texts2: list[str]) -> np.ndarray:
        """The residual run's starting point: logit of the base's cosine on the gold scale, clipped to [eps, 1-eps]."""
        assert self.base is not None and self.residual is not None
        cos = np.asarray(self.base.cosines(texts1, texts2), np.float64)
        p = np.clip(float(self.residual["slope"]) * cos + float(self.residual["intercept"]), 0.0, 1.0)
        eps = float(self.residual.get("eps", 0.02))
        p = np.clip(p, eps, 1 - eps)
        return np.log(p / (1 - p)).astype(np.float32)

    def _one_order(self, texts1: list[str], texts2: list[str]) -> torch.Tensor:
        device = next(self.network.parameters()).device
        batch = self.tokenizer(texts1, texts2, padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt")
        z = self.network(**{k: v.to(device) for k, v in batch.items()}).logits.float().reshape(-1)
        if self.residual:
            z = z + torch.as_tensor(self._offsets(texts1, texts2), device=z.device)
        return torch.sigmoid(z)

    def probabilities(self, texts1: list[str], texts2: list[str]) -> torch.Tensor:
        """amrsim's score of each pair, in 0-1 (float32)."""
        p = self._one_order(texts1, texts2)
        return (p + self._one_order(texts2, texts1)) / 2 if self.symmetric else p

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        p = self.probabilities(*_pairs(features)).double().clamp(EPS, 1 - EPS)
        scores = torch.log(p / (1 - p))  # sigmoid (the model's activation) gives p back
        features["scores"] = scores.float() if self.training else scores
        return features

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        self.network.save_pretrained(output_path, safe_serialization=True)
        self.tokenizer.save_pretrained(output_path)
        if self.base is not None:
            self.base.save(output_path)
        write_meta(output_path, self.meta)


class PearFused(_RunModule):
    """weight * z(PEAR's score) + (1 - weight) * z(base cosine), each z-scored by model.json's `fusion` statistics."""

    def __init__(self, pear: PearScorer, base: BaseEncoder, meta: dict[str, Any]):
        super().__init__()
        self.pear, self.base, self.meta = pear, base, meta
        self.fusion = dict(meta["fusion"])

    @classmethod
    def from_folder(cls, folder: str) -> PearFused:
        meta = read_meta(folder)
        pear_folder = os.path.join(folder, PEAR)
        if not os.path.isdir(pear_folder):
            raise ValueError(f"{folder}: the PEAR run this model fuses is not inside the folder ({PEAR}/ is missing)")
        return cls(PearScorer.from_folder(pear_folder), BaseEncoder(folder, str(meta["fusion"]["base"])), meta)

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        texts1, texts2 = _pairs(features)
        f = self.fusion
        pear = self.pear.probabilities(texts1, texts2).double()
        cos = torch.as_tensor(np.asarray(self.base.cosines(texts1, texts2), np.float64), device=pear.device)
        features["scores"] = (float(f["weight"]) * (pear - float(f["pear_mean"])) / float(f["pear_std"])
                              + (1 - float(f["weight"])) * (cos - float(f["base_mean"])) / float(f["base_std"]))
        if self.training:
            features["scores"] = features["scores"].float()
        return features

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        self.pear.save(os.path.join(output_path, PEAR))
        self.base.save(output_path)
        write_meta(output_path, self.meta)
