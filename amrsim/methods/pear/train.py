"""PEAR (Jørgensen 2024, SemEval-2024 Task 1): a cross-encoder for semantic relatedness.

A masked-LM encoder reads the sentence pair (`[CLS] s1 [SEP] s2 [SEP]`, at most 128 tokens) and a single-logit head
scores it; training minimises BCE-with-logits against gold scores normalised to 0-1, prediction is the sigmoid.
AdamW (weight decay 0.01, none on biases and LayerNorm), linear warmup over 10% of the steps then linear decay,
gradient-norm clipping. Re-sampling (`fit_pear`): train E_weak epochs on the gold pairs, let the cross-encoder label
bi-encoder kNN pairs (`CrossEncoderScorer`, the `Scorer` of amrsim.augment.knn), add them, train E more epochs.

torch and transformers are imported inside the functions, so the light modules that import this one (pear_run's
config validation, `amrsim score` argument parsing) stay fast.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.encoders import load_encoder, model_subdir, resolve_device
from amrsim.evaluate.sts import correlations, cosine
from amrsim.methods.portable import add_cross_encoder_files, link_run_root
from amrsim.methods.training import (
    NonFiniteLossError,
    autocast,
    linear_warmup,
    refuse_finished_run,
    swap_dir,
    write_model_json,
)

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

KIND = "cross-encoder"  # model.json `kind`: the model scores pairs, it has no sentence embedding
MODEL_SUBDIR = "cross_encoder"
MAX_LENGTH = 128
WARMUP_RATIO = 0.1
WEIGHT_DECAY = 0.01
_NO_DECAY = ("bias", "layernorm", "layer_norm", "ln_")


# ---------------------------------------------------------------------------------------------------- targets, loss


def normalise_scores(scores: Sequence[float] | np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Gold scores on [lo, hi] -> [0, 1] float32 (BCE targets); values outside are clipped, NaN is an error."""
    if not hi > lo:
        raise ValueError(f"score range [{lo}, {hi}] is empty: need hi > lo")
    y = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(y).all():
        raise ValueError(f"scores contain NaN/inf at rows {np.where(~np.isfinite(y))[0][:10].tolist()}")
    return np.clip((y - lo) / (hi - lo), 0.0, 1.0).astype(np.float32)


def bce_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean BCE-with-logits of single logits against 0-1 targets (soft labels): -t log σ(z) - (1-t) log(1-σ(z))."""
    import torch.nn.functional as F  # noqa: N812

    return F.binary_cross_entropy_with_logits(logits.float().reshape(-1), targets.float().reshape(-1))


def no_decay(name: str) -> bool:
    """Biases and LayerNorm parameters get no weight decay (BERT / sentence-transformers convention)."""
    lowered = name.lower()
    return any(part in lowered for part in _NO_DECAY)


def param_groups(model: torch.nn.Module, weight_decay: float = WEIGHT_DECAY) -> list[dict[str, Any]]:
    """AdamW groups: decayed weights, then biases and LayerNorm with weight decay 0; each group lists `names`."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [(n, p) for n, p in named if not no_decay(n)]
    plain = [(n, p) for n, p in named if no_decay(n)]
    return [{"params": [p for _, p in decay], "names": [n for n, _ in decay], "weight_decay": weight_decay},
            {"params": [p for _, p in plain], "names": [n for n, _ in plain], "weight_decay": 0.0}]


def warmup_steps(total: int, ratio: float = WARMUP_RATIO) -> int:
    """Warmup length: `ratio` of the run's optimizer steps, rounded up (PEAR: 10%)."""
    return math.ceil(total * ratio)


# ---------------------------------------------------------------------------------------------------- the model


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Loading a base model without a classifier head logs a load report; the head is new by design."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


