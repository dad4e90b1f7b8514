"""DuEAM's training: the anchor's WMD targets, computed once, then the learner on the one `Trainer`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.encoders import resolve_device
from amrsim.evaluate.sts import StsEvaluator
from amrsim.methods.dueam.loss import dueam_loss
from amrsim.methods.dueam.model import anchor_targets, make_anchor, pooling_of
from amrsim.methods.dueam.params import Hyper
from amrsim.methods.training import (
    EncoderRun,
    Trainer,
    autocast,
    batches,
    load_sentence_encoder,
    open_checkpoint,
    refuse_finished_run,
    seeded_batches,
    st_embed,
)
from amrsim.warehouse.keys import content_key

if TYPE_CHECKING:
    import torch

TARGETS = "anchor_wmd.npy"  # in the checkpoint
LOSS = "L_A - lam * L_B; L_A = mean|exp(-||s'-t'||) - exp(-WMD(s,t))|, L_B = mean cos(s',t')"
# model.json's `params` (the settings that change the numbers; `weights` is `wmd_weights`)
RECIPE = ("lam", "batch_size", "lr", "warmup", "epochs", "anchor_layer", "weights", "unit_vectors", "normalize",
          "max_length", "weight_decay", "max_grad_norm", "train_embedding")


def train_dueam(anchor_path: str, learner_path: str, texts1: Sequence[str], texts2: Sequence[str], out_dir: Path,
                hp: Hyper | None = None, *, dev: tuple[Sequence[str], Sequence[str], np.ndarray] | None = None,
                anchor_texts1: Sequence[str] | None = None, anchor_texts2: Sequence[str] | None = None,
                resume: bool = True,
                extra_meta: Mapping[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
    """Train the learner on (texts1[i], texts2[i]) against the anchor's WMD targets of (anchor_texts1[i],
    anchor_texts2[i]) (default: texts1, texts2; `TrainPair.anchor_texts`) (`hp` and/or `Hyper` fields as keywords);
    pairs with a side empty after tokenisation are skipped and counted. `dev` (texts1, texts2, gold):
    Spearman x100 of the learner's cosine keeps the best weights (else the last). A finished run writes
    `out_dir/encoder/` and `out_dir/model.json`, then removes the checkpoint."""
    import torch

    hp = Hyper.given(hp, **settings)
    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    if len(texts1) != len(texts2):
        raise ValueError(f"DuEAM: {len(texts1)} sentence1s but {len(texts2)} sentence2s; they must align")
    device, texts1, texts2 = resolve_device(hp.device), list(texts1), list(texts2)
    anchored1 = texts1 if anchor_texts1 is None else list(anchor_texts1)
    anchored = texts2 if anchor_texts2 is None else list(anchor_texts2)
    for side, given in (("sentence1", anchored1), ("sentence2", anchored)):
        if len(given) != len(texts2):
            raise ValueError(f"DuEAM: {len(given)} anchor {side}s for {len(texts2)} pairs; they must align")
    params = {k: getattr(hp, "wmd_weights" if k == "weights" else k) for k in RECIPE}
    run_key = {"anchor": anchor_path, "learner": learner_path, "seed": hp.seed, **params,
               "train": (content_key(texts1, texts2) if anchored == texts2 and anchored1 == texts1 else
                         content_key(texts1, texts2, anchored) if anchored1 == texts1 else
                         content_key(texts1, texts2, anchored1, anchored)),
               "dev": content_key(list(dev[0]), list(dev[1]), np.asarray(dev[2]).tolist()) if dev else None}
    ckpt, saved = open_checkpoint(out_dir, run_key, resume)
    if saved is not None:  # resuming: the WMDs the run started with
        dist, anchor_info = np.load(ckpt / TARGETS), saved["anchor"]
    else:
        targets = anchor_targets(make_anchor(anchor_path, hp.anchor_layer, hp.max_length, device), anchored1, anchored,
                                 hp.wmd_weights, hp.unit_vectors)
        dist, anchor_info = targets.wmd, targets.info()
    keep = np.flatnonzero(np.isfinite(dist))
    if len(keep) < 1:
        raise ValueError(f"DuEAM: no usable training pairs (skipped: {anchor_info['skipped']})")
    y, n = dist[keep], len(keep)
    anchor_info |= {"pairs": n, "identical_pairs": int(sum(anchored1[i] == anchored[i] for i in keep)),
                    "wmd_mean": float(y.mean()), "wmd_min": float(y.min()), "wmd_max": float(y.max()),
                    "target_mean": float(np.exp(-y).mean())}

    torch.manual_seed(hp.seed)
    model = load_sentence_encoder(learner_path, hp.normalize, hp.max_length, device, hp.train_embedding)
    run = EncoderRun("dueam", model, out_dir, device)

    def losses(rows: np.ndarray) -> dict[str, torch.Tensor]:
        pairs = keep[rows]
        with autocast(device):
            emb = st_embed(model, [texts1[i] for i in pairs] + [texts2[i] for i in pairs], device)
        loss, la, lb = dueam_loss(emb[:len(rows)], emb[len(rows):], torch.as_tensor(dist[pairs], device=device), hp.lam)
        return {"loss": loss, "l_a": la, "l_b": lb}

    def encode(texts: list[str]) -> np.ndarray:
        model.eval()
        with torch.no_grad(), autocast(device):
            out = torch.cat([st_embed(model, texts[sl], device) for sl in batches(len(texts), 128)])
        model.train()
        return out.float().cpu().numpy()

    trainer = run.start(Trainer(
        "DuEAM", hp, [model], -(-n // hp.batch_size), seeded_batches(hp.seed, n, hp.batch_size), losses,
        evaluator=StsEvaluator(dev[0], dev[1], np.asarray(dev[2], dtype=np.float64), encode) if dev else None,
        keep_best=run.keep_best, row_ids=lambda rows: keep[rows],
        entry=lambda step, means, score: {"step": step, **means, **({"dev_spearman": score} if dev else {})},
        # a resumed run does not recompute the targets
        checkpoints=run.checkpoints(run_key, resume, also=lambda d: np.save(d / TARGETS, dist))))
    trainer.state["anchor"] = anchor_info
    result = trainer.fit()
    summary: dict[str, Any] = {
        **result.summary(), "best_dev": result.best_score, "best_step": result.best_step,
        "initial_dev": result.initial_score, "final_loss": result.history[-1].get("loss") if result.history else None,
        "train_pairs": n, "skipped": anchor_info["skipped"], "anchor": anchor_info}
    meta = {"anchor": anchor_path, "learner": learner_path, "pooling": pooling_of(model), "loss": LOSS,
            "params": params, "seed": hp.seed, "device": device}
    return run.finish(result, summary, meta, extra_meta, dev is not None)
