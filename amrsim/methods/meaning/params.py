"""The meaning method's parameters: `Hyper`, what its two stages train with (the shared training arguments are stage
1's, `sts_*` stage 2's), and `Params`, the pipeline entry (`train: - method: meaning  params: {...}`): `Hyper` plus
the data to train on."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, StrictFloat, StrictInt, field_validator, model_validator

from amrsim.methods.training import TrainingArgs

LOSSES = ("meaning", "reconstruction", "language_id", "language_similarity")
LANG_PAIR = re.compile(r"^[A-Za-z]+-[A-Za-z]+$")


class Hyper(TrainingArgs):
    # the recipe's optimizer: weight decay on every parameter, a constant learning rate
    DEFAULTS: ClassVar[dict[str, Any]] = {"epochs": 5, "batch_size": 256, "lr": 1e-3, "max_grad_norm": 0.0,
                                          "lr_schedule": "constant"}
    DECAY_EVERY_PARAMETER: ClassVar[bool] = True

    head: Literal["linear", "mlp"] = "linear"
    hidden: StrictInt | None = Field(default=None, ge=1)  # mlp heads: hidden units (default: the embedding dim)
    dropout: StrictFloat = Field(default=0.0, ge=0, lt=1)
    margin: StrictFloat = Field(default=0.0, ge=-1, le=1)  # random pairs cost max(0, cos - margin)
    negatives: Literal["same_language", "cross_language"] = "same_language"  # random pairs: see stage1_losses
    w_meaning: StrictFloat = Field(default=1.0, ge=0)
    w_reconstruction: StrictFloat = Field(default=1.0, ge=0)
    w_language_id: StrictFloat = Field(default=1.0, ge=0)
    w_language_similarity: StrictFloat = Field(default=1.0, ge=0)
    dev_fraction: StrictFloat = Field(default=0.05, ge=0, lt=1)
    # stage 1 trains the encoder too (muse only, through its PyTorch port): its output is the heads' input, while the
    # reconstruction target stays the frozen encoder's vector; stage 2 and `meaning:<run>` use the trained encoder
    train_encoder: bool = False
    encoder_lr: StrictFloat | None = Field(default=None, gt=0)  # the encoder's learning rate (None: lr)
    encoder_train_embedding: bool = False  # muse: True trains its 128,010 x 512 token table too
    # stage 2: an STS head on the meaning embeddings
    sts_hidden: StrictInt | None = Field(default=None, ge=1)
    sts_dropout: StrictFloat = Field(default=0.1, ge=0, lt=1)
    sts_residual: bool = True
    sts_epochs: StrictInt = Field(default=10, ge=1)
    sts_batch_size: StrictInt = Field(default=64, ge=2)
    sts_lr: StrictFloat = Field(default=1e-4, gt=0)
    sts_weight_decay: StrictFloat = Field(default=0.01, ge=0)

    @property
    def weights(self) -> dict[str, float]:
        return {k: getattr(self, f"w_{k}") for k in LOSSES}

    def stage1_meta(self) -> dict[str, Any]:
        """What model.json's `stage1` records."""
        return {"head": self.head, "hidden": self.hidden, "dropout": self.dropout, "epochs": self.epochs,
                "batch_size": self.batch_size, "lr": self.lr, "weight_decay": self.weight_decay,
                "margin": self.margin, "negatives": self.negatives, "weights": self.weights,
                "dev_fraction": self.dev_fraction, "seed": self.seed, "train_encoder": self.train_encoder,
                **({"encoder_lr": self.encoder_lr, "encoder_train_embedding": self.encoder_train_embedding}
                   if self.train_encoder else {})}

    def stage2_args(self) -> Hyper:
        """What stage 2 trains with: its `sts_*` settings in place of the shared ones, no clipping or warmup."""
        return self.model_copy(update={"batch_size": self.sts_batch_size, "lr": self.sts_lr, "epochs": self.sts_epochs,
                                       "weight_decay": self.sts_weight_decay, "max_grad_norm": 0.0, "warmup": 0,
                                       "max_steps": None, "eval_every": None})

    def stage2_meta(self) -> dict[str, Any]:
        """What model.json's `stage2` records (with the weights file)."""
        return {"hidden": self.sts_hidden, "dropout": self.sts_dropout, "residual": self.sts_residual,
                "epochs": self.sts_epochs, "batch_size": self.sts_batch_size, "lr": self.sts_lr,
                "weight_decay": self.sts_weight_decay, "seed": self.seed}


