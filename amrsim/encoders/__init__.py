"""Sentence encoders behind one interface; models load lazily so a cached run never imports torch.

names.py parses an encoder name, trained.py finds trained runs and resolves any name to its model id, models.py holds
the encoder classes, load.py loads an encoder by name."""

from __future__ import annotations

from amrsim.encoders.load import EncoderLoader, TrainedLoader, load_encoder_with, run_base_encoder
from amrsim.encoders.models import Encoder, SentenceTransformerEncoder
from amrsim.encoders.names import PACKAGED, EncoderName, is_latest_name, is_trained_name, parse_name, split_hf_name
from amrsim.encoders.trained import (
    TrainedModel,
    base_for,
    base_model,
    find_trained,
    list_trained,
    model_id,
    model_subdir,
    models_root_default,
    resolve,
    resolves_inside,
    run_name,
)
from amrsim.generation import resolve_device

__all__ = ["PACKAGED", "Encoder", "EncoderLoader", "EncoderName", "SentenceTransformerEncoder", "TrainedLoader",
           "TrainedModel", "base_for", "base_model", "find_trained", "is_latest_name", "is_trained_name",
           "list_trained", "load_encoder_with", "model_id", "model_subdir", "models_root_default", "parse_name",
           "resolve", "resolve_device", "resolves_inside", "run_base_encoder", "run_name", "split_hf_name"]
