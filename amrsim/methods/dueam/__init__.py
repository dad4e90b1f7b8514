"""DuEAM (Goswami et al. 2021): a dual encoder whose learner regresses a frozen anchor's Word Mover's Distance,
L = L_A - lam * L_B (`loss`), the anchor and the learner (`model`), the paper's pairs from NLI items (`data`),
`train_dueam` on the one Trainer (`train`) and its parameters (`params`)."""

from amrsim.methods.dueam.data import MODES, NLIItem, TrainPair, construct_pairs
from amrsim.methods.dueam.loss import LAMBDA, EmptyTokensError, anchor_loss, cosine_term, dueam_loss, wmd
from amrsim.methods.dueam.model import (
    EMPTY_TOKENS,
    MUSE,
    Anchor,
    AnchorTargets,
    MuseAnchor,
    anchor_targets,
    make_anchor,
)
from amrsim.methods.dueam.params import Hyper, Params
from amrsim.methods.dueam.train import train_dueam
from amrsim.methods.spec import CardFacts, MethodSpec
from amrsim.methods.training import NonFiniteLossError

__all__ = ["SPEC", "EMPTY_TOKENS", "LAMBDA", "MODES", "MUSE", "Anchor", "AnchorTargets", "EmptyTokensError", "Hyper",
           "MuseAnchor", "NLIItem", "NonFiniteLossError", "Params", "TrainPair", "anchor_loss", "anchor_targets",
           "construct_pairs", "cosine_term", "dueam_loss", "make_anchor", "train_dueam", "wmd"]

SPEC = MethodSpec(
    "dueam", Params, train_dueam, CardFacts(
        "DuEAM", 'Goswami et al. 2021, "Cross-lingual Sentence Embedding using Multi-Task Learning"',
        "A dual encoder: an anchor's Word Mover's Distance on frozen token embeddings teaches a sentence encoder "
        "(L = L_A - lambda * L_B).",
        "sentence-similarity", ("sentence-transformers", "sentence-similarity", "feature-extraction", "cross-lingual"),
        "amrsim train dueam"))
