"""Meaning embeddings (Tiyajamorn et al. 2021) with a stage-2 STS head (two-stage, McCain et al.): a frozen
encoder's embedding split into meaning and language parts on parallel data, then an MLP on the meaning part tuned on
STS. `params` and `encoder` (re-exported here) load no torch; `model` (networks, run files), `loss` and `train`
(`train_stage1`, `train_stage2`) do, and are imported from their modules."""

from amrsim.methods.meaning.encoder import MeaningEncoder, load_trained
from amrsim.methods.meaning.params import Hyper, Params

__all__ = ["Hyper", "MeaningEncoder", "Params", "load_trained"]