class CrossEncoder:
    """A transformers sequence-classification model with one logit over a tokenised sentence pair."""

    def __init__(self, path: str, device: str = "auto", max_length: int = MAX_LENGTH, safetensors_only: bool = False):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer


        self.path, self.max_length = str(path), max_length
        self.device = resolve_device(device)
        self.offset: BaseOffset | None = None  # a residual model's starting point, added to every logit
        kwargs: dict[str, Any] = {"num_labels": 1}
        if safetensors_only:  # a trained model from the warehouse: never a pickled pytorch_model.bin
            kwargs["use_safetensors"] = True
        with _quiet_transformers():
            self.tokenizer = AutoTokenizer.from_pretrained(self.path)
            self.model = AutoModelForSequenceClassification.from_pretrained(self.path, **kwargs).to(self.device)

    def features(self, texts1: Sequence[str], texts2: Sequence[str]) -> dict[str, torch.Tensor]:
        batch = self.tokenizer(list(texts1), list(texts2), padding=True, truncation=True,
                               max_length=self.max_length, return_tensors="pt")
        return {k: v.to(self.device) for k, v in batch.items()}

    def logits(self, texts1: Sequence[str], texts2: Sequence[str]) -> torch.Tensor:
        with autocast(self.device):
            return self.model(**self.features(texts1, texts2)).logits.float().reshape(-1)

    def predict(self, texts1: Sequence[str], texts2: Sequence[str], batch_size: int = 64,
                symmetric: bool = False) -> np.ndarray:
        """σ(logit) per pair, in 0-1; pairs are batched by length (less padding), returned in input order. With
        `symmetric`, the mean of both orders: similarity is symmetric, a cross-encoder reading one order is not."""
        import torch

        if symmetric:
            return (self.predict(texts1, texts2, batch_size) + self.predict(texts2, texts1, batch_size)) / 2
        if len(texts1) != len(texts2):
            raise ValueError(f"{len(texts1)} first sentences but {len(texts2)} second sentences")
        out = np.zeros(len(texts1), dtype=np.float32)
        if not len(texts1):
            return out
        offsets = None if self.offset is None else self.offset(texts1, texts2)
        order = np.argsort([len(a) + len(b) for a, b in zip(texts1, texts2, strict=True)], kind="stable")
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for start in range(0, len(order), batch_size):
                    rows = order[start:start + batch_size]
                    z = self.logits([texts1[i] for i in rows], [texts2[i] for i in rows])
                    if offsets is not None:
                        z = z + torch.as_tensor(offsets[rows], device=z.device)
                    out[rows] = torch.sigmoid(z).cpu().numpy()
        finally:
            self.model.train(was_training)
        return out

    def save(self, directory: Path) -> None:
        """Weights as model.safetensors, config and tokenizer files."""
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(directory), safe_serialization=True)
        self.tokenizer.save_pretrained(str(directory))


class CrossEncoderScorer:
    """amrsim.augment.knn's `Scorer` backed by a cross-encoder: weak labels σ(logit) of index pairs into `texts`."""

    def __init__(self, model: CrossEncoder, texts: Sequence[str], name: str = "cross-encoder", batch_size: int = 64):
        self.model, self.texts, self.batch_size = model, list(texts), batch_size
        self.name = f"cross-encoder:{name}"

    def score(self, pairs: list[tuple[int, int]]) -> np.ndarray:
        return self.model.predict([self.texts[i] for i, _ in pairs], [self.texts[j] for _, j in pairs],
                                  self.batch_size).astype(np.float64)


# ---------------------------------------------------------------------------------------------------- training


@dataclass(frozen=True)
class Hyper:
    """One PEAR configuration: the Optuna search space's five dimensions plus the fixed settings."""

    lr: float = 5e-5
    epochs: int = 3  # E: epochs on gold (+ silver) pairs
    e_weak: int = 0  # E_weak: epochs on gold before the cross-encoder labels the kNN pairs
    k: int = 0  # kNN neighbours per sentence (0: no re-sampling)
    max_grad_norm: float = 1.0
    batch_size: int = 32
    weight_decay: float = WEIGHT_DECAY
    warmup_ratio: float = WARMUP_RATIO
    both_orders: bool = False  # train on (a, b) and (b, a): a cross-encoder reads one order, similarity has none


def both_orders(texts1: Sequence[str], texts2: Sequence[str],
                targets: np.ndarray) -> tuple[list[str], list[str], np.ndarray]:
    """Every pair followed by its swap, same target (sentence-transformers' STSb cross-encoder recipe)."""
    t1 = [s for a, b in zip(texts1, texts2, strict=True) for s in (a, b)]
    t2 = [s for a, b in zip(texts1, texts2, strict=True) for s in (b, a)]
    return t1, t2, np.repeat(np.asarray(targets, dtype=np.float32), 2)


def _check_pairs(texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray) -> np.ndarray:
    y = np.asarray(targets, dtype=np.float32).reshape(-1)
    if not (len(texts1) == len(texts2) == len(y)):
        raise ValueError(f"PEAR: {len(texts1)} sentence1s, {len(texts2)} sentence2s, {len(y)} targets; they must "
                         "align row by row")
    if not len(y):
        raise ValueError("PEAR: no training pairs")
    if not (np.isfinite(y).all() and (y >= 0).all() and (y <= 1).all()):
        raise ValueError("PEAR: targets must be finite and in [0, 1] (normalise_scores)")
    return y


