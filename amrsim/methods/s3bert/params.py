"""S3BERT's parameters: `Hyper` (what `train_s3bert` trains with) and `Params`, the pipeline entry
(`train: - method: s3bert  params: {...}`): `Hyper` plus the data to build the pairs from."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, StrictFloat, StrictInt

from amrsim.methods.training import TrainingArgs


class Hyper(TrainingArgs):
    DEFAULTS: ClassVar[dict[str, Any]] = {"batch_size": 64, "epochs": 2, "eval_every": 1000, "weight_decay": 0.01,
                                          "warmup": 100}

    trainable_layers: StrictInt = Field(default=2, ge=1)
    n_aspects: StrictInt = Field(default=15, ge=1, le=15)
    aspect_dim: StrictInt = Field(default=16, ge=1)
    similarity: Literal["cosine", "manhattan"] = "cosine"
    consistency_weight: StrictFloat = Field(default=1.0, ge=0)


class Params(Hyper):
    datasets: list[str] = Field(min_length=1)  # pairs datasets with graphs and amr_metrics
    train_split: str = "train"
    dev_split: str | None = "dev"  # None: no dev selection (the last weights are kept)
    langs: list[str] = ["en"]  # pairs whose two sentences are in these languages
    parser: str | None = None  # whose graphs (amr.parser); default: the pipeline's metrics.parser
    base_model: str = "minilm"  # minilm (the packaged all-MiniLM-L6-v2), hf:<hub id or path>, a directory or hub id
    negatives: bool = True
    max_pairs: StrictInt | None = Field(default=None, ge=2)  # a seeded sample of the training pairs (CPU recipes)
    max_dev_pairs: StrictInt | None = Field(default=None, ge=2)
    workers: StrictInt | None = Field(default=None, ge=1)  # processes scoring negatives (default: chosen by the work)

    def dataset_refs(self) -> list[tuple[str, str]]:
        return [("datasets", d) for d in self.datasets]
