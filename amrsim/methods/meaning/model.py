"""The meaning method's networks and run files. Stage 1 (`MeaningModel`) splits a frozen encoder's embedding e into a
meaning part M(e) and a language part L(e) (linear or MLP heads) with a language-ID classifier on L(e); stage 2
(`StsHead`) is an MLP on the frozen meaning embeddings. A run directory holds their safetensors and model.json."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from amrsim.encoders import model_subdir
from amrsim.evaluate.sts import correlations, cosine
from amrsim.methods.meaning.params import Hyper
from amrsim.methods.portable import save_amrsim_module
from amrsim.methods.training import refuse_finished_run, write_model_json

# safetensors is imported inside the functions

HEADS = ("linear", "mlp")
STAGE1_FILE = "meaning.safetensors"
STAGE2_FILE = "sts_head.safetensors"


def make_head(kind: str, dim: int, hidden: int | None = None, dropout: float = 0.0,
              start: str | None = None) -> nn.Module:
    """dim -> dim: one linear map, or Linear-ReLU(-Dropout)-Linear with `hidden` units (default: dim). `start`:
    "identity" (the map starts as x -> x; an MLP becomes x + MLP(x)) or "zero" (starts at 0); None: random."""
    if kind not in HEADS:
        raise ValueError(f"head '{kind}' unknown; use one of {', '.join(HEADS)}")
    h = hidden or dim
    head: nn.Module = nn.Linear(dim, dim) if kind == "linear" else nn.Sequential(
        nn.Linear(dim, h), nn.ReLU(), *([nn.Dropout(dropout)] if dropout > 0 else []), nn.Linear(h, dim))
    if start is not None:
        last = head if kind == "linear" else head[-1]
        (nn.init.eye_ if start == "identity" and kind == "linear" else nn.init.zeros_)(last.weight)
        nn.init.zeros_(last.bias)
    return Residual(head) if start == "identity" and kind == "mlp" else head


class Residual(nn.Module):
    """x + inner(x)."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.inner(x)


class MeaningModel(nn.Module):
    """Stage 1: meaning head, language head and a language-ID classifier on the language embedding."""

    def __init__(self, dim: int, n_langs: int, head: str = "linear", hidden: int | None = None,
                 dropout: float = 0.0):
        super().__init__()
        if dim < 1:
            raise ValueError(f"embedding dim must be >= 1, got {dim}")
        if n_langs < 1:
            raise ValueError(f"the language classifier needs at least one language, got {n_langs}")
        # the meaning head starts as the encoder's embedding and the language head at zero: training moves away
        # from the encoder only as far as the losses ask (random starts scrambled muse: dev STS 76 -> 33)
        self.meaning = make_head(head, dim, hidden, dropout, start="identity")
        self.language = make_head(head, dim, hidden, dropout, start="zero")
        self.classifier = nn.Linear(dim, n_langs)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(meaning, language) embeddings, each (batch, dim)."""
        return self.meaning(x), self.language(x)


class StsHead(nn.Module):
    """Stage 2: dim -> hidden -> hidden -> dim with ReLU and dropout after each hidden layer; with `residual` the
    output is x + MLP(x) (the last layer starts at zero, so training starts from the meaning embedding)."""

    def __init__(self, dim: int, hidden: int | None = None, dropout: float = 0.1, residual: bool = True):
        super().__init__()
        h = hidden or dim
        self.residual = residual
        self.mlp = nn.Sequential(nn.Linear(dim, h), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(h, h), nn.ReLU(), nn.Dropout(dropout), nn.Linear(h, dim))
        if residual:
            last = self.mlp[-1]
            assert isinstance(last, nn.Linear)
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.mlp(x)
        return x + out if self.residual else out


def apply_module(module: nn.Module, x: np.ndarray, device: str = "cpu", batch: int = 8192) -> np.ndarray:
    """module(x) for an (n, dim) array, in eval mode without gradients, as float32 numpy."""
    module.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(x), batch):
            out.append(module(torch.as_tensor(x[s:s + batch], device=device)).float().cpu().numpy())
    return np.concatenate(out).astype(np.float32) if out else np.zeros((0, x.shape[1]), np.float32)


def meaning_of(model: MeaningModel, x: np.ndarray, device: str = "cpu") -> np.ndarray:
    """Meaning embeddings of precomputed encoder vectors (n, dim)."""
    return apply_module(model.meaning, np.asarray(x, dtype=np.float32), device)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return cosine(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def spearman(pred: np.ndarray, gold: np.ndarray) -> float | None:
    """Spearman x 100 (None when undefined)."""
    return correlations(pred, gold)["spearman"]


def save_model(out_dir: Path, model: MeaningModel, base_encoder: str, langs: Sequence[str], hyper: Hyper,
               sts_head: StsHead | None = None, extra_meta: Mapping[str, Any] | None = None) -> Path:
    """Write `out_dir/meaning.safetensors` (+ `sts_head.safetensors`), the root's sentence-transformers files
    and, last, `model.json`; returns out_dir."""
    from safetensors.torch import save_model as save_st

    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_st(model, str(out_dir / STAGE1_FILE))
    if sts_head is not None:
        save_st(sts_head, str(out_dir / STAGE2_FILE))
    meta = {"base_encoder": base_encoder, "dim": int(model.classifier.in_features), "langs": list(langs),
            "stage1": hyper.stage1_meta(), "weights": STAGE1_FILE,
            "stage2": None if sts_head is None else {**hyper.stage2_meta(), "weights": STAGE2_FILE},
            **(extra_meta or {})}
    # self-contained (module code and a copy of the base) unless the base is the encoder this run trained
    save_amrsim_module(out_dir, "encoder", parts=None if meta.get("text_encoder") else {"base": base_encoder})
    write_model_json(out_dir, "meaning", meta)
    return out_dir


def load_model(run_dir: Path | str) -> tuple[MeaningModel, StsHead | None, dict[str, Any]]:
    """The stage-1 model, the stage-2 head (None without one) and model.json of a finished run (safetensors only)."""
    from safetensors.torch import load_model as load_st

    run_dir = Path(run_dir)
    meta = json.loads((run_dir / "model.json").read_text(encoding="utf-8"))
    s1, s2 = meta["stage1"], meta.get("stage2")
    model = MeaningModel(int(meta["dim"]), len(meta["langs"]), s1["head"], s1.get("hidden"), s1.get("dropout", 0.0))
    load_st(model, str(model_subdir(run_dir, meta.get("weights", STAGE1_FILE))), device="cpu")
    head = None
    if s2:
        head = StsHead(int(meta["dim"]), s2.get("hidden"), s2.get("dropout", 0.0), bool(s2.get("residual", True)))
        load_st(head, str(model_subdir(run_dir, s2.get("weights", STAGE2_FILE))), device="cpu")
        head.eval()
    return model.eval(), head, meta
