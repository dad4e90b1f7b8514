"""PEAR (Jørgensen 2024, SemEval-2024 Task 1): a cross-encoder for relatedness trained with BCE on 0-1 gold scores,
bi-encoder kNN re-sampling with weak labels from the cross-encoder, and `pear_fused`, its scores fused with its base
bi-encoder's cosine. `params` (pipeline parameters), `loss`, `model` (the model, its run directory and loaders),
`train` (`fit_pear` on the shared Trainer); the pipeline stage (data, Optuna search) is `amrsim.stages.train.pear`."""

from amrsim.methods.pear.loss import base_targets, bce_loss, gold_scale_line, normalise_scores, on_gold_scale
from amrsim.methods.pear.model import (
    FUSED_METHOD,
    BaseOffset,
    Fusion,
    PearCrossEncoder,
    base_cosines,
    cross_encoder_scorer,
    fit_fusion,
    load_fused,
    load_trained,
    save_fused,
    save_run,
    start_from_base,
)
from amrsim.methods.pear.params import Params, SearchParams
from amrsim.methods.pear.train import both_orders, checkpoint_state, fit_pear, length_batches, train_epochs
from amrsim.methods.spec import CardFacts, MethodSpec, RunKind

__all__ = [
    "FUSED_METHOD", "SPEC", "BaseOffset", "Fusion", "Params", "PearCrossEncoder", "SearchParams", "base_cosines",
    "base_targets", "bce_loss", "both_orders", "checkpoint_state", "cross_encoder_scorer", "fit_fusion", "fit_pear",
    "gold_scale_line", "length_batches", "normalise_scores", "on_gold_scale", "save_fused", "save_run",
    "start_from_base", "train_epochs",
]

PAPER = "Jørgensen 2024, SemEval-2024 Task 1 (semantic textual relatedness)"
SPEC = MethodSpec(
    "pear", Params, fit_pear, CardFacts(
        "PEAR", PAPER,
        "A cross-encoder with a sigmoid head trained with BCE on relatedness, with bi-encoder kNN re-sampling and "
        "weak labels; scores a sentence pair directly (no sentence embedding).",
        "text-ranking", ("sentence-transformers", "cross-encoder", "text-ranking", "relatedness"), "amrsim train pear"),
    loader=load_trained,
    kinds=(RunKind(FUSED_METHOD, load_fused, CardFacts(
        "PEAR fused with a bi-encoder", PAPER,
        "PEAR's cross-encoder score and a bi-encoder's cosine, each z-scored, in a weighted sum (below); it scores "
        "a sentence pair (no sentence embedding) and has no weights of its own.",
        "text-ranking", ("sentence-transformers", "cross-encoder", "text-ranking", "relatedness"),
        "amrsim train pear")),))
