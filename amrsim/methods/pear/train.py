"""PEAR's training on the shared `Trainer`: BCE on length-bucketed batches, AdamW (no weight decay on biases and
LayerNorm), linear warmup over 10% of the steps then linear decay; `fit_pear` runs the paper's augmented re-sampling."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.methods.pear.loss import bce_loss
from amrsim.methods.pear.model import BaseOffset, PearCrossEncoder, start_from_base
from amrsim.methods.pear.params import Params
from amrsim.methods.training import CHECKPOINT, STATE_JSON, Checkpoints, Trainer, TrainResult, recover_dir

if TYPE_CHECKING:
    import torch

BUCKET_BATCHES = 50  # batches per length bucket: shuffled pairs, sorted by length within each bucket
WEIGHTS = "model.safetensors"

Augmenter = Callable[[PearCrossEncoder | None, int], tuple[list[str], list[str], np.ndarray]]


def both_orders(texts1: Sequence[str], texts2: Sequence[str],
                targets: np.ndarray) -> tuple[list[str], list[str], np.ndarray]:
    """Every pair followed by its swap, same target (sentence-transformers' STSb cross-encoder recipe)."""
    t1 = [s for a, b in zip(texts1, texts2, strict=True) for s in (a, b)]
    t2 = [s for a, b in zip(texts1, texts2, strict=True) for s in (b, a)]
    return t1, t2, np.repeat(np.asarray(targets, dtype=np.float32), 2)


def check_pairs(texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray) -> np.ndarray:
    y = np.asarray(targets, dtype=np.float32).reshape(-1)
    if not (len(texts1) == len(texts2) == len(y)):
        raise ValueError(f"PEAR: {len(texts1)} sentence1s, {len(texts2)} sentence2s, {len(y)} targets; they must "
                         "align row by row")
    if not len(y):
        raise ValueError("PEAR: no training pairs")
    if not (np.isfinite(y).all() and (y >= 0).all() and (y <= 1).all()):
        raise ValueError("PEAR: targets must be finite and in [0, 1] (normalise_scores)")
    return y


def length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                   bucket: int = BUCKET_BATCHES) -> list[np.ndarray]:
    """One epoch's batches of row indices: a random permutation cut into buckets of `bucket` batches, each sorted by
    pair length (half the padding of random batches on STSb + SICK), batches shuffled; every row once."""
    order = rng.permutation(len(lengths))
    batches = []
    for start in range(0, len(lengths), batch_size * bucket):
        chunk = order[start:start + batch_size * bucket]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def checkpoint_state(out_dir: Path) -> dict[str, Any] | None:
    """The state.json of `out_dir`'s checkpoint (a crash between its swaps recovered), or None."""
    ckpt = Path(out_dir) / CHECKPOINT
    recover_dir(ckpt)
    return json.loads((ckpt / STATE_JSON).read_text(encoding="utf-8")) if (ckpt / STATE_JSON).is_file() else None


def train_epochs(model: PearCrossEncoder, texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray,
                 hp: Params, *, epochs: int, seed: int = 0, phase: str = "train", out_dir: Path | None = None,
                 run_key: Mapping[str, Any] | None = None, max_steps: int | None = None, resume: bool = True,
                 extra: Mapping[str, Any] | None = None) -> TrainResult | None:
    """`epochs` passes with a fresh AdamW and warmup-linear schedule (as each `fit` of the paper's code) over each
    epoch's `length_batches` (a function of (seed, epoch): resumable), a history entry per epoch; with `out_dir`,
    checkpointed there (settings `run_key`, state `extra`). None when `epochs` < 1."""
    import torch
    from safetensors.torch import load_model, save_model

    y = check_pairs(texts1, texts2, targets)
    if epochs < 1:
        return None
    lengths = np.array([len(a) + len(b) for a, b in zip(texts1, texts2, strict=True)])
    batches = [b for epoch in range(epochs)
               for b in length_batches(lengths, hp.batch_size, np.random.default_rng([seed, epoch]))]
    per_epoch = len(batches) // epochs
    offsets = None if model.offset is None else torch.as_tensor(model.offset(texts1, texts2), device=model.device)

    def losses(rows: np.ndarray) -> dict[str, torch.Tensor]:
        z = model.logits([texts1[i] for i in rows], [texts2[i] for i in rows])
        if offsets is not None:
            z = z + offsets[torch.as_tensor(rows, device=model.device)]
        return {"loss": bce_loss(z, torch.as_tensor(y[rows], device=model.device))}

    def entry(step: int, means: dict[str, float], score: float | None) -> dict[str, Any]:
        done = sum(h["steps"] for h in trainer.state["history"])
        return {"phase": phase, "epoch": math.ceil(step / per_epoch), "steps": step - done, "loss": means["loss"]}

    key = {**(run_key or {}), "phase": phase, "train": hashlib.sha256(json.dumps(
        [list(texts1), list(texts2), y.tolist()], ensure_ascii=False).encode("utf-8")).hexdigest()[:16]}
    checkpoints = None if out_dir is None else Checkpoints(
        out_dir, key, lambda d: save_model(model.model, str(d / WEIGHTS)),
        lambda d: load_model(model.model, str(d / WEIGHTS), device=str(model.device)), resume)
    args = hp.model_copy(update={"epochs": epochs, "max_steps": max_steps,
                                 "eval_every": hp.eval_every if out_dir else None})
    trainer = Trainer("PEAR", args, [model.model], per_epoch, batches.__getitem__, losses, entry=entry,
                      checkpoints=checkpoints)
    torch.manual_seed(seed)
    if trainer.start().resumed_from is None:
        trainer.state["extra"] = dict(extra or {})
    model.model.train()
    result = trainer.fit()
    model.model.eval()
    return result