BUCKET_BATCHES = 50  # batches per length bucket: shuffled pairs, sorted by length within each bucket


def length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                   bucket: int = BUCKET_BATCHES) -> list[np.ndarray]:
    """One epoch's batches of row indices: a random permutation cut into buckets of `bucket` batches, each bucket
    sorted by pair length (a batch pads to its longest pair: an epoch of STSb + SICK train, batch 32, is 345k padded
    tokens instead of random batches' 657k), batches shuffled. Every row once, in ceil(n / batch_size) batches, at
    most one of them short."""
    n = len(lengths)
    order = rng.permutation(n)
    span = batch_size * bucket
    batches = []
    for start in range(0, n, span):
        chunk = order[start:start + span]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def train_epochs(model: CrossEncoder, texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray, *,
                 epochs: int, lr: float, batch_size: int = 32, max_grad_norm: float = 1.0,
                 weight_decay: float = WEIGHT_DECAY, warmup_ratio: float = WARMUP_RATIO, seed: int = 0,
                 phase: str = "train", log_every: int = 50) -> list[dict[str, Any]]:
    """`epochs` passes over the pairs (length-bucketed batches) with a fresh AdamW and warmup-linear schedule (as
    each `fit` of the paper's code); returns per-epoch mean losses."""
    import torch

    y = _check_pairs(texts1, texts2, targets)
    if epochs < 1:
        return []
    n = len(y)
    per_epoch = math.ceil(n / batch_size)
    total = epochs * per_epoch
    optimizer = torch.optim.AdamW(
        [{k: v for k, v in g.items() if k != "names"} for g in param_groups(model.model, weight_decay)], lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(warmup_steps(total, warmup_ratio), total))
    torch.manual_seed(seed)
    model.model.train()
    params = [p for p in model.model.parameters() if p.requires_grad]
    offsets = None if model.offset is None else torch.as_tensor(model.offset(texts1, texts2), device=model.device)
    history, step = [], 0
    lengths = np.array([len(a) + len(b) for a, b in zip(texts1, texts2, strict=True)])
    for epoch in range(epochs):
        running, count = 0.0, 0
        for rows in length_batches(lengths, batch_size, np.random.default_rng([seed, epoch])):
            z = model.logits([texts1[i] for i in rows], [texts2[i] for i in rows])
            if offsets is not None:
                z = z + offsets[torch.as_tensor(rows, device=model.device)]
            loss = bce_loss(z, torch.as_tensor(y[rows], device=model.device))
            if not torch.isfinite(loss):
                raise NonFiniteLossError("PEAR", "non-finite loss", step + 1, rows,
                                         advice="fix the data or lower the learning rate")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            running, count = running + float(loss.detach()), count + 1
            if log_every and step % log_every == 0:
                log.info("PEAR %s: step %d/%d, loss %.4f", phase, step, total, running / count)
        history.append({"phase": phase, "epoch": epoch + 1, "steps": count, "loss": running / max(1, count)})
    model.model.eval()
    return history


Augmenter = Callable[[CrossEncoder | None, int], tuple[list[str], list[str], np.ndarray]]


