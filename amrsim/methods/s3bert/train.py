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
    Checkpoints,
    Trainer,
    autocast,
    batches,
    finish_encoder_run,
    refuse_finished_run,
    seeded_batches,
    st_embed,
)

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

STUDENT = "student.safetensors"  # the checkpoint's weights
Pairs = tuple[Sequence[str], Sequence[str], np.ndarray]


class _Run:
    """The student, its teacher and the weighted objective; the best dev weights and the checkpoint's contents."""

    def __init__(self, model: SentenceTransformer, loss: DecompositionLoss, consistency_weight: float, device: str,
                 out_dir: Path, texts: Sequence[str], batch_size: int):
        # the teacher's batches fixed by every sentence of the run (train and dev): a resumed run's targets are
        # the uninterrupted run's bit for bit
        self.model, self.loss, self.consistency_weight = model, loss, consistency_weight
        self.teacher, self.device, self.out_dir = Teacher(model, device, texts, batch_size), device, out_dir
        self.best, self.best_scales = out_dir / "best.safetensors", out_dir / "best_scales.json"

    def batch_loss(self, texts1: list[str], texts2: list[str], targets: np.ndarray) -> torch.Tensor:
        import torch

        with autocast(self.device):
            u, v = st_embed(self.model, texts1, self.device), st_embed(self.model, texts2, self.device)
        teacher_u, teacher_v = self.teacher(texts1), self.teacher(texts2)
        y = torch.as_tensor(targets, device=self.device)
        return self.loss(u, v, y) + self.consistency_weight * consistency_loss(u, teacher_u, v, teacher_v,
                                                                               scale=CONSISTENCY_SCALE)

    def dev_loss(self, dev: Pairs, batch_size: int) -> float:
        import torch

        self.model.eval()
        total = 0.0
        with torch.no_grad():
            for sl in batches(len(dev[2]), batch_size):
                total += float(self.batch_loss(list(dev[0][sl]), list(dev[1][sl]), dev[2][sl])) * len(dev[2][sl])
        self.model.train()
        return total / len(dev[2])

    def keep_best(self) -> None:
        from safetensors.torch import save_model

        save_model(self.model, str(self.best))
        atomic_json(self.best_scales, self.loss.scales.detach().cpu().tolist())

    def checkpoints(self, run_key: Mapping[str, Any], resume: bool) -> Checkpoints:
        from safetensors.torch import load_model, save_model

        def restore(train_state: Mapping[str, Any]) -> None:
            self.loss.scales.data.copy_(train_state["scales"].to(self.device))

        return Checkpoints(self.out_dir, run_key, lambda d: save_model(self.model, str(d / STUDENT)),
                           lambda d: load_model(self.model, str(d / STUDENT), device=self.device), resume,
                           tensors=lambda: {"scales": self.loss.scales.detach().cpu()}, restore=restore)

    def start(self, trainer: Trainer) -> None:
        """Resume, or start fresh without an earlier attempt's best weights. (Checkpoints from before the shared
        Trainer name the best and initial dev losses `best_dev_loss`, `initial_dev_loss`.)"""
        if trainer.start().resumed_from is None:
            self.best.unlink(missing_ok=True)
            self.best_scales.unlink(missing_ok=True)
        for old, new in (("best_dev_loss", "best_score"), ("initial_dev_loss", "initial_score")):
            if old in trainer.state:
                trainer.state[new] = trainer.state.pop(old)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.model.train()

    def finish(self, layout: Mapping[str, tuple[int, int]], with_dev: bool, meta: Mapping[str, Any]) -> Path:
        """The encoder (the best dev weights, else the last) and model.json (layout, those weights' scales, meta)."""
        scales = self.loss.scales.detach().cpu().tolist()
        if with_dev and self.best.exists():
            scales = json.loads(self.best_scales.read_text(encoding="utf-8"))
        recorded = saved_layout(layout, scales)
        return finish_encoder_run(self.out_dir, "s3bert", self.model, self.best if with_dev else None,
                                  {**recorded, **meta}, {"s3bert": recorded}, leftovers=[self.best_scales])


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
    run = _Run(model, DecompositionLoss(hp.n_aspects, hp.aspect_dim, hp.similarity, device), hp.consistency_weight,
               device, out_dir, [*texts1, *texts2, *(() if dev is None else (*dev[0], *dev[1]))], hp.batch_size)
    layer_ids = freeze_except_last_layers(model, hp.trainable_layers)  # after the teacher's copy: all frozen
    params = {**{k: getattr(hp, k) for k in ("batch_size", "lr", "warmup", "epochs", "eval_every", "trainable_layers")},
              "trainable_layer_ids": layer_ids, "n_aspects": hp.n_aspects, "aspect_dim": hp.aspect_dim,
              "decomposition_weight": 1.0, "consistency_weight": hp.consistency_weight,
              "consistency_scale": CONSISTENCY_SCALE, "similarity": hp.similarity, "weight_decay": hp.weight_decay,
              "max_grad_norm": hp.max_grad_norm}
    run_key = {"base": model_path, "seed": hp.seed, "train": fingerprint(texts1, texts2, y),
               "dev": fingerprint(*dev) if dev is not None else None,
               **{k: v for k, v in params.items() if k != "eval_every"}}
    torch.manual_seed(hp.seed)
    trainer = Trainer(
        "S3BERT", hp, [[p for p in model.parameters() if p.requires_grad] + [run.loss.scales]],
        -(-len(y) // hp.batch_size), seeded_batches(hp.seed, len(y), hp.batch_size),
        lambda rows: {"loss": run.batch_loss([texts1[i] for i in rows], [texts2[i] for i in rows], y[rows])},
        evaluator=None if dev is None else DevScore(lambda: run.dev_loss(dev, hp.batch_size), greater_is_better=False),
        keep_best=run.keep_best, checkpoints=run.checkpoints(run_key, resume),
        entry=lambda step, means, score: {"step": step, "train_loss": means["loss"],
                                          **({} if dev is None else {"dev_loss": score})})
    run.start(trainer)
    result = trainer.fit()
    summary: dict[str, Any] = {"completed": result.completed, "steps": result.steps,
                               "total_steps": result.total_steps, "resumed_from": result.resumed_from,
                               "best_dev_loss": result.best_score, "best_step": result.best_step,
                               "initial_dev_loss": result.initial_score,
                               "final_train_loss": result.history[-1]["train_loss"] if result.history else None,
                               "train_pairs": len(y), "dev_pairs": 0 if dev is None else len(dev[2])}
    if not result.completed:
        return summary
    encoder_dir = run.finish(layout, dev is not None, {
        "base": model_path, "params": params, "seed": hp.seed, "device": device,
        "metrics": {k: v for k, v in summary.items() if k != "completed"}, "history": result.history,
        **(extra_meta or {})})
    return {**summary, "model_dir": str(out_dir), "encoder_dir": str(encoder_dir)}