def fit_pear(base: str, texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray, hp: Params, *,
             augment: Augmenter | None = None, offset: BaseOffset | None = None, out_dir: Path | None = None,
             carry: Mapping[str, Any] | None = None) -> tuple[PearCrossEncoder, dict[str, Any]]:
    """PEAR's augmented re-sampling: E_weak epochs on gold; with k > 0, `augment(model, k)` gives kNN silver pairs
    weak-labelled by that model (None when E_weak = 0: by the bi-encoder's cosine); E epochs on gold + silver.
    `hp.both_orders` trains each pair in both orders; `offset` makes the model residual (`start_from_base`). With
    `out_dir` (a final training, not a search trial), checkpointed there with `carry` and stopped by `hp.max_steps`
    over both phases (`completed` False); such a run resumes from its checkpoint, silver pairs included."""
    y = check_pairs(texts1, texts2, targets)
    model = PearCrossEncoder(base, device=hp.device, max_length=hp.max_length)
    if offset is not None:
        start_from_base(model, offset)
    orders = both_orders if hp.both_orders else (lambda a, b, t: (list(a), list(b), np.asarray(t, np.float32)))
    t1, t2, all_y = orders(texts1, texts2, y)
    key = {"base": base, "seed": hp.seed, "max_length": hp.max_length, "residual": offset and offset.record(),
           **hp.recipe()}
    saved = None if out_dir is None else checkpoint_state(out_dir)
    in_main = saved is not None and saved["run"].get("phase") == "main"
    carry, budget = dict(carry or {}), None if out_dir is None else hp.max_steps
    weak_steps = hp.e_weak * math.ceil(len(all_y) / hp.batch_size)
    resumed = None
    if in_main:
        history, silver = saved["extra"]["weak_history"], saved["extra"]["silver"]
    else:
        weak = train_epochs(model, t1, t2, all_y, hp, epochs=hp.e_weak, seed=hp.seed, phase="weak", out_dir=out_dir,
                            run_key=key, max_steps=budget, extra=carry)
        history, resumed = ([], None) if weak is None else (weak.history, weak.resumed_from)
        if weak is not None and (not weak.completed or (budget is not None and budget <= weak_steps)):
            return model, {"gold_pairs": len(y), "completed": False, "steps": weak.steps, "resumed_from": resumed,
                           "history": history}
        s1, s2, sy = augment(model if hp.e_weak > 0 else None, hp.k) if hp.k > 0 and augment else ([], [], [])
        silver = [list(s1), list(s2), np.asarray(sy, np.float32).tolist()]
    s1, s2, sy = orders(*silver[:2], np.asarray(silver[2], np.float32))
    t1, t2, all_y = t1 + list(s1), t2 + list(s2), np.concatenate([all_y, np.clip(sy, 0.0, 1.0)])
    main = train_epochs(model, t1, t2, all_y, hp, epochs=hp.epochs, seed=hp.seed + 1, phase="main", out_dir=out_dir,
                        run_key=key, max_steps=None if budget is None else budget - weak_steps, resume=in_main,
                        extra={**carry, "weak_history": history, "silver": silver})
    assert main is not None  # (epochs >= 1: the params check it)
    return model, {"gold_pairs": len(y), "completed": main.completed, "steps": weak_steps + main.steps,
                   "resumed_from": resumed if main.resumed_from is None else weak_steps + main.resumed_from,
                   "history": history + main.history, "silver_pairs": len(silver[0]), "train_rows": len(all_y)}
