"""DuEAM's parameters: `Hyper` (what `train_dueam` needs beyond the pairs) and `Params`, the pipeline entry
(`train: - method: dueam  params: {...}`): `Hyper` plus the data to build the pairs from."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, StrictFloat, StrictInt

from amrsim.methods.training import TrainingArgs


class Hyper(TrainingArgs):
    DEFAULTS: ClassVar[dict[str, Any]] = {"batch_size": 64, "eval_every": 1000, "weight_decay": 0.01, "warmup": 100}

    anchor_layer: StrictInt = -1  # hidden layer of the anchor's token embeddings (-1: last, 0: input embeddings)
    wmd_weights: Literal["uniform", "norm"] = "uniform"
    unit_vectors: bool = True  # unit token vectors before the Euclidean cost: WMD in [0, 2]
    normalize: bool = True  # unit learner embeddings: ||s' - t'|| in [0, 2]
    lam: StrictFloat = Field(default=0.003, ge=0)  # weight of L_B (the paper: 0.003)
    max_length: StrictInt = Field(default=128, ge=4)
    train_embedding: bool = True  # learner muse: False freezes its 128,010 x 512 token table (the rest trains)


class Params(Hyper):
    datasets: list[str] = Field(min_length=1)  # NLI-style datasets: kind triples or pairs
    split: str | None = "train"  # None: every split
    modes: list[Literal["unsupervised", "monolingual", "cross_lingual", "parallel"]] = Field(
        default=["monolingual", "cross_lingual"], min_length=1)  # the paper's weakly supervised setting
    langs: list[str] | None = None  # None: every language found
    # cross-lingual pairs: the anchor compares the premise with the hypothesis in the premise's language (for an
    # anchor whose token space is not aligned across languages, as muse's; `parallel` pairs need it to mean anything)
    anchor_same_language: bool = False
    max_cross_per_item: StrictInt | None = Field(default=None, ge=1)  # cross-lingual layouts per hypothesis (sampled)
    max_pairs: StrictInt | None = Field(default=None, ge=1)  # a seeded sample of the constructed pairs (CPU recipes)
    anchor: str = "minilm"  # frozen token encoder: minilm, muse, hf:<id|path> or a transformers dir
    learner: str = "minilm"  # sentence encoder to train: minilm, muse, hf:<id|path>, a sentence-transformers dir
    dev_dataset: str | None = None  # pairs with gold scores (STSb dev): keeps the best learner by Spearman
    dev_split: str | None = "dev"
    dev_lang_pair: str = "en-en"

    def dataset_refs(self) -> list[tuple[str, str]]:
        refs = [("datasets", d) for d in self.datasets]
        return refs + ([("dev_dataset", self.dev_dataset)] if self.dev_dataset else [])
