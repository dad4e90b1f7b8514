"""MSE-AMR (Cai et al. 2022, "Retrofitting Multilingual Sentence Embeddings with Abstract Meaning Representation"): a
text encoder trained with supervised SimCSE on linearised AMR graphs of NLI triples, whose graph embedding is joined
to a frozen multilingual sentence embedding (mUSE by default). `params`: its pipeline parameters; `data`: triples,
mixed views, graphs; `loss`: SimCSE; `model`: the AMR encoder, the integration and `mse_amr:<run>` at encode time;
`train`: the training run on the shared Trainer."""

from amrsim.methods.mse_amr.data import (
    ENGLISH,
    ROLES,
    Graphs,
    Triple,
    graphs_of,
    mixed_view,
    sentence_graphs,
    text_langs,
)
from amrsim.methods.mse_amr.loss import simcse_loss
from amrsim.methods.mse_amr.model import (
    INTEGRATIONS,
    POOLINGS,
    AmrEncoder,
    MseAmrEncoder,
    combine,
    embed_combined,
    encode_with,
    extend_vocabulary,
    load_trained,
)
from amrsim.methods.mse_amr.params import Params
from amrsim.methods.mse_amr.train import LoopOptions, TripleSteps, train_mse_amr

__all__ = ["ENGLISH", "INTEGRATIONS", "POOLINGS", "ROLES", "AmrEncoder", "Graphs", "LoopOptions", "MseAmrEncoder",
           "Params", "Triple", "TripleSteps", "combine", "embed_combined", "encode_with", "extend_vocabulary",
           "graphs_of", "load_trained", "mixed_view", "sentence_graphs", "simcse_loss", "text_langs", "train_mse_amr"]
