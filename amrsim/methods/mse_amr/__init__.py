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
    translations,
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
    graph_inputs,
    load_trained,
)
from amrsim.methods.mse_amr.params import Params
from amrsim.methods.mse_amr.train import TripleSteps, train_mse_amr
from amrsim.methods.spec import CardFacts, MethodSpec

__all__ = ["ENGLISH", "INTEGRATIONS", "POOLINGS", "ROLES", "SPEC", "AmrEncoder", "Graphs", "MseAmrEncoder", "Params",
           "Triple", "TripleSteps", "combine", "embed_combined", "encode_with", "extend_vocabulary", "graphs_of",
           "load_trained", "mixed_view", "sentence_graphs", "simcse_loss", "text_langs", "train_mse_amr",
           "translations"]

SPEC = MethodSpec(
    "mse_amr", Params, train_mse_amr, CardFacts(
        "MSE-AMR", 'Cai et al. 2022, "Retrofitting Multilingual Sentence Embeddings with Abstract Meaning '
        'Representation"',
        "A contrastive encoder of linearised AMR graphs (supervised SimCSE on NLI triples); the sentence embedding "
        "joins the base encoder's normalised vector with the normalised graph vector.",
        "sentence-similarity", ("sentence-transformers", "sentence-similarity", "feature-extraction", "amr",
                                "multilingual"), "amrsim train mse_amr"),
    loader=load_trained, inputs=graph_inputs)  # its vectors read the sentence's graph
