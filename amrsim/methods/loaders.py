"""Any encoder by name, every method's trained runs included: the one registry of the methods whose trained model is
not a plain sentence-transformers directory (S3BERT and DuEAM runs are; `amrsim.encoders` loads those itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amrsim.encoders import Encoder, TrainedLoader, TrainedModel
from amrsim.encoders import load_encoder as load_named
from amrsim.encoders.cache import embed_sentences as cached_embed

__all__ = ["TRAINED_LOADERS", "embed_sentences", "load_encoder"]


# TEMPORARY wrappers (function-level imports) until each method's loader, in a module that imports torch only inside
# its functions, takes the TrainedLoader arguments and is imported here at module top.
def _mse_amr(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
             load: Any) -> Encoder:
    from amrsim.methods.mse_amr.encoder import load_trained

    return load_trained(name, model.model_id, str(model.path), batch_size, device, models_root)


def _pear(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
          load: Any) -> Encoder:
    from amrsim.methods.pear.train import load_trained

    return load_trained(name, model.model_id, str(model.path), batch_size, device, models_root)


def _pear_fused(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
                load: Any) -> Encoder:
    from amrsim.methods.pear.train import load_fused

    return load_fused(name, model.model_id, str(model.path), batch_size, device, models_root)


def _meaning(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
             load: Any) -> Encoder:
    from amrsim.methods.meaning.train import load_trained

    return load_trained(name, model.model_id, str(model.path), batch_size, device, models_root)


TRAINED_LOADERS: dict[str, TrainedLoader] = {"mse_amr": _mse_amr, "pear": _pear, "pear_fused": _pear_fused,
                                             "meaning": _meaning}


def load_encoder(name: str, batch_size: int = 64, device: str = "auto",
                 models_root: Path | str | None = None) -> Encoder:
    """`amrsim.encoders.load_encoder` with every method's trained-model loader."""
    return load_named(name, batch_size, device, models_root, TRAINED_LOADERS)


def embed_sentences(*args: Any, **kwargs: Any) -> tuple[int, int]:
    """`amrsim.encoders.cache.embed_sentences` with every method's trained-model loader."""
    return cached_embed(*args, **kwargs, loaders=TRAINED_LOADERS)
