"""Any encoder by name, every method's trained runs included: the one registry of the methods whose trained model is
not a plain sentence-transformers directory (S3BERT and DuEAM runs are; `amrsim.encoders` loads those itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import polars as pl

from amrsim.encoders import Encoder, TrainedLoader, TrainedModel, find_trained, is_trained_name
from amrsim.encoders.cache import embed_sentences as cached_embed
from amrsim.encoders.load import load_encoder_with
from amrsim.methods.meaning.encoder import load_trained as load_meaning
from amrsim.methods.mse_amr.model import graph_inputs as mse_amr_inputs
from amrsim.methods.mse_amr.model import load_trained as load_mse_amr
from amrsim.methods.pear.model import load_fused as load_pear_fused
from amrsim.methods.pear.model import load_trained as load_pear

__all__ = ["TRAINED_INPUTS", "TRAINED_LOADERS", "embed_sentences", "load_encoder", "vector_inputs"]


TRAINED_LOADERS: dict[str, TrainedLoader] = {"mse_amr": load_mse_amr, "pear": load_pear, "pear_fused": load_pear_fused,
                                             "meaning": load_meaning}


class TrainedInputs(Protocol):
    """What a trained run's vector of each sentence of `frame` (key, text) depends on besides the run and the text,
    one string per row, found without loading the model: a run that reads more than the text (MSE-AMR: a graph)."""

    def __call__(self, model: TrainedModel, wh: Any, dataset: str, frame: pl.DataFrame,
                 translate: dict[str, Any] | None = None) -> list[str]: ...


# what a method's vectors depend on besides its run and the text (part of their embedding keys)
TRAINED_INPUTS: dict[str, TrainedInputs] = {"mse_amr": mse_amr_inputs}


def load_encoder(name: str, batch_size: int = 64, device: str = "auto",
                 models_root: Path | str | None = None) -> Encoder:
    """Any encoder by name, every method's trained runs included: `amrsim.encoders.load_encoder_with` with
    `TRAINED_LOADERS`."""
    return load_encoder_with(name, batch_size, device, models_root, loaders=TRAINED_LOADERS)


def embed_sentences(*args: Any, **kwargs: Any) -> tuple[int, int]:
    """`amrsim.encoders.cache.embed_sentences` with every method's trained-model loader and inputs."""
    return cached_embed(*args, **kwargs, loaders=TRAINED_LOADERS, inputs=vector_inputs)


def vector_inputs(wh: Any, dataset: str, encoder: str, sentences: pl.DataFrame,
                  translate: dict[str, Any] | None = None) -> list[str] | None:
    """What `encoder`'s vectors of `sentences` (key, text) read besides the model and the text (`TRAINED_INPUTS`:
    an MSE-AMR run's graphs), one string per row; None for an encoder that reads only the text."""
    if not is_trained_name(encoder):
        return None
    model = find_trained(encoder, wh.models_root)
    found = TRAINED_INPUTS.get(str(model.meta.get("method")))
    return None if found is None else found(model, wh, dataset, sentences, translate)
