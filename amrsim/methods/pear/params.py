"""PEAR's pipeline parameters (`train: - method: pear  params: {...}`): one training configuration, its data and
its Optuna search."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

from amrsim.evaluate.ood import SPLITS, split_sources
from amrsim.methods.training import TrainingArgs

SEARCHED = ("lr", "k", "epochs", "e_weak", "max_grad_norm")  # the dimensions of the paper's search space
# one training configuration, as a run's model.json records it (`warmup` as `warmup_ratio`)
RECIPE = ("lr", "epochs", "e_weak", "k", "max_grad_norm", "batch_size", "weight_decay", "warmup", "both_orders")


class SearchParams(BaseModel):
    """Optuna search over the paper's space (ranges configurable); each trial trains on a seeded sample of
    `max_train_pairs` and is scored by Spearman on `max_dev_pairs` dev pairs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trials: StrictInt = Field(default=20, ge=0)  # new trials per run; a resumed study keeps its earlier ones
    timeout: StrictFloat | None = Field(default=None, gt=0)  # seconds for this run's trials
    study: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")  # default pear-<pipeline>
    max_train_pairs: StrictInt | None = Field(default=None, ge=2)
    max_dev_pairs: StrictInt | None = Field(default=None, ge=2)
    lr: tuple[StrictFloat, StrictFloat] = (1e-6, 1e-4)  # log-uniform
    k: tuple[StrictInt, StrictInt] = (0, 3)
    epochs: tuple[StrictInt, StrictInt] = (1, 5)
    e_weak: tuple[StrictInt, StrictInt] = (0, 2)
    max_grad_norm: tuple[StrictFloat, StrictFloat] = (0.1, 1.0)

    @model_validator(mode="after")
    def _ranges(self) -> SearchParams:
        for name in SEARCHED:
            lo, hi = getattr(self, name)
            if lo > hi or lo < 0 or (name in ("lr", "max_grad_norm", "epochs") and lo <= 0):
                raise ValueError(f"search.{name}: [{lo}, {hi}] must be a non-empty range of positive values "
                                 f"(k and e_weak may start at 0)")
        return self


class Params(TrainingArgs):
    # no dev checkpoint selection (the last weights are the model): eval_every is the steps between loss reports
    DEFAULTS: ClassVar[dict[str, Any]] = {"lr": 5e-5, "epochs": 3, "weight_decay": 0.01, "warmup": 0.1}

    datasets: list[str] = []  # pairs datasets with gold scores (required unless ood_split)
    # train on one split of the out-of-distribution protocol (e.g. loo-forums): its derived dataset's train and dev
    # pairs, in place of datasets, train_split, dev_datasets and dev_split
    ood_split: str | None = None
    # also save `pear_fused:<run id>`: weight x z(this cross-encoder) + (1 - weight) x z(cosine of this bi-encoder,
    # e.g. minilm), z-scored on the dev pairs (else the training pairs); a model of its own, not PEAR
    fused_with: str | None = None
    # the cross-encoder's share; at 0.3 the fusion scored at or above the base on 4 of 5 held-out splits (pear.md)
    fused_weight: StrictFloat = Field(default=0.3, ge=0, le=1)
    # a residual cross-encoder: its score is σ(network + logit of this bi-encoder's cosine on the gold scale), the
    # head zeroed, so training starts from the bi-encoder's scores and learns a correction (needs it to score)
    residual_on: str | None = None
    # knowledge-preserving training: each gold pair's target mixes in this bi-encoder's cosine (e.g. minilm, PEAR's
    # base), put on the gold scale by a line fitted on the training pairs; base_target_weight is the cosine's share
    base_target: str | None = None
    base_target_weight: StrictFloat = Field(default=0.5, ge=0, lt=1)
    # knowledge-preserving pairs of these datasets' sentences (no gold needed): half nearest neighbours by
    # `biencoder`, half random partners, targeted at its cosine on the gold scale, trained with the gold pairs
    distill_datasets: list[str] = []
    distill_pairs: StrictInt = Field(default=0, ge=0)
    # and this many pairs of such a sentence and an edited copy (English: negated, subject and object swapped, or a
    # modifier dropped; amrsim.augment.edits), targeted the same way
    distill_edits: StrictInt = Field(default=0, ge=0)
    train_split: str = "train"
    dev_datasets: list[str] = []  # dev pairs: reported Spearman, the Optuna objective
    dev_split: str = "dev"
    langs: list[str] = ["en"]  # pairs whose two sentences are in these languages
    mode: Literal["all", "per_language"] = "all"
    base_model: str = "minilm"  # the packaged all-MiniLM-L6-v2 transformer, or hf:<hub id or path>
    e_weak: StrictInt = Field(default=0, ge=0)  # E_weak: epochs on gold before the cross-encoder labels kNN pairs
    k: StrictInt = Field(default=0, ge=0)  # kNN neighbours per sentence; 0: no re-sampling
    max_length: StrictInt = Field(default=128, ge=8)
    both_orders: bool = False  # train every pair in both sentence orders (twice the steps)
    symmetric: bool = True  # a pair's score is the mean over both sentence orders (dev, search, saved model)
    biencoder: str = "minilm"  # neighbours for re-sampling (amrsim.encoders name)
    max_silver: StrictInt | None = Field(default=None, ge=1)  # a seeded sample of the kNN pairs
    max_pairs: StrictInt | None = Field(default=None, ge=2)  # a seeded sample of the training pairs
    search: SearchParams | None = None

    @model_validator(mode="after")
    def _search_needs_dev(self) -> Params:
        if self.ood_split is not None:
            if self.ood_split not in SPLITS:
                raise ValueError(f"ood_split '{self.ood_split}' is not a split of the out-of-distribution protocol; "
                                 f"one of {', '.join(SPLITS)}")
            if self.datasets or self.dev_datasets:
                raise ValueError("ood_split replaces datasets and dev_datasets: give one or the other")
        elif not self.datasets:
            raise ValueError("datasets: give at least one pairs dataset (or ood_split)")
        if self.search is not None and not self.dev_datasets and self.ood_split is None:
            raise ValueError("search needs dev_datasets: the Optuna objective is Spearman on the dev pairs")
        if bool(self.distill_pairs or self.distill_edits) != bool(self.distill_datasets):
            raise ValueError("distill_pairs (or distill_edits) and distill_datasets go together: how many pairs, "
                             "from which datasets")
        return self

    def dataset_refs(self) -> list[tuple[str, str]]:
        distill = [("distill_datasets", d) for d in self.distill_datasets]
        if self.ood_split is not None:  # the configured source files its derived dataset is built from
            return [("ood_split", d) for d in split_sources(self.ood_split)] + distill
        return [("datasets", d) for d in self.datasets] + [("dev_datasets", d) for d in self.dev_datasets] + distill

    def on_ood_split(self) -> Params:
        """These params with datasets and splits pointing at the protocol split's derived dataset."""
        if self.ood_split is None:
            return self
        dataset = SPLITS[self.ood_split].dataset
        return self.model_copy(update={"datasets": [dataset], "train_split": "train", "dev_datasets": [dataset],
                                       "dev_split": "dev"})

    def recipe(self) -> dict[str, Any]:
        """The training configuration a run records."""
        return {"warmup_ratio" if k == "warmup" else k: getattr(self, k) for k in RECIPE}
