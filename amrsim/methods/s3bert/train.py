"""`train_s3bert` on the shared Trainer: the last `trainable_layers` transformer layers and the aspect scales train,
the dev loss selects the weights; the run directory loads as `s3bert:<run_id>`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.encoders import resolve_device
from amrsim.evaluate import DevScore
from amrsim.files import atomic_json
from amrsim.methods.s3bert.data import check_split, fingerprint
from amrsim.methods.s3bert.loss import CONSISTENCY_SCALE, DecompositionLoss, consistency_loss
from amrsim.methods.s3bert.model import Teacher, aspect_layout, freeze_except_last_layers, saved_layout
from amrsim.methods.s3bert.params import Hyper
from amrsim.methods.training import (
    EncoderRun,
    Trainer,
    autocast,
    batches,
    refuse_finished_run,
    seeded_batches,
    st_embed,
)

if TYPE_CHECKING:
    import torch

Pairs = tuple[Sequence[str], Sequence[str], np.ndarray]


def rename_legacy_keys(state: dict[str, Any]) -> None:
    """Checkpoints from before the shared Trainer name the best and initial dev losses best_dev_loss and
    initial_dev_loss."""
    for old, new in (("best_dev_loss", "best_score"), ("initial_dev_loss", "initial_score")):
        if old in state:
            state[new] = state.pop(old)


def train_s3bert(model_path: str, texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray,
                 dev: Pairs | None, out_dir: Path, hp: Hyper | None = None, *, resume: bool = True,
                 extra_meta: Mapping[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
    """Train S3BERT from a sentence-transformers model on (texts1, texts2, targets (n, n_aspects) in [0, 1]), with
    `hp` (or any params holding its fields) and/or `Hyper` fields as keywords.

    Every `eval_every` steps (None: once an epoch) and at the end: the dev loss keeps the best weights, and a
    checkpoint that a later call resumes from when `resume` (same data and settings, else an error). `max_steps`
    stops early, as an interruption would. A finished run writes `out_dir/encoder/` and `out_dir/model.json` (plus
    `extra_meta`: what the data was). Returns a summary; `completed` is False when `max_steps` stopped it."""
    import torch
    from sentence_transformers import SentenceTransformer

    hp = Hyper.given(hp, **settings)
    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    y = check_split("training pairs", texts1, texts2, targets, hp.n_aspects)
    dev = (dev[0], dev[1], check_split("dev pairs", *dev, hp.n_aspects)) if dev is not None else None
    device = resolve_device(hp.device)

    model = SentenceTransformer(model_path, device=device)
    layout = aspect_layout(int(model.get_embedding_dimension()), hp.n_aspects, hp.aspect_dim)
    loss = DecompositionLoss(hp.n_aspects, hp.aspect_dim, hp.similarity, device)
    # the teacher's batches fixed by every sentence of the run (train and dev): a resumed run's targets are the
    # uninterrupted run's bit for bit
    teacher = Teacher(model, device, [*texts1, *texts2, *(() if dev is None else (*dev[0], *dev[1]))], hp.batch_size)
    layer_ids = freeze_except_last_layers(model, hp.trainable_layers)  # after the teacher's copy: all frozen
    params = {**{k: getattr(hp, k) for k in ("batch_size", "lr", "warmup", "epochs", "eval_every", "trainable_layers")},
              "trainable_layer_ids": layer_ids, "n_aspects": hp.n_aspects, "aspect_dim": hp.aspect_dim,
              "decomposition_weight": 1.0, "consistency_weight": hp.consistency_weight,
              "consistency_scale": CONSISTENCY_SCALE, "similarity": hp.similarity, "weight_decay": hp.weight_decay,
              "max_grad_norm": hp.max_grad_norm}
    run_key = {"base": model_path, "seed": hp.seed, "train": fingerprint(texts1, texts2, y),
               "dev": fingerprint(*dev) if dev is not None else None,
               **{k: v for k, v in params.items() if k != "eval_every"}}
    best_scales = out_dir / "best_scales.json"
    run = EncoderRun("s3bert", model, out_dir, device, [best_scales])

    def batch_loss(t1: list[str], t2: list[str], targets: np.ndarray) -> torch.Tensor:
        with autocast(device):
            u, v = st_embed(model, t1, device), st_embed(model, t2, device)
        return loss(u, v, torch.as_tensor(targets, device=device)) + hp.consistency_weight * consistency_loss(
            u, teacher(t1), v, teacher(t2), scale=CONSISTENCY_SCALE)

    def dev_loss() -> float:
        assert dev is not None
        model.eval()
        total = 0.0
        with torch.no_grad():
            for sl in batches(len(dev[2]), hp.batch_size):
                total += float(batch_loss(list(dev[0][sl]), list(dev[1][sl]), dev[2][sl])) * len(dev[2][sl])
        model.train()
        return total / len(dev[2])

    def keep_best() -> None:
        run.keep_best()
        atomic_json(best_scales, loss.scales.detach().cpu().tolist())

    torch.manual_seed(hp.seed)
    trainer = run.start(Trainer(
        "S3BERT", hp, [[p for p in model.parameters() if p.requires_grad] + [loss.scales]],
        -(-len(y) // hp.batch_size), seeded_batches(hp.seed, len(y), hp.batch_size),
        lambda rows: {"loss": batch_loss([texts1[i] for i in rows], [texts2[i] for i in rows], y[rows])},
        evaluator=None if dev is None else DevScore(dev_loss, greater_is_better=False), keep_best=keep_best,
        checkpoints=run.checkpoints(run_key, resume, tensors=lambda: {"scales": loss.scales.detach().cpu()},
                                    restore=lambda state: loss.scales.data.copy_(state["scales"].to(device))),
        entry=lambda step, means, score: {"step": step, "train_loss": means["loss"],
                                          **({} if dev is None else {"dev_loss": score})}))
    rename_legacy_keys(trainer.state)
    result = trainer.fit()
    summary: dict[str, Any] = {**result.summary(), "best_dev_loss": result.best_score, "best_step": result.best_step,
                               "initial_dev_loss": result.initial_score,
                               "final_train_loss": result.history[-1]["train_loss"] if result.history else None,
                               "train_pairs": len(y), "dev_pairs": 0 if dev is None else len(dev[2])}
    scales = (json.loads(best_scales.read_text(encoding="utf-8")) if dev is not None and run.best.exists()
              else loss.scales.detach().cpu().tolist())  # the best dev weights' scales, where they were kept
    recorded = saved_layout(layout, scales)
    return run.finish(result, summary, {**recorded, "base": model_path, "params": params, "seed": hp.seed,
                                        "device": device}, extra_meta, dev is not None, {"s3bert": recorded})