def fit_pear(base: str, texts1: Sequence[str], texts2: Sequence[str], targets: np.ndarray, hp: Hyper, *,
             augment: Augmenter | None = None, seed: int = 0, device: str = "auto",
             max_length: int = MAX_LENGTH, offset: BaseOffset | None = None) -> tuple[CrossEncoder, dict[str, Any]]:
    """PEAR's augmented re-sampling: E_weak epochs on gold; then, with k > 0, `augment(model, k)` returns kNN
    silver pairs weak-labelled by that model (None when E_weak = 0: nothing trained yet, the augmenter falls back
    to the bi-encoder cosine); then E epochs on gold + silver, continuing from the weak model. With
    `hp.both_orders`, every gold and silver pair is trained in both sentence orders (twice the rows). With `offset`
    the model is residual (`start_from_base`): it learns a correction to the base bi-encoder's score."""
    y = _check_pairs(texts1, texts2, targets)
    model = CrossEncoder(base, device=device, max_length=max_length)
    if offset is not None:
        start_from_base(model, offset)
    common = {"lr": hp.lr, "batch_size": hp.batch_size, "max_grad_norm": hp.max_grad_norm,
              "weight_decay": hp.weight_decay, "warmup_ratio": hp.warmup_ratio, "seed": seed}
    orders = both_orders if hp.both_orders else (lambda a, b, t: (list(a), list(b), np.asarray(t, np.float32)))
    t1, t2, all_y = orders(texts1, texts2, y)
    history = train_epochs(model, t1, t2, all_y, epochs=hp.e_weak, phase="weak", **common)
    silver = 0
    if hp.k > 0 and augment is not None:
        s1, s2, sy = augment(model if hp.e_weak > 0 else None, hp.k)
        silver = len(sy)
        s1, s2, sy = orders(s1, s2, sy)
        t1, t2 = t1 + list(s1), t2 + list(s2)
        all_y = np.concatenate([all_y, np.clip(np.asarray(sy, dtype=np.float32), 0.0, 1.0)])
    history += train_epochs(model, t1, t2, all_y, epochs=hp.epochs, phase="main", **{**common, "seed": seed + 1})
    return model, {"history": history, "gold_pairs": len(y), "silver_pairs": silver, "train_rows": len(all_y)}


def spearman(pred: np.ndarray, gold: np.ndarray) -> float | None:
    """Spearman x 100 (None when undefined), as the evaluation suite reports it."""
    return correlations(pred, gold)["spearman"]


# ---------------------------------------------------------------------------------------------------- save, load


def save_run(model: CrossEncoder, out_dir: Path, meta: Mapping[str, Any]) -> Path:
    """`out_dir/cross_encoder/` (safetensors, config, tokenizer, sentence-transformers' CrossEncoder files), the run
    directory's own CrossEncoder files pointing into it, then `out_dir/model.json` last, so a directory with
    model.json always holds a complete model."""
    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)

    def write(directory: Path) -> None:
        model.save(directory)
        add_cross_encoder_files(directory, model.max_length)

    swap_dir(out_dir / MODEL_SUBDIR, write)
    if model.offset is None:  # a residual model's score needs its base: amrsim loads it, a bare CrossEncoder cannot
        # `CrossEncoder(out_dir)` loads it; a symmetric run's score is the mean of both orders (said in the config)
        link_run_root(out_dir, MODEL_SUBDIR, {"pear": {"symmetric": bool(meta.get("symmetric", False)),
                                                       "max_length": model.max_length}})
    write_model_json(out_dir, "pear", {"kind": KIND, "encoder": MODEL_SUBDIR, "max_length": model.max_length, **meta})
    return out_dir


_RECENT_SCORES = 4  # score() calls a loaded PEAR model remembers: an evaluation's test sets


@dataclass
class TrainedCrossEncoder:
    """A trained PEAR model loaded by name: `score(texts1, texts2)`; it has no sentence embedding."""

    name: str
    model_id: str
    path: str
    batch_size: int = 64
    device: str = "auto"
    models_root: str | None = None  # where a residual model's base is found, when it is a trained run
    dim: int = 0

    def __post_init__(self) -> None:
        meta = json.loads((Path(self.path) / "model.json").read_text(encoding="utf-8"))
        sub = model_subdir(self.path, str(meta.get("encoder", MODEL_SUBDIR)))
        if not sub.is_dir():
            raise ValueError(f"{Path(self.path) / 'model.json'}: model directory '{sub.name}' not found")
        self._model = CrossEncoder(str(sub), self.device, int(meta.get("max_length", MAX_LENGTH)),
                                   safetensors_only=True)
        if meta.get("residual"):
            self._model.offset = BaseOffset(**meta["residual"], device=self.device, models_root=self.models_root)
        self._symmetric = bool(meta.get("symmetric", False))
        self._recent: OrderedDict[tuple[tuple[str, ...], tuple[str, ...]], np.ndarray] = OrderedDict()

    def score(self, texts1: Sequence[str], texts2: Sequence[str]) -> np.ndarray:
        """Scores of the pairs; the last few calls' are kept, as the loaded model is shared within a process and
        `pear_fused` of this run scores the same pairs again (an evaluation of both runs the network once)."""
        key = (tuple(texts1), tuple(texts2))
        if key in self._recent:
            self._recent.move_to_end(key)
            return self._recent[key].copy()
        scores = self._model.predict(texts1, texts2, self.batch_size, symmetric=self._symmetric)
        self._recent[key] = scores.copy()
        if len(self._recent) > _RECENT_SCORES:
            self._recent.popitem(last=False)
        return scores

    def encode(self, texts: list[str]) -> np.ndarray:
        raise ValueError(f"'{self.name}' is a cross-encoder: it scores sentence pairs and has no sentence "
                         f"embedding; use `amrsim score --model {self.name}` or `amrsim evaluate sts`")


