"""MSE-AMR's pipeline parameters (`train: - method: mse_amr  params: {...}`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictFloat, StrictInt

from amrsim.methods.training import MethodParams


class Params(MethodParams):
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
    lr: StrictFloat = Field(default=5e-5, gt=0)
    batch_size: StrictInt = Field(default=512, ge=2)
    micro_batch: StrictInt = Field(default=32, ge=2)
    max_length: StrictInt = Field(default=128, ge=8)
    epochs: StrictInt = Field(default=1, ge=1)
    max_steps: StrictInt | None = Field(default=None, ge=1)  # stop early, checkpointed (the same run id resumes)
    eval_every: StrictInt = Field(default=125, ge=1)
    min_count: StrictInt = Field(default=5, ge=1)
    p_graph: StrictFloat = Field(default=0.5, ge=0, le=1)
    temperature: StrictFloat = Field(default=0.05, gt=0)
    symmetric_loss: bool = True
    warmup_ratio: StrictFloat = Field(default=0.0, ge=0, lt=1)
    weight_decay: StrictFloat = Field(default=0.0, ge=0)
    seed: StrictInt = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    keep_checkpoint: bool = False  # a finished run keeps only amr_encoder/ + model.json (the checkpoint: ~400 MB)

    def dataset_refs(self) -> list[tuple[str, str]]:
        refs = [("datasets", d) for d in self.datasets]
        return refs + ([("dev_dataset", self.dev_dataset)] if self.dev_dataset else [])
