"""S3BERT (Opitz & Frank 2022): route AMR-metric similarity aspects into fixed sub-embeddings of a sentence encoder.

The embedding is cut into `n_aspects` consecutive sub-embeddings of `aspect_dim` dims (one per AMR metric, the
paper's feature order) and a residual. Two losses train it (reference code: flipz357/S3BERT):

- decomposition: for every aspect, a learnable scale times the similarity of the two sentences' sub-embeddings
  regresses the (min-max normalised) metric value of the pair (MSE);
- consistency: the in-batch sentence1 x sentence2 cosine matrix of the student regresses that of a frozen copy of
  the starting model (the teacher), so the full embedding keeps its similarity ratings.

Only the last `trainable_layers` transformer layers train. Nothing here reads the warehouse: a caller hands over texts
and metric targets (see `normalise_targets`, `with_negatives`) and gets back `<models>/s3bert/<run_id>/` with
`model.json`, which `amrsim.encoders.load_encoder("s3bert:<run_id>")` loads.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from amrsim.encoders import resolve_device
from amrsim.errors import ConfigError
from amrsim.methods.training import (
    atomic_json,
    autocast,
    batches,
    finish_encoder_run,
    linear_warmup,
    open_checkpoint,
    refuse_finished_run,
    resume_train_state,
    run_steps,
    save_checkpoint,
    st_embed,
)
from amrsim.metrics.aspects import S3BERT_ASPECTS as _METRIC_ASPECTS

# safetensors, sentence_transformers are imported inside the functions: importing this module must stay cheap

if TYPE_CHECKING:
    import polars as pl

log = logging.getLogger(__name__)

# The paper's features in its code's order (config.FEATURES of flipz357/S3BERT), as amr_metrics columns: one
# mapping for the project, kept with the metrics.
PAPER_FEATURES: dict[str, str] = dict(_METRIC_ASPECTS)
S3BERT_ASPECTS: list[str] = list(PAPER_FEATURES.values())
RESIDUAL = "residual"
CONSTANT_TARGET = 0.5  # a column with no spread carries no ranking: its midpoint, not the reference's 0/0 = NaN
CONSISTENCY_SCALE = 5.0  # the reference's MultipleConsistencyLoss multiplies both cosine matrices by 5
SIMILARITIES = ("cosine", "manhattan")
STUDENT = "student.safetensors"  # the checkpoint's weights
_LAYER = re.compile(r"(?:^|\.)(?:layer|layers|block)\.(\d+)\.")


# ---------------------------------------------------------------------------------------------------- layout


def aspect_layout(dim: int, n_aspects: int = 15, aspect_dim: int = 16) -> dict[str, tuple[int, int]]:
    """amr_metrics column -> [start, end) of its sub-embedding, first `n_aspects` of the paper's order, then
    `residual` -> the rest. The residual must keep at least one dim: it carries what no metric explains."""
    if not 1 <= n_aspects <= len(S3BERT_ASPECTS):
        raise ValueError(f"n_aspects must be 1..{len(S3BERT_ASPECTS)} (the paper's features), got {n_aspects}")
    if aspect_dim < 1:
        raise ValueError(f"aspect_dim must be >= 1, got {aspect_dim}")
    used = n_aspects * aspect_dim
    if dim <= used:
        raise ValueError(f"embedding dim {dim} is too small for {n_aspects} aspects x {aspect_dim} dims = {used} "
                         "plus a residual of at least 1 dim; use fewer aspects or a smaller aspect_dim")
    layout = {name: (i * aspect_dim, (i + 1) * aspect_dim) for i, name in enumerate(S3BERT_ASPECTS[:n_aspects])}
    layout[RESIDUAL] = (used, dim)
    return layout


def layout_from_meta(meta: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """The layout a trained model's model.json records (aspects, then residual), for `explain`."""
    layout = {name: (int(s), int(e)) for name, (s, e) in (meta.get("aspects") or {}).items()}
    if meta.get(RESIDUAL):
        s, e = meta[RESIDUAL]
        layout[RESIDUAL] = (int(s), int(e))
    return layout