def load_trained(name: str, mid: str, path: str, batch_size: int, device: str,
                 models_root: str | None = None) -> TrainedCrossEncoder:
    """The TRAINED_LOADERS entry of amrsim.encoders for method `pear`."""
    return TrainedCrossEncoder(name, mid, path, batch_size, device, models_root)


# ---------------------------------------------------------------------------------------------------- fusion

FUSED_METHOD = "pear_fused"  # a separately named model: PEAR's scores fused with its base bi-encoder's cosine


@dataclass(frozen=True)
class Fusion:
    """score = weight * z(cross-encoder) + (1 - weight) * z(base cosine), each z-scored by its mean and standard
    deviation on the pairs the fusion was fitted on (dev pairs): the base keeps a fixed share of every score."""

    base: str
    weight: float
    pear_mean: float
    pear_std: float
    base_mean: float
    base_std: float

    def combine(self, pear: np.ndarray, cosine: np.ndarray) -> np.ndarray:
        return (self.weight * (np.asarray(pear, np.float64) - self.pear_mean) / self.pear_std
                + (1 - self.weight) * (np.asarray(cosine, np.float64) - self.base_mean) / self.base_std)


def fit_fusion(pear: np.ndarray, cosine: np.ndarray, base: str, weight: float) -> Fusion:
    """The z-score statistics of both scores on the same pairs; a constant score is an error (nothing to scale)."""
    pear, cosine = np.asarray(pear, np.float64), np.asarray(cosine, np.float64)
    if len(pear) < 2 or len(pear) != len(cosine):
        raise ValueError(f"fusion: needs at least 2 pairs scored by both models, got {len(pear)} and {len(cosine)}")
    if not 0 <= weight <= 1:
        raise ValueError(f"fusion: weight {weight} must lie in [0, 1]")
    stds = float(pear.std()), float(cosine.std())
    if min(stds) <= 1e-9:
        raise ValueError("fusion: the cross-encoder's or the base's scores are constant on the fitting pairs")
    return Fusion(base, weight, float(pear.mean()), stds[0], float(cosine.mean()), stds[1])


def base_targets(gold: np.ndarray, cosine: np.ndarray, weight: float) -> tuple[np.ndarray, dict[str, float]]:
    """Knowledge-preserving targets: ``(1 - weight) * gold + weight * c``, where c is the base bi-encoder's cosine
    put on the gold scale by a least-squares line fitted on these pairs and clipped to [0, 1] (it keeps the base's
    ranking). With BCE, which is linear in the target, this equals adding ``weight / (1 - weight)`` times a BCE
    towards c to the gold loss: the base's judgement as an auxiliary target. Returns the targets and the line."""
    gold, cosine = np.asarray(gold, np.float64), np.asarray(cosine, np.float64)
    if not 0 <= weight <= 1:
        raise ValueError(f"base target weight {weight} must lie in [0, 1]")
    if len(gold) != len(cosine) or len(gold) < 2:
        raise ValueError(f"base targets: {len(gold)} gold scores and {len(cosine)} cosines (need 2 or more, as many)")
    if cosine.std() <= 1e-9:
        raise ValueError("base targets: the base's cosine is constant on the training pairs")
    line = gold_scale_line(gold, cosine)
    mixed = np.clip((1 - weight) * gold + weight * on_gold_scale(cosine, line), 0.0, 1.0).astype(np.float32)
    return mixed, line


def gold_scale_line(gold: np.ndarray, cosine: np.ndarray) -> dict[str, float]:
    """The least-squares line from a bi-encoder's cosine to the 0-1 gold scale, fitted on the training pairs."""
    slope, intercept = np.polyfit(np.asarray(cosine, np.float64), np.asarray(gold, np.float64), 1)
    return {"slope": float(slope), "intercept": float(intercept)}


def on_gold_scale(cosine: np.ndarray, line: Mapping[str, float]) -> np.ndarray:
    """Cosines put on the gold scale by `gold_scale_line`'s line, clipped to [0, 1] (the ranking is the cosine's)."""
    return np.clip(line["slope"] * np.asarray(cosine, np.float64) + line["intercept"], 0.0, 1.0)


