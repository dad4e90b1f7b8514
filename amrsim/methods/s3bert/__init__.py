"""S3BERT (Opitz & Frank 2022): AMR-metric aspects routed into fixed sub-embeddings of a sentence encoder (`model`),
trained by a per-aspect decomposition loss and a consistency loss against a frozen teacher (`loss`) on normalised
metric targets with swapped-partner negatives (`data`), on the shared Trainer (`train`); `params`: its pipeline
parameters. No module imports torch at import time."""

from amrsim.methods.s3bert.data import normalise_targets, partners, with_negatives
from amrsim.methods.s3bert.loss import DecompositionLoss, consistency_loss
from amrsim.methods.s3bert.model import (
    RESIDUAL,
    S3BERT_ASPECTS,
    aspect_layout,
    contributions,
    explain,
    layout_from_meta,
)
from amrsim.methods.s3bert.params import Hyper, Params
from amrsim.methods.s3bert.train import train_s3bert
from amrsim.methods.spec import CardFacts, MethodSpec
from amrsim.methods.training import NonFiniteLossError

__all__ = ["SPEC", "RESIDUAL", "S3BERT_ASPECTS", "DecompositionLoss", "Hyper", "NonFiniteLossError", "Params",
           "aspect_layout", "consistency_loss", "contributions", "explain", "layout_from_meta", "normalise_targets",
           "partners", "train_s3bert", "with_negatives"]

SPEC = MethodSpec(
    "s3bert", Params, train_s3bert, CardFacts(
        "S3BERT", 'Opitz & Frank 2022, "SBERT studies Meaning Representations: Decomposing Sentence Embeddings into '
        'Explainable Semantic Features"',
        "An SBERT embedding decomposed into AMR-aspect sub-embeddings (concepts, frames, negation, ...) plus a "
        "residual, trained to predict fine-grained AMR metric scores with a consistency loss against a frozen "
        "teacher; the cosine of each slice explains a similarity aspect by aspect.",
        "sentence-similarity", ("sentence-transformers", "sentence-similarity", "feature-extraction", "amr"),
        "amrsim train s3bert"))
