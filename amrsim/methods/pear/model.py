"""PEAR's model: a one-logit cross-encoder over a sentence pair (optionally residual: added to a bi-encoder's score),
its run directory, and the loaders of `pear:<run>` and `pear_fused:<run>` (a run fused with its base's cosine).
torch and transformers are imported inside the functions: the loader registry imports this module."""

from __future__ import annotations

import shutil
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.augment import CallableScorer
from amrsim.encoders import (
    Encoder,
    EncoderLoader,
    TrainedModel,
    is_latest_name,
    is_trained_name,
    model_subdir,
    parse_name,
    resolve_device,
)
from amrsim.evaluate.sts import cosine
from amrsim.methods.pear.loss import on_gold_scale
from amrsim.methods.portable import ROOT, add_cross_encoder_files, add_root_config, save_amrsim_module
from amrsim.methods.training import CHECKPOINT, autocast, refuse_finished_run, write_model_json

if TYPE_CHECKING:
    import torch

KIND = "cross-encoder"  # model.json `kind`: the model scores pairs, it has no sentence embedding
MODEL_SUBDIR = "cross_encoder"  # where runs saved before the root layout keep the network (model.json `encoder`)
MAX_LENGTH = 128
FUSED_METHOD = "pear_fused"  # a separately named model: PEAR's scores fused with its base bi-encoder's cosine
Progress = Callable[[int], None]  # told the number of pairs just scored
RECENT_SCORES = 4  # score() calls a loaded PEAR model remembers: an evaluation's test sets


class PearCrossEncoder:
    """A transformers sequence-classification model with one logit over a tokenised sentence pair
    (`[CLS] s1 [SEP] s2 [SEP]`); its score is σ(logit + `offset`, a residual model's starting point)."""

    def __init__(self, path: str, device: str = "auto", max_length: int = MAX_LENGTH, safetensors_only: bool = False):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        from transformers.utils import logging as hf_logging

        self.path, self.max_length = str(path), max_length
        self.device = resolve_device(device)
        self.offset: BaseOffset | None = None
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # a base model's load report says the head is new: it is, by design
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path)
            # a trained model from the warehouse (`safetensors_only`): never a pickled pytorch_model.bin
            self.model = AutoModelForSequenceClassification.from_pretrained(
                self.path, num_labels=1, use_safetensors=safetensors_only or None).to(self.device)
        finally:
            hf_logging.set_verbosity(verbosity)

    def logits(self, texts1: Sequence[str], texts2: Sequence[str]) -> torch.Tensor:
        batch = self.tokenizer(list(texts1), list(texts2), padding=True, truncation=True,
                               max_length=self.max_length, return_tensors="pt")
        with autocast(self.device):
            return self.model(**{k: v.to(self.device) for k, v in batch.items()}).logits.float().reshape(-1)

    def predict(self, texts1: Sequence[str], texts2: Sequence[str], batch_size: int = 64,
                symmetric: bool = False, on_progress: Progress | None = None) -> np.ndarray:
        """σ(logit) per pair, in 0-1; pairs are batched by length (less padding), returned in input order. With
        `symmetric`, the mean of both orders: similarity is symmetric, a cross-encoder reading one order is not.
        `on_progress(n)` after each batch: n pairs scored (with both orders, a pair counts once, half per order)."""
        import torch

        if symmetric:
            halves = _halved(on_progress)
            return (self.predict(texts1, texts2, batch_size, on_progress=halves)
                    + self.predict(texts2, texts1, batch_size, on_progress=halves)) / 2
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
                for rows in (order[i:i + batch_size] for i in range(0, len(order), batch_size)):
                    z = self.logits([texts1[i] for i in rows], [texts2[i] for i in rows])
                    z = z if offsets is None else z + torch.as_tensor(offsets[rows], device=z.device)
                    out[rows] = torch.sigmoid(z).cpu().numpy()
                    if on_progress is not None:
                        on_progress(len(rows))
        finally:
            self.model.train(was_training)
        return out

    def save(self, directory: Path) -> None:
        """Weights as model.safetensors, config and tokenizer files."""
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(directory), safe_serialization=True)
        self.tokenizer.save_pretrained(str(directory))


