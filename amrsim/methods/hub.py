"""Trained runs whose model is more than one transformer (MSE-AMR, meaning, symmetric or residual PEAR, pear_fused)
as sentence-transformers modules, so `SentenceTransformer(run_dir, trust_remote_code=True)` /
`CrossEncoder(run_dir, trust_remote_code=True)` load them where amrsim is installed: the module of runs that could
not carry their model whole, and of runs written before (a run that can carries its own module code,
amrsim/methods/standalone, and needs no amrsim). The module is amrsim's own loader behind
sentence-transformers' module interface: its `load` builds the encoder or scorer that `amrsim.methods.loaders`
builds for the run (the same code, so the same numbers); the run's modules.json names this installed class, nothing
is imported from the run directory. A run's other trained runs and base models are found by name under the models
root the run lies in (`<models>/<method>/<run id>`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers.base.modules import Module

from amrsim.encoders import Encoder, TrainedModel
from amrsim.methods.loaders import TRAINED_LOADERS, load_encoder
from amrsim.methods.portable import check_code
from amrsim.warehouse.keys import DIGESTS

MODEL_JSON = "model.json"
# what sentence-transformers writes itself on save, and what a run keeps that is no part of the model (its digests
# cache: the copy's files have other stamps)
NOT_MODEL_FILES = ("modules.json", "config_sentence_transformers.json", "README.md", "checkpoint*", "*.log", DIGESTS)


def load_run(run_dir: Path, batch_size: int = 64, device: str = "auto") -> Any:
    """The run in `run_dir`, loaded by its method's amrsim loader (what `amrsim.methods.loaders.load_encoder` gives
    for `<method>:<run id>`), wherever the directory lies."""
    meta_path = run_dir / MODEL_JSON
    if not meta_path.is_file():
        raise ValueError(f"{run_dir}: no {MODEL_JSON}; not an amrsim run directory")
    check_code(run_dir)
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    method = str(meta.get("method"))
    if method not in TRAINED_LOADERS:
        raise ValueError(f"{meta_path}: method {method!r} has no amrsim loader; known: {', '.join(TRAINED_LOADERS)}")
    run = TrainedModel(method, str(meta.get("run_id") or run_dir.name), run_dir, meta)
    return TRAINED_LOADERS[method](run, f"{method}:{run.run_id}", batch_size, device, str(run_dir.parent.parent),
                                   load_encoder)


class AmrsimRun(Module):
    """A run directory's model as one sentence-transformers module, saved in the model's root. `run_dir` is where
    it was loaded from; `model` the loaded amrsim encoder or scorer (None: not loaded, as when a run is being
    written)."""

    save_in_root = True

    def __init__(self, run_dir: str, model: Any = None):
        super().__init__()
        self.run_dir, self.model = str(run_dir), model

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             **kwargs: Any) -> AmrsimRun:
        run_dir = cls.load_dir_path(model_name_or_path, subfolder, token, cache_folder, revision, local_files_only)
        return cls(str(run_dir), load_run(Path(str(run_dir))))

    def preprocess(self, inputs: Sequence[Any], prompt: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """The texts (or pairs) as they are: amrsim's encoder tokenises (and parses) them itself."""
        return {"inputs": list(inputs)}

    def tokenize(self, texts: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
        return self.preprocess(texts)

    def save(self, output_path: str, *args: Any, **kwargs: Any) -> None:
        """Copy the run's model files (model.json and the weights it names) to `output_path`, so the copy loads
        again; saving onto the run directory itself writes nothing."""
        if Path(output_path).resolve() == Path(self.run_dir).resolve():
            return
        shutil.copytree(self.run_dir, output_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*NOT_MODEL_FILES))

    def _loaded(self) -> Any:
        if self.model is None:
            self.model = load_run(Path(self.run_dir))
        return self.model


class AmrsimEncoder(AmrsimRun):
    """A bi-encoder run (MSE-AMR, meaning): `sentence_embedding` is amrsim's `encode` of the texts."""

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        encoder: Encoder = self._loaded()
        features["sentence_embedding"] = torch.from_numpy(np.asarray(encoder.encode(features["inputs"]), np.float32))
        return features

    def get_embedding_dimension(self) -> int:
        return int(self._loaded().dim)


class AmrsimPairScorer(AmrsimRun):
    """A cross-encoder run scored as amrsim scores it (PEAR with both sentence orders averaged or with its base's
    residual, pear_fused): `scores` is amrsim's score of each pair, to be used as it is (identity activation)."""

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        pairs = features["inputs"]
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(f"input {i}: a cross-encoder scores sentence pairs [text1, text2], got {pair!r}")
        scores = self._loaded().score([str(a) for a, _ in pairs], [str(b) for _, b in pairs])
        features["scores"] = torch.from_numpy(np.asarray(scores, np.float64))
        return features
