"""Any encoder by name, every method's trained runs included: `TRAINED_LOADERS`, the loaders of the run kinds whose
model is not a plain sentence-transformers directory (S3BERT and DuEAM runs are; `amrsim.encoders` loads those
itself), and `TRAINED_INPUTS`, built from the registered `MethodSpec`s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from amrsim.encoders import Encoder, TrainedLoader, find_trained, is_trained_name
from amrsim.encoders.cache import embed_sentences as cached_embed
from amrsim.encoders.load import load_encoder_with
from amrsim.methods.portable import check_code
from amrsim.methods.registry import specs
from amrsim.methods.spec import Derived, TrainedInputs

__all__ = ["TRAINED_INPUTS", "TRAINED_LOADERS", "embed_sentences", "load_encoder", "vector_inputs"]


# run kind -> its loader (a method's own, and further kinds such as pear_fused)
TRAINED_LOADERS: Derived[TrainedLoader] = Derived(lambda: {k: f for s in specs() for k, f in s.loaders().items()})
# what a method's vectors depend on besides its run and the text (part of their embedding keys)
TRAINED_INPUTS: Derived[TrainedInputs] = Derived(lambda: {s.name: s.inputs for s in specs() if s.inputs is not None})


def load_encoder(name: str, batch_size: int = 64, device: str = "auto",
                 models_root: Path | str | None = None) -> Encoder:
    """Any encoder by name, every method's trained runs included: `amrsim.encoders.load_encoder_with` with
    `TRAINED_LOADERS`. A run folder whose module code differs from what amrsim wrote is refused."""
    if is_trained_name(name):
        check_code(find_trained(name, models_root).path)
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