def base_cosines(base: str, texts1: Sequence[str], texts2: Sequence[str], batch_size: int = 64,
                 device: str = "auto", models_root: Path | str | None = None) -> np.ndarray:
    """Cosine of the bi-encoder `base`'s embeddings of each pair."""

    encoder = load_encoder(base, batch_size=batch_size, device=device, models_root=models_root)
    return cosine(np.asarray(encoder.encode(list(texts1)), np.float32),
                  np.asarray(encoder.encode(list(texts2)), np.float32))


@dataclass
class BaseOffset:
    """A residual cross-encoder's starting point: logit of the bi-encoder `base`'s cosine put on the gold scale (the
    line fitted on the training pairs), clipped to [eps, 1 - eps] so it stays finite at 0 and 1."""

    base: str
    slope: float
    intercept: float
    eps: float = 0.02
    device: str = "auto"
    models_root: str | None = None

    def __call__(self, texts1: Sequence[str], texts2: Sequence[str]) -> np.ndarray:
        cos = base_cosines(self.base, texts1, texts2, device=self.device, models_root=self.models_root)
        p = np.clip(on_gold_scale(cos, {"slope": self.slope, "intercept": self.intercept}), self.eps, 1 - self.eps)
        return np.log(p / (1 - p)).astype(np.float32)

    def record(self) -> dict[str, Any]:
        """What model.json keeps (`residual`): enough to score with the saved network again."""
        return {"base": self.base, "slope": self.slope, "intercept": self.intercept, "eps": self.eps}


def start_from_base(model: CrossEncoder, offset: BaseOffset) -> None:
    """Make `model` residual: its score becomes σ(network logit + offset) and its head is zeroed, so before any
    training it scores every pair as the base does and training learns only what the base gets wrong."""
    import torch

    head = getattr(model.model, "classifier", None)
    head = getattr(head, "out_proj", head)  # RoBERTa-style heads end in out_proj
    if not isinstance(head, torch.nn.Linear) or head.out_features != 1:
        raise ValueError(f"{model.path}: residual training needs a one-logit linear classifier head, found "
                         f"{type(head).__name__}")
    with torch.no_grad():
        head.weight.zero_()
        if head.bias is not None:
            head.bias.zero_()
    model.offset = offset


def save_fused(out_dir: Path, pear_name: str, fusion: Fusion, meta: Mapping[str, Any]) -> Path:
    """`<models>/pear_fused/<run id>/model.json`: names the PEAR run and the base, holds the fusion; no weights."""
    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    write_model_json(out_dir, FUSED_METHOD, {"kind": KIND, "pear": pear_name, "base_model": fusion.base,
                                             "fusion": fusion.__dict__, **meta})
    return out_dir


@dataclass
class TrainedFused:
    """`pear_fused:<run>`: scores pairs with the PEAR run and the base bi-encoder it names, fused (`Fusion`)."""

    name: str
    model_id: str
    path: str
    batch_size: int = 64
    device: str = "auto"
    models_root: str | None = None
    dim: int = 0

    def __post_init__(self) -> None:
        meta = json.loads((Path(self.path) / "model.json").read_text(encoding="utf-8"))
        self.fusion = Fusion(**meta["fusion"])
        pear = str(meta["pear"])
        if not pear.startswith("pear:") or pear.endswith(":latest"):
            raise ValueError(f"{Path(self.path) / 'model.json'}: 'pear' must name one PEAR run (pear:<run id>)")
        self._pear = load_encoder(pear, self.batch_size, self.device, self.models_root)

    def score(self, texts1: Sequence[str], texts2: Sequence[str]) -> np.ndarray:
        pear = self._pear.score(texts1, texts2)  # type: ignore[attr-defined]
        cos = base_cosines(self.fusion.base, texts1, texts2, self.batch_size, self.device, self.models_root)
        return self.fusion.combine(pear, cos)

    def encode(self, texts: list[str]) -> np.ndarray:
        raise ValueError(f"'{self.name}' scores sentence pairs (a fused cross-encoder) and has no sentence "
                         f"embedding; use `amrsim score --model {self.name}` or `amrsim evaluate sts`")


def load_fused(name: str, mid: str, path: str, batch_size: int, device: str,
               models_root: str | None = None) -> TrainedFused:
    """The TRAINED_LOADERS entry of amrsim.encoders for method `pear_fused`."""
    return TrainedFused(name, mid, path, batch_size, device, models_root)