def cross_encoder_scorer(model: PearCrossEncoder, texts: Sequence[str], name: str) -> CallableScorer:
    """amrsim.augment.knn's `Scorer` backed by a cross-encoder: weak labels σ(logit) of index pairs into `texts`."""
    return CallableScorer(f"cross-encoder:{name}", lambda pairs: model.predict([texts[i] for i, _ in pairs],
                                                                               [texts[j] for _, j in pairs]))


def base_cosines(encoder: Encoder, texts1: Sequence[str], texts2: Sequence[str]) -> np.ndarray:
    """Cosine of a bi-encoder's embeddings of each pair."""
    return cosine(np.asarray(encoder.encode(list(texts1)), np.float32),
                  np.asarray(encoder.encode(list(texts2)), np.float32))


@dataclass
class BaseOffset:
    """A residual cross-encoder's starting point: logit of the bi-encoder `base`'s (`encoder`) cosine put on the
    gold scale (the line fitted on the training pairs), clipped to [eps, 1 - eps] so it stays finite at 0 and 1."""

    encoder: Encoder
    base: str
    slope: float
    intercept: float
    eps: float = 0.02

    def __call__(self, texts1: Sequence[str], texts2: Sequence[str]) -> np.ndarray:
        cos = base_cosines(self.encoder, texts1, texts2)
        p = np.clip(on_gold_scale(cos, {"slope": self.slope, "intercept": self.intercept}), self.eps, 1 - self.eps)
        return np.log(p / (1 - p)).astype(np.float32)

    def record(self) -> dict[str, Any]:
        """What model.json keeps (`residual`): enough to score with the saved network again."""
        return {"base": self.base, "slope": self.slope, "intercept": self.intercept, "eps": self.eps}


def start_from_base(model: PearCrossEncoder, offset: BaseOffset) -> None:
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


def save_run(model: PearCrossEncoder, out_dir: Path, meta: Mapping[str, Any]) -> Path:
    """The network at the run root (safetensors, config, tokenizer), loading as a sentence-transformers CrossEncoder
    that scores as amrsim does: a one-order run with ST's own files (a plain `CrossEncoder(out_dir)`), a symmetric
    run (the mean of both sentence orders) or a residual one (its base's cosine added) through amrsim's module
    (`CrossEncoder(out_dir, trust_remote_code=True)`; without the flag sentence-transformers refuses it rather
    than scoring one order). Then `out_dir/model.json` last, so a directory with model.json always holds a complete
    model; the training checkpoint is removed."""
    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    symmetric = bool(meta.get("symmetric", False))
    model.save(out_dir)
    pear_config = {"pear": {"symmetric": symmetric, "max_length": model.max_length,
                            "residual": None if model.offset is None else model.offset.record()}}
    if model.offset is None and not symmetric:
        add_cross_encoder_files(out_dir, model.max_length)
        add_root_config(out_dir, pear_config)
    else:
        save_amrsim_module(out_dir, "cross-encoder", pear_config)
    write_model_json(out_dir, "pear", {"kind": KIND, "encoder": ROOT, "max_length": model.max_length, **meta})
    shutil.rmtree(out_dir / CHECKPOINT, ignore_errors=True)
    return out_dir


@dataclass
class PairScorer:
    """A loaded `pear:<run>` or `pear_fused:<run>`: it scores sentence pairs and has no sentence embedding."""

    name: str
    model_id: str
    score: Callable[..., np.ndarray]  # (texts1, texts2, on_progress=None) -> one score per pair
    dim: int = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        raise ValueError(f"'{self.name}' is a cross-encoder: it scores sentence pairs and has no sentence "
                         f"embedding; use `amrsim score --model {self.name}` or `amrsim evaluate sts`")