# ---------------------------------------------------------------------------------------------------- targets


def normalise_targets(data: pl.DataFrame | np.ndarray, columns: Sequence[str] | None = None) -> np.ndarray:
    """Metric values -> (n, len(columns)) float32, min-max scaled per column over the rows given (one split, as the
    reference scales each split on its own). A constant column becomes 0.5. A DataFrame must hold every column
    (missing ones are a config error raised before any training); nulls/NaN are errors, not silently zero."""
    columns = list(S3BERT_ASPECTS if columns is None else columns)
    if isinstance(data, np.ndarray):
        matrix = np.asarray(data, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != len(columns):
            raise ValueError(f"S3BERT targets: expected a (rows, {len(columns)}) matrix for columns "
                             f"{', '.join(columns)}; got shape {matrix.shape}")
    else:
        missing = [c for c in columns if c not in data.columns]
        if missing:
            raise ConfigError(f"S3BERT targets: amr_metrics column(s) {', '.join(missing)} missing from the metric "
                              f"table (has: {', '.join(data.columns)}); compute those aspects before training")
        matrix = np.column_stack([data[c].cast(float).fill_null(np.nan).to_numpy() for c in columns]) \
            if len(data) else np.zeros((0, len(columns)))
    bad = [f"{c} ({int(n)} rows)" for c, n in zip(columns, (~np.isfinite(matrix)).sum(0), strict=True) if n]
    if bad:
        raise ValueError(f"S3BERT targets: null/NaN/inf metric values in {', '.join(bad)}; drop or recompute them")
    out = np.full(matrix.shape, CONSTANT_TARGET, dtype=np.float64)
    if len(matrix):
        lo, hi = matrix.min(0), matrix.max(0)
        spread = hi - lo
        varies = spread > 0
        out[:, varies] = (matrix[:, varies] - lo[varies]) / spread[varies]
    return out.astype(np.float32)


def with_negatives(pairs: Sequence[tuple[str, str, Sequence[float] | np.ndarray]], rng: np.random.Generator,
                   score_pair: Callable[[int, int], Sequence[float] | np.ndarray]
                   ) -> list[tuple[str, str, np.ndarray]]:
    """The positives, then one negative per pair i: (sentence1 of i, sentence2 of a random other pair j != i) with
    targets `score_pair(i, j)`. The caller computes those with the metrics engine (graph1 of i vs graph2 of j), since
    a swapped pair's metric values are not the positives'. Raw values: normalise the extended list afterwards, as the
    reference normalises positives and negatives together."""
    n = len(pairs)
    if n < 2:
        raise ValueError(f"with_negatives needs at least 2 pairs to swap partners, got {n}")
    width = len(pairs[0][2])
    partners = (np.arange(n) + rng.integers(1, n, size=n)) % n  # uniform over the n - 1 other pairs
    out = [(s1, s2, np.asarray(t, dtype=np.float64)) for s1, s2, t in pairs]
    for i, j in enumerate(partners.tolist()):
        targets = np.asarray(score_pair(i, j), dtype=np.float64)
        if targets.shape != (width,):
            raise ValueError(f"score_pair({i}, {j}) returned shape {targets.shape}; the pairs have {width} targets")
        out.append((pairs[i][0], pairs[j][1], targets))
    return out


# ---------------------------------------------------------------------------------------------------- losses


def sub_similarity(a: torch.Tensor, b: torch.Tensor, similarity: str = "cosine") -> torch.Tensor:
    """Row-wise similarity of two (batch, d) sub-embeddings: cosine, or the reference's training default
    `1 - L1 distance` ('manhattan')."""
    if similarity == "cosine":
        return F.cosine_similarity(a, b, dim=-1, eps=1e-8)
    if similarity == "manhattan":
        return 1.0 - (a - b).abs().sum(-1)
    raise ValueError(f"similarity '{similarity}' unknown; use one of {', '.join(SIMILARITIES)}")


class DecompositionLoss(nn.Module):
    """MSE between scale_a * sim(u[:, a], v[:, a]) and target_a, over all pairs and aspects; the per-aspect scale is
    learnable (init 1), as the reference's `score_bias`. Aspect a is dims [a * aspect_dim, (a + 1) * aspect_dim)."""

    def __init__(self, n_aspects: int, aspect_dim: int = 16, similarity: str = "cosine"):
        super().__init__()
        if similarity not in SIMILARITIES:
            raise ValueError(f"similarity '{similarity}' unknown; use one of {', '.join(SIMILARITIES)}")
        self.n_aspects, self.aspect_dim, self.similarity = n_aspects, aspect_dim, similarity
        self.scales = nn.Parameter(torch.ones(n_aspects))

    def predict(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(batch, n_aspects): scaled sub-embedding similarities."""
        d = self.aspect_dim
        sims = [sub_similarity(u[:, a * d:(a + 1) * d], v[:, a * d:(a + 1) * d], self.similarity)
                for a in range(self.n_aspects)]
        return torch.stack(sims, dim=1) * self.scales

    def forward(self, u: torch.Tensor, v: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.predict(u, v), targets)


def _cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.normalize(a, dim=-1, eps=1e-12) @ F.normalize(b, dim=-1, eps=1e-12).T


def consistency_loss(student_a: torch.Tensor, teacher_a: torch.Tensor, student_b: torch.Tensor | None = None,
                     teacher_b: torch.Tensor | None = None, *, scale: float = CONSISTENCY_SCALE) -> torch.Tensor:
    """MSE between the student's and the teacher's in-batch cosine matrices of full embeddings, both times `scale`:
    a x b (sentence1s x sentence2s, as in training) when the b sides are given, else a x a."""
    if (student_b is None) != (teacher_b is None):
        raise ValueError("consistency_loss: give both student_b and teacher_b, or neither")
    sb = student_a if student_b is None else student_b
    tb = teacher_a if teacher_b is None else teacher_b
    return F.mse_loss(_cosine_matrix(student_a, sb) * scale, _cosine_matrix(teacher_a, tb) * scale)


# ---------------------------------------------------------------------------------------------------- explain


class _Encodes(Protocol):
    def encode(self, texts: list[str]) -> Any: ...


def explain(model: _Encodes, text1: str, text2: str, layout: Mapping[str, tuple[int, int]]) -> dict[str, float]:
    """Why two sentences are similar: `overall` (cosine of full embeddings), then the cosine of each layout entry's
    sub-embedding (aspects, residual). Raw cosines: the learned per-aspect scales are in model.json."""
    emb = np.asarray(model.encode([text1, text2]), dtype=np.float64)

    def cos(a: np.ndarray, b: np.ndarray) -> float:
        denom = max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
        return float(a @ b / denom)

    out = {"overall": cos(emb[0], emb[1])}
    for name, (start, end) in layout.items():
        if not 0 <= start < end <= emb.shape[1]:
            raise ValueError(f"layout '{name}' [{start}, {end}) does not fit the {emb.shape[1]}-dim embedding")
        out[name] = cos(emb[0, start:end], emb[1, start:end])
    return out


def contributions(emb1: np.ndarray, emb2: np.ndarray, layout: Mapping[str, tuple[int, int]]) -> dict[str, float]:
    """How much each sub-embedding adds to the overall cosine: a_k.b_k / (|a||b|); over a layout that covers the
    embedding (aspects + residual) they sum to the overall cosine."""
    a, b = np.asarray(emb1, dtype=np.float64), np.asarray(emb2, dtype=np.float64)
    denom = max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
    return {name: float(a[s:e] @ b[s:e] / denom) for name, (s, e) in layout.items()}


# ---------------------------------------------------------------------------------------------------- training


def freeze_except_last_layers(model: nn.Module, n: int) -> list[int]:
    """requires_grad only for parameters of the last `n` numbered transformer layers (embeddings, pooler and any
    other module stay frozen, as the reference does); returns the trainable layer ids."""
    if n < 1:
        raise ValueError(f"trainable_layers must be >= 1, got {n}")
    ids = sorted({int(m.group(1)) for name, _ in model.named_parameters() if (m := _LAYER.search(name))})
    if not ids:
        raise ValueError("no numbered transformer layers (*.layer.N.*) found in the model to unfreeze")
    keep = set(ids[-n:])
    for name, param in model.named_parameters():
        m = _LAYER.search(name)
        param.requires_grad = bool(m and int(m.group(1)) in keep)
    return sorted(keep)


def _fingerprint(texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([list(texts1), list(texts2)], ensure_ascii=False).encode("utf-8"))
    h.update(np.ascontiguousarray(targets, dtype=np.float32).tobytes())
    return h.hexdigest()[:16]


def _check_split(what: str, texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray,
                 n_aspects: int) -> np.ndarray:
    y = np.asarray(targets, dtype=np.float32)
    if len(texts1) != len(texts2) or y.ndim != 2 or len(y) != len(texts1):
        raise ValueError(f"S3BERT {what}: {len(texts1)} sentence1s, {len(texts2)} sentence2s and targets of shape "
                         f"{y.shape}; they must align row by row")
    if y.shape[1] != n_aspects:
        raise ValueError(f"S3BERT {what}: targets have {y.shape[1]} columns but n_aspects={n_aspects}")
    if not len(y):
        raise ValueError(f"S3BERT {what}: no pairs")
    if not np.isfinite(y).all():
        raise ValueError(f"S3BERT {what}: targets contain NaN/inf (rows {np.where(~np.isfinite(y).all(1))[0][:10]})")
    return y


def train_s3bert(model_path: str, texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray,
                 dev: tuple[Sequence[str], Sequence[str], np.ndarray] | None, out_dir: Path, *,
                 batch_size: int = 64, lr: float = 2e-5, warmup: int = 100, epochs: int = 2, eval_every: int = 1000,
                 trainable_layers: int = 2, seed: int = 0, device: str = "auto", max_steps: int | None = None,
                 resume: bool = True, n_aspects: int = 15, aspect_dim: int = 16, decomposition_weight: float = 1.0,
                 consistency_weight: float = 1.0, consistency_scale: float = CONSISTENCY_SCALE,
                 similarity: str = "cosine", weight_decay: float = 0.01, max_grad_norm: float = 1.0,
                 extra_meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train S3BERT from a sentence-transformers model on (texts1, texts2, targets (n, n_aspects) in [0, 1]).

    Every `eval_every` steps and at the end: dev loss (decomposition + consistency, weighted), the best weights kept,
    and a checkpoint (weights, optimizer, scheduler, step, RNG) in `out_dir/checkpoint/` that a later call resumes
    from when `resume` (same data and settings, else an error). `max_steps` stops the run early, checkpointed, as an
    interruption would: the LR schedule still spans `epochs`, so resuming continues the same run. A finished run
    writes `out_dir/encoder/` (the best dev weights, or the last without dev) and `out_dir/model.json`, then removes
    the checkpoint. Returns a summary; `completed` is False when `max_steps` stopped it. `extra_meta` (what the data
    was: table versions, counts) goes into model.json.
    """
    from safetensors.torch import load_model, save_model
    from sentence_transformers import SentenceTransformer


    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    if batch_size < 1 or epochs < 1 or eval_every < 1 or warmup < 0 or (max_steps is not None and max_steps < 1):
        raise ValueError("S3BERT: batch_size, epochs, eval_every (and max_steps when given) must be >= 1, warmup >= 0")
    y = _check_split("training pairs", texts1, texts2, targets, n_aspects)
    dev_y = _check_split("dev pairs", dev[0], dev[1], dev[2], n_aspects) if dev is not None else None
    device = resolve_device(device)

    student = SentenceTransformer(model_path, device=device)
    dim = int(student.get_embedding_dimension())
    layout = aspect_layout(dim, n_aspects, aspect_dim)
    teacher = copy.deepcopy(student).eval()
    for p in teacher.parameters():
        p.requires_grad = False
    layer_ids = freeze_except_last_layers(student, trainable_layers)
    decomposition = DecompositionLoss(n_aspects, aspect_dim, similarity).to(device)

    n = len(y)
    steps_per_epoch = math.ceil(n / batch_size)
    total = epochs * steps_per_epoch
    stop_at = total if max_steps is None else min(total, max_steps)
    params = {"batch_size": batch_size, "lr": lr, "warmup": warmup, "epochs": epochs, "eval_every": eval_every,
              "trainable_layers": trainable_layers, "trainable_layer_ids": layer_ids, "n_aspects": n_aspects,
              "aspect_dim": aspect_dim, "decomposition_weight": decomposition_weight,
              "consistency_weight": consistency_weight, "consistency_scale": consistency_scale,
              "similarity": similarity, "weight_decay": weight_decay, "max_grad_norm": max_grad_norm}
    run_key = {"base": model_path, "seed": seed, "train": _fingerprint(texts1, texts2, y),
               "dev": _fingerprint(dev[0], dev[1], dev_y) if dev is not None and dev_y is not None else None,
               **{k: v for k, v in params.items() if k != "eval_every"}}

    trainable = [(name, p) for name, p in student.named_parameters() if p.requires_grad]
    # AdamW weight decay as sentence-transformers' fit: none on biases, norms and the aspect scales
    no_decay = [p for name, p in trainable if "bias" in name or "norm" in name.lower()]
    decay = [p for name, p in trainable if not ("bias" in name or "norm" in name.lower())]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                   {"params": [*no_decay, decomposition.scales], "weight_decay": 0.0}], lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(warmup, total))
    torch.manual_seed(seed)

    best_path, best_scales = out_dir / "best.safetensors", out_dir / "best_scales.json"
    ckpt, saved = open_checkpoint(out_dir, run_key, resume)
    state: dict[str, Any] = {"step": 0, "run": run_key, "best_dev_loss": None, "best_step": None,
                             "initial_dev_loss": None, "history": []}
    resumed_from = None
    if saved is not None:
        load_model(student, str(ckpt / STUDENT), device=device)
        train_state = resume_train_state(ckpt, optimizer, scheduler)  # weights_only: a crafted pickle is refused
        decomposition.scales.data.copy_(train_state["scales"].to(device))
        state = saved
        resumed_from = state["step"]
        log.info("S3BERT: resuming %s from step %d", out_dir, resumed_from)
    else:  # a fresh start: nothing of an earlier attempt may leak into this run
        shutil.rmtree(ckpt, ignore_errors=True)
        best_path.unlink(missing_ok=True)
        best_scales.unlink(missing_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)

    weights = (decomposition_weight, consistency_weight)
    # The teacher is frozen and in eval mode: a sentence's embedding never changes, so each is computed once (a
    # sentence recurs in its pair, in a negative and in every epoch: this removes most of the teacher's forwards).
    teacher_cache: dict[str, torch.Tensor] = {}

    def teacher_embed(texts: list[str]) -> torch.Tensor:
        missing = [t for t in dict.fromkeys(texts) if t not in teacher_cache]
        if missing:
            with torch.no_grad(), autocast(device):
                emb = st_embed(teacher, missing, device)
            teacher_cache.update(zip(missing, emb, strict=True))
        return torch.stack([teacher_cache[t] for t in texts])

    def dev_loss() -> float:
        """Weighted loss over dev batches in fixed order, averaged by batch size."""
        assert dev is not None and dev_y is not None
        student.eval()
        total_loss, count = 0.0, 0
        with torch.no_grad():
            for sl in batches(len(dev_y), batch_size):
                with autocast(device):
                    u, v = st_embed(student, dev[0][sl], device), st_embed(student, dev[1][sl], device)
                ta, tb = teacher_embed(list(dev[0][sl])), teacher_embed(list(dev[1][sl]))
                target = torch.as_tensor(dev_y[sl], device=device)
                loss = (weights[0] * decomposition(u, v, target)
                        + weights[1] * consistency_loss(u, ta, v, tb, scale=consistency_scale))
                total_loss += float(loss) * len(target)
                count += len(target)
        student.train()
        return total_loss / count

    def checkpoint() -> None:
        save_checkpoint(out_dir, state, optimizer, scheduler, lambda d: save_model(student, str(d / STUDENT)),
                        scales=decomposition.scales.detach().cpu())

    def evaluate_and_checkpoint(step: int, train_loss: float | None) -> None:
        entry: dict[str, Any] = {"step": step, "train_loss": train_loss}
        if dev is not None:
            loss = dev_loss()
            entry["dev_loss"] = loss
            if state["best_dev_loss"] is None or loss < state["best_dev_loss"]:
                state["best_dev_loss"], state["best_step"] = loss, step
                save_model(student, str(best_path))
                atomic_json(best_scales, decomposition.scales.detach().cpu().tolist())
            log.info("S3BERT step %d/%d: train loss %s, dev loss %.5f", step, total, train_loss, loss)
        state["history"].append(entry)
        state["step"] = step
        checkpoint()

    if resumed_from is None and dev is not None:
        state["initial_dev_loss"] = dev_loss()
    student.train()

    def batch_losses(rows: np.ndarray) -> dict[str, torch.Tensor]:
        with autocast(device):
            u = st_embed(student, [texts1[i] for i in rows], device)
            v = st_embed(student, [texts2[i] for i in rows], device)
        ta, tb = teacher_embed([texts1[i] for i in rows]), teacher_embed([texts2[i] for i in rows])
        target = torch.as_tensor(y[rows], device=device)
        return {"loss": weights[0] * decomposition(u, v, target)
                + weights[1] * consistency_loss(u, ta, v, tb, scale=consistency_scale)}

    step = run_steps("S3BERT", step=state["step"], stop_at=stop_at, n=n, batch_size=batch_size, seed=seed,
                     eval_every=eval_every, losses=batch_losses,
                     parameters=[p for _, p in trainable] + [decomposition.scales], optimizer=optimizer,
                     scheduler=scheduler, max_grad_norm=max_grad_norm,
                     report=lambda at, means: evaluate_and_checkpoint(at, means["loss"]))

    summary: dict[str, Any] = {"completed": step >= total, "steps": step, "total_steps": total,
                               "resumed_from": resumed_from, "best_dev_loss": state["best_dev_loss"],
                               "best_step": state["best_step"], "initial_dev_loss": state["initial_dev_loss"],
                               "final_train_loss": state["history"][-1]["train_loss"] if state["history"] else None,
                               "train_pairs": n, "dev_pairs": len(dev_y) if dev_y is not None else 0}
    if step < total:
        return summary

    scales = decomposition.scales.detach().cpu().tolist()
    if dev is not None and best_path.exists():
        scales = json.loads(best_scales.read_text(encoding="utf-8"))
    aspects = {name: list(span) for name, span in layout.items() if name != RESIDUAL}
    saved_layout = {"aspects": aspects, RESIDUAL: list(layout[RESIDUAL]),
                    "aspect_scales": dict(zip(aspects, scales, strict=True))}
    meta = {**saved_layout, "base": model_path, "params": params,
            "seed": seed, "device": device, "metrics": {k: v for k, v in summary.items() if k != "completed"},
            "history": state["history"], **(extra_meta or {})}
    # the layout travels with the model: `SentenceTransformer(out_dir)` loads it, its config says what each slice is
    encoder_dir = finish_encoder_run(out_dir, "s3bert", student, best_path if dev is not None else None, meta,
                                     {"s3bert": saved_layout}, leftovers=[best_scales])
    return {**summary, "model_dir": str(out_dir), "encoder_dir": str(encoder_dir)}
