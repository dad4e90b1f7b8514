"""MSE-AMR's pipeline parameters (`train: - method: mse_amr  params: {...}`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, StrictFloat, StrictInt

from amrsim.methods.training import TrainingArgs


class Params(TrainingArgs):
    DEFAULTS: ClassVar[dict[str, Any]] = {"batch_size": 512, "lr": 5e-5, "eval_every": 125}

    datasets: list[str] = Field(min_length=1)  # triples datasets (parsed by the pipeline's parse stage)
    split: str | None = "train"  # None: every split
    parser: str = "ud"  # whose graphs (amr.parser)
    linearize: Literal["paper", "pointer"] = "paper"
    langs: list[str] | None = None  # None: en + every language whose translations have graphs of their own
    require_graphs: bool = True  # False: a role with English text but no graph stays (text only)
    dev_dataset: str | None = None  # pairs dataset for model selection (STSb dev); None: the last weights
    dev_split: str | None = "dev"
    dev_metric: Literal["combined", "graph"] = "combined"
    encoder: str = "minilm"  # AMR encoder to start from: minilm (the packaged MiniLM), hf:<id|path>, a directory
    base_encoder: str = "muse"
    integration: Literal["concat", "sum", "s_only", "h_only"] = "concat"
    pooling: Literal["mlp", "cls"] = "mlp"
    micro_batch: StrictInt = Field(default=32, ge=2)
    max_length: StrictInt = Field(default=128, ge=8)
    min_count: StrictInt = Field(default=5, ge=1)
    p_graph: StrictFloat = Field(default=0.5, ge=0, le=1)
    temperature: StrictFloat = Field(default=0.05, gt=0)
    symmetric_loss: bool = True
    # the base sentence encoder trains too (muse through its PyTorch port, or a sentence-transformers model):
    # supervised SimCSE on the triples' texts, each sentence in a language drawn from those it has text in
    train_base: bool = False
    base_lr: StrictFloat | None = Field(default=None, gt=0)  # the base's learning rate (None: lr)
    base_train_embedding: bool = True  # muse: False freezes its 128,010 x 512 token table
    keep_checkpoint: bool = False  # a finished run keeps only amr_encoder/ + model.json (the checkpoint: ~400 MB)

    @property
    def micro(self) -> int:
        """Triples a micro-batch: batch_size / grad_accumulation_steps (rounded up) when that is over 1, else
        micro_batch (at most batch_size)."""
        if self.grad_accumulation_steps > 1:
            return -(-self.batch_size // self.grad_accumulation_steps)
        return min(self.micro_batch, self.batch_size)

    def dataset_refs(self) -> list[tuple[str, str]]:
        refs = [("datasets", d) for d in self.datasets]
        return refs + ([("dev_dataset", self.dev_dataset)] if self.dev_dataset else [])