class Params(Hyper):
    encoder: str = "muse"  # the frozen encoder: minilm, muse, hf:<id|path>, <method>:<run>
    files: list[str] = Field(default_factory=list)  # bitext TSVs (globs, relative to pipelines.yaml)
    files_dataset: str = "tatoeba"  # warehouse dataset caching the files' sentences and vectors
    datasets: list[str] = Field(default_factory=list)  # datasets whose `parallel` table adds translation pairs
    split: str | None = None  # parallel rows of this split only (None: all)
    exclude_langs: list[str] = Field(default_factory=list)  # held out: the languages evaluated on
    langs: list[str] | None = None  # keep only pairs in these languages (None: every language not excluded)
    max_pairs_per_lang: StrictInt | None = Field(default=None, ge=1)  # seeded sample per language pair (CPU recipes)
    sts_datasets: list[str] = Field(default_factory=list)  # pairs datasets (with translations); empty: no stage 2
    sts_train_split: str = "train"
    sts_dev_split: str | None = "dev"
    sts_train_lang_pairs: list[str] = Field(default_factory=lambda: ["en-en"])
    sts_eval_lang_pairs: list[str] = Field(default_factory=list)  # held out from stage 2, scored on the dev split
    # sts dataset -> a file row-aligned with the dataset's own (same lines, same sentence1/sentence2 in its language)
    # with a `genre` column (the English STS benchmark for stsb_multi_mt): each genre is held out once for selection
    sts_genre_files: dict[str, str] = Field(default_factory=dict)
    # heldout: keep stage 2 only if >= stage 1 on every held-out set, else save stage 1 alone; always: keep it
    stage2_selection: Literal["heldout", "always"] = "heldout"

    @field_validator("sts_train_lang_pairs", "sts_eval_lang_pairs")
    @classmethod
    def _pairs(cls, v: list[str]) -> list[str]:
        for p in v:
            if not LANG_PAIR.fullmatch(p):
                raise ValueError(f"lang pair '{p}' must look like 'en-de'")
        return v

    @model_validator(mode="after")
    def _sources(self) -> Params:
        if self.train_encoder and self.encoder != "muse":
            raise ValueError(f"train_encoder trains muse through its PyTorch port; encoder is '{self.encoder}'")
        if not self.files and not self.datasets:
            raise ValueError("meaning needs parallel data: give `files` (bitext TSVs) or `datasets` (parallel tables)")
        both = sorted(set(self.sts_train_lang_pairs) & set(self.sts_eval_lang_pairs))
        if both:
            raise ValueError(f"sts_eval_lang_pairs {both} are also sts_train_lang_pairs; held-out pairs must differ")
        unknown = sorted(set(self.sts_genre_files) - set(self.sts_datasets))
        if unknown:
            raise ValueError(f"sts_genre_files names {unknown}, which are not sts_datasets")
        if self.sts_datasets and self.stage2_selection == "heldout" and not (
                self.sts_dev_split and (self.sts_eval_lang_pairs or self.sts_genre_files)):
            raise ValueError("stage2_selection: heldout compares stage 2 with stage 1 on held-out dev data: give "
                             "sts_dev_split and sts_eval_lang_pairs or sts_genre_files, or set "
                             "stage2_selection: always")
        return self

    def dataset_refs(self) -> list[tuple[str, str]]:
        return [("datasets", d) for d in self.datasets] + [("sts_datasets", d) for d in self.sts_datasets]
