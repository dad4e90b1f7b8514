"""Pieces every training loop here shares: batch slices, the warmup-then-linear LR factor, CUDA-only autocast, a
sentence-transformers forward pass with gradients, and model.json written atomically."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer


def batches(n: int, batch_size: int) -> Iterator[slice]:
    for start in range(0, n, batch_size):
        yield slice(start, start + batch_size)


def linear_warmup(warmup: int, total: int) -> Callable[[int], float]:
    """LR factor: 0 -> 1 over `warmup` steps, then linearly to 0 at `total` (sentence-transformers' WarmupLinear)."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def autocast(device: str) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast on CUDA only: CPU bf16 autocast is slow and changes numerics for no memory gain here."""
    if device.startswith("cuda"):
        import torch

        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def st_embed(model: SentenceTransformer, texts: Sequence[str], device: str) -> torch.Tensor:
    """Sentence embeddings with gradients (`model.encode` runs under no_grad)."""
    import torch

    features = model.preprocess(list(texts))
    features = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
    return model(features)["sentence_embedding"].float()


def atomic_json(path: Path, obj: Any) -> None:
    """Write JSON to a temporary file and rename it over `path`: readers never see half a file."""
    from amrsim.files import atomic_write

    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def open_checkpoint(out_dir: Path, run_key: Mapping[str, Any], resume: bool) -> tuple[Path, dict[str, Any] | None]:
    """`out_dir/checkpoint` and, when resuming from one, its `state.json`; a checkpoint made with other settings or
    data (its `run` differs from `run_key`) is an error naming the keys. Recovers a crash between the two renames
    of a checkpoint swap (`checkpoint.old` left alone)."""
    ckpt = out_dir / "checkpoint"
    if not ckpt.exists() and (out_dir / "checkpoint.old").is_dir():
        os.replace(out_dir / "checkpoint.old", ckpt)
    if not (ckpt.is_dir() and resume):
        return ckpt, None
    saved = json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
    changed = sorted(k for k in set(saved["run"]) | set(run_key) if saved["run"].get(k) != run_key.get(k))
    if changed:
        was = ", ".join(f"{k}={saved['run'].get(k)!r} (now {run_key.get(k)!r})" for k in changed)
        raise ValueError(f"{ckpt}: made with different settings or data: {was}; "
                         "pass resume=False to start over, or use another run id")
    return ckpt, saved
