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
from amrsim.methods.s3bert.params import Params
from amrsim.methods.s3bert.train import train_s3bert
from amrsim.methods.training import NonFiniteLossError

__all__ = ["RESIDUAL", "S3BERT_ASPECTS", "DecompositionLoss", "NonFiniteLossError", "Params", "aspect_layout",
           "consistency_loss", "contributions", "explain", "layout_from_meta", "normalise_targets", "partners",
           "train_s3bert", "with_negatives"]