def load_trained(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
                 load: EncoderLoader) -> PairScorer:
    """`pear:<run>` (amrsim.methods.loaders); a residual run's base bi-encoder is loaded through `load`. The last few
    calls' scores are kept: the loaded model is shared within a process and `pear_fused` of this run scores the same
    pairs again (an evaluation of both runs the network once)."""
    meta = model.meta
    sub = model_subdir(str(model.path), str(meta.get("encoder", MODEL_SUBDIR)))
    if not sub.is_dir():
        raise ValueError(f"{model.path / 'model.json'}: model directory '{sub.name}' not found")
    network = PearCrossEncoder(str(sub), device, int(meta.get("max_length", MAX_LENGTH)), safetensors_only=True)
    if meta.get("residual"):
        base = load(meta["residual"]["base"], device=device, models_root=models_root)
        network.offset = BaseOffset(base, **meta["residual"])
    symmetric = bool(meta.get("symmetric", False))
    return PairScorer(name, model.model_id, remembered(
        lambda t1, t2, on_progress: network.predict(t1, t2, batch_size, symmetric, on_progress)))


def remembered(predict: Callable[[list[str], list[str], Progress | None], np.ndarray],
               size: int = RECENT_SCORES) -> Callable[..., np.ndarray]:
    """`score(texts1, texts2, on_progress=None)`: `predict`, its last `size` answers kept by their texts (a copy
    handed out each time). An answer kept is all pairs done at once."""
    recent: OrderedDict[tuple[tuple[str, ...], tuple[str, ...]], np.ndarray] = OrderedDict()

    def score(texts1: Sequence[str], texts2: Sequence[str], on_progress: Progress | None = None) -> np.ndarray:
        key = (tuple(texts1), tuple(texts2))
        if key in recent:
            recent.move_to_end(key)
            if on_progress is not None:
                on_progress(len(texts1))
        else:
            recent[key] = predict(list(texts1), list(texts2), on_progress)
            while len(recent) > size:
                recent.popitem(last=False)
        return recent[key].copy()

    return score


def _halved(on_progress: Progress | None) -> Progress | None:
    """Counts of two passes over the same pairs, told as pairs: each pair once, when both passes are past it."""
    if on_progress is None:
        return None
    seen = [0]

    def advance(n: int) -> None:
        before, seen[0] = seen[0], seen[0] + n
        if done := seen[0] // 2 - before // 2:
            on_progress(done)

    return advance


# ---------------------------------------------------------------------------------------------------- fusion


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
    stds = float(pear.std()), float(cosine.std())
    if min(stds) <= 1e-9:
        raise ValueError("fusion: the cross-encoder's or the base's scores are constant on the fitting pairs")
    return Fusion(base, weight, float(pear.mean()), stds[0], float(cosine.mean()), stds[1])


def save_fused(out_dir: Path, pear_name: str, fusion: Fusion, meta: Mapping[str, Any]) -> Path:
    """`<models>/pear_fused/<run id>/model.json`: names the PEAR run and the base, holds the fusion. The folder
    carries copies of both parts and its module code, so it loads without amrsim, wherever it is moved."""
    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_amrsim_module(out_dir, "cross-encoder", parts={"pear": pear_name, "base": fusion.base})
    write_model_json(out_dir, FUSED_METHOD, {"kind": KIND, "pear": pear_name, "base_model": fusion.base,
                                             "fusion": fusion.__dict__, **meta})
    return out_dir


def load_fused(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
               load: EncoderLoader) -> PairScorer:
    """`pear_fused:<run>` (amrsim.methods.loaders): the PEAR run and the base it names, loaded through `load`, their
    scores fused (`Fusion`)."""
    fusion, pear = Fusion(**model.meta["fusion"]), str(model.meta["pear"])
    if not is_trained_name(pear) or parse_name(pear).method != "pear" or is_latest_name(pear):
        raise ValueError(f"{model.path / 'model.json'}: 'pear' must name one PEAR run (pear:<run id>)")
    run, base = load(pear, batch_size, device, models_root), load(fusion.base, batch_size, device, models_root)
    return PairScorer(name, model.model_id, lambda t1, t2, on_progress=None: fusion.combine(
        run.score(t1, t2, on_progress=on_progress), base_cosines(base, t1, t2)))
