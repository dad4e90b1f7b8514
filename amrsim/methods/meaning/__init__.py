"""Meaning embeddings (Tiyajamorn et al. 2021) with a stage-2 STS head (two-stage, McCain et al.): a frozen
encoder's embedding split into meaning and language parts on parallel data, then an MLP on the meaning part tuned on
STS. `params` and `encoder` (re-exported here) load no torch; `model` (networks, run files), `loss` and `train`
(`train_stage1`, `train_stage2`) do, and are imported from their modules."""

from typing import Any

from amrsim.methods.meaning.encoder import MeaningEncoder, load_trained
from amrsim.methods.meaning.params import Hyper, Params
from amrsim.methods.spec import CardFacts, MethodSpec

__all__ = ["SPEC", "Hyper", "MeaningEncoder", "Params", "load_trained", "train_meaning"]


def train_meaning(*args: Any, **kwargs: Any) -> Any:
    """Stage 1, `amrsim.methods.meaning.train.train_stage1` (imported when called: it loads torch); the pipeline
    stage then tunes stage 2 with `train_stage2`."""
    from amrsim.methods.meaning.train import train_stage1

    return train_stage1(*args, **kwargs)


SPEC = MethodSpec(
    "meaning", Params, train_meaning, CardFacts(
        "Meaning embeddings", "Tiyajamorn et al. 2021 (stage 1) and McCain et al. (stage 2)",
        "Stage 1 splits a frozen multilingual embedding into a meaning part and a language part on parallel data; "
        "stage 2 tunes an MLP on human STS scores.",
        "sentence-similarity", ("sentence-transformers", "sentence-similarity", "feature-extraction", "multilingual"),
        "amrsim train meaning"),
    loader=load_trained)
