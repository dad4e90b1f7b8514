"""Any encoder by name, every method's trained runs included: the one registry of the methods whose trained model is
not a plain sentence-transformers directory (S3BERT and DuEAM runs are; `amrsim.encoders` loads those itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amrsim.encoders import Encoder, TrainedLoader, TrainedModel
from amrsim.encoders import load_encoder as load_named
from amrsim.encoders.cache import embed_sentences as cached_embed
from amrsim.methods.meaning import train as meaning_model
from amrsim.methods.mse_amr import encoder as mse_amr_model
from amrsim.methods.pear import train as pear_model

__all__ = ["TRAINED_LOADERS", "embed_sentences", "load_encoder"]


def _adapt(old: Any) -> TrainedLoader:  # TEMPORARY: until each method's loader takes the new arguments
    def load(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
             load: Any) -> Encoder:
        return old(name, model.model_id, str(model.path), batch_size, device, models_root)

    return load


TRAINED_LOADERS: dict[str, TrainedLoader] = {
    "mse_amr": _adapt(mse_amr_model.load_trained),
    "pear": _adapt(pear_model.load_trained),
    "pear_fused": _adapt(pear_model.load_fused),
    "meaning": _adapt(meaning_model.load_trained),
}


def load_encoder(name: str, batch_size: int = 64, device: str = "auto",
                 models_root: Path | str | None = None) -> Encoder:
    """`amrsim.encoders.load_encoder` with every method's trained-model loader."""
    return load_named(name, batch_size, device, models_root, TRAINED_LOADERS)


def embed_sentences(*args: Any, **kwargs: Any) -> tuple[int, int]:
    """`amrsim.encoders.cache.embed_sentences` with every method's trained-model loader."""
    return cached_embed(*args, **kwargs, loaders=TRAINED_LOADERS)
