"""Meaning embeddings (Tiyajamorn et al. 2021) with a stage-2 STS head (two-stage, McCain et al.).

Stage 1 splits a frozen encoder's sentence embedding e into a meaning part m = M(e) and a language part l = L(e)
(M, L: linear or MLP heads), trained on precomputed embeddings of parallel sentences with four losses:

- meaning: cosine embedding loss of (m_src, m_tgt), target +1 for a translation pair, -1 for a random pair;
- reconstruction: MSE of m + l against e;
- language ID: cross-entropy of a linear classifier on l against the sentence's language;
- language similarity: 1 - cos(l, l') with l' the language embedding of a random sentence in the same language.

Stage 2 puts an MLP (two hidden layers, ReLU, dropout) on the frozen meaning embeddings and regresses the cosine of
two sentences' outputs onto their gold STS score scaled to [0, 1] (MSE). Nothing here reads the warehouse:
`amrsim.stages.train.meaning` hands over vectors; `save_model` / `MeaningEncoder` write and load a run directory.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from amrsim.encoders import load_encoder, model_subdir
from amrsim.encoders.cache import embed_sentences, read_embeddings
from amrsim.evaluate.bitext import tatoeba_accuracy
from amrsim.evaluate.sts import correlations, cosine
from amrsim.methods.training import refuse_finished_run, write_model_json

# safetensors is imported inside the functions: importing this module must stay cheap

log = logging.getLogger(__name__)

HEADS = ("linear", "mlp")
STAGE1_FILE = "meaning.safetensors"
STAGE2_FILE = "sts_head.safetensors"
LOSSES = ("meaning", "reconstruction", "language_id", "language_similarity")


# ---------------------------------------------------------------------------------------------------- modules


def make_head(kind: str, dim: int, hidden: int | None = None, dropout: float = 0.0,
              start: str | None = None) -> nn.Module:
    """dim -> dim: one linear map, or Linear-ReLU(-Dropout)-Linear with `hidden` units (default: dim). `start`:
    "identity" (the map starts as x -> x; an MLP becomes x + MLP(x)) or "zero" (starts at 0); None: random."""
    if kind not in HEADS:
        raise ValueError(f"head '{kind}' unknown; use one of {', '.join(HEADS)}")
    if kind == "linear":
        head: nn.Module = nn.Linear(dim, dim)
        last = head
    else:
        h = hidden or dim
        layers: list[nn.Module] = [nn.Linear(dim, h), nn.ReLU()]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        head = nn.Sequential(*layers, nn.Linear(h, dim))
        last = head[-1]
    if start is not None:
        assert isinstance(last, nn.Linear)
        with torch.no_grad():
            last.weight.zero_()
            last.bias.zero_()
            if start == "identity" and kind == "linear":
                last.weight.copy_(torch.eye(dim))
        if start == "identity" and kind == "mlp":
            head = _Residual(head)
    return head


class _Residual(nn.Module):
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


# ---------------------------------------------------------------------------------------------------- losses


def meaning_loss(m_a: torch.Tensor, m_b: torch.Tensor, target: torch.Tensor, margin: float = 0.0) -> torch.Tensor:
    """Cosine embedding loss: 1 - cos for target +1 (translations), max(0, cos - margin) for target -1 (random)."""
    return F.cosine_embedding_loss(m_a, m_b, target.to(m_a.dtype), margin=margin)


def reconstruction_loss(meaning: torch.Tensor, language: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
    """Squared error of meaning + language against the encoder's embedding, summed over dims, mean over rows: an
    MSE per dimension would shrink the constraint by the embedding size (1/512 for muse) and let both parts drift."""
    return (meaning + language - original).pow(2).sum(-1).mean()


def language_id_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the language classifier's logits against language indices."""
    return F.cross_entropy(logits, labels)


def language_similarity_loss(l_a: torch.Tensor, l_b: torch.Tensor) -> torch.Tensor:
    """Mean 1 - cos of the language embeddings of two sentences in the same language."""
    return (1.0 - F.cosine_similarity(l_a, l_b, dim=-1, eps=1e-8)).mean()


def sts_loss(u: torch.Tensor, v: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """MSE of cos(u, v) against gold similarity in [0, 1]."""
    return F.mse_loss(F.cosine_similarity(u, v, dim=-1, eps=1e-8), gold.to(u.dtype))


# ---------------------------------------------------------------------------------------------------- stage 1


@dataclass(frozen=True)
class Stage1Config:
    head: str = "linear"
    hidden: int | None = None
    dropout: float = 0.0
    epochs: int = 5
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.0
    margin: float = 0.0
    weights: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(LOSSES, 1.0))
    dev_fraction: float = 0.05
    seed: int = 0
    negatives: str = "same_language"  # random pairs of the meaning loss (stage1_losses)

    def as_dict(self) -> dict[str, Any]:
        return {"head": self.head, "hidden": self.hidden, "dropout": self.dropout, "epochs": self.epochs,
                "batch_size": self.batch_size, "lr": self.lr, "weight_decay": self.weight_decay,
                "margin": self.margin, "negatives": self.negatives, "weights": dict(self.weights),
                "dev_fraction": self.dev_fraction, "seed": self.seed}


def check_parallel(vectors: np.ndarray, langs: np.ndarray, pairs: np.ndarray, n_langs: int) -> None:
    """Shapes and index ranges of stage-1 inputs; empty inputs and NaN vectors are errors naming what is wrong."""
    if vectors.ndim != 2 or not len(vectors):
        raise ValueError(f"meaning stage 1: no sentence vectors (shape {vectors.shape})")
    if len(langs) != len(vectors):
        raise ValueError(f"meaning stage 1: {len(vectors)} vectors but {len(langs)} language labels")
    if pairs.ndim != 2 or pairs.shape[1] != 2 or not len(pairs):
        raise ValueError(f"meaning stage 1: no translation pairs (shape {pairs.shape}); give parallel data")
    if pairs.min() < 0 or pairs.max() >= len(vectors):
        raise ValueError(f"meaning stage 1: pair indices must lie in [0, {len(vectors)})")
    if langs.min() < 0 or langs.max() >= n_langs:
        raise ValueError(f"meaning stage 1: language indices must lie in [0, {n_langs})")
    bad = ~np.isfinite(vectors).all(1)
    if bad.any():
        raise ValueError(f"meaning stage 1: {int(bad.sum())} vector(s) hold NaN/inf (first row {int(bad.argmax())})")


class _SameLanguage:
    """Draws, for each sentence, a random other sentence of its language (itself if it is its language's only)."""

    def __init__(self, langs: np.ndarray):
        self.sorted = np.argsort(langs, kind="stable")
        rank = np.empty_like(self.sorted)
        rank[self.sorted] = np.arange(len(langs))
        self.start = np.searchsorted(langs[self.sorted], langs)
        self.within = rank - self.start  # position inside its language's block of `sorted`
        self.count = np.bincount(langs)[langs]

    def draw(self, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        count = self.count[idx]
        shift = rng.integers(1, np.maximum(count, 2))  # 1..count-1: never itself unless it is alone
        return self.sorted[self.start[idx] + (self.within[idx] + shift) % count]


NEGATIVES = ("same_language", "cross_language")


def stage1_losses(model: MeaningModel, x_a: torch.Tensor, x_b: torch.Tensor, lang_a: torch.Tensor,
                  lang_b: torch.Tensor, x_same: torch.Tensor, neg: torch.Tensor, margin: float,
                  negatives: str = "same_language") -> dict[str, torch.Tensor]:
    """The four losses of a batch of translation pairs (x_a[i], x_b[i]); `x_same[k]` is a random same-language
    sentence of the k-th row of cat(x_a, x_b).

    The meaning loss pulls translations together and pushes random pairs apart. With `same_language` (DREAM's
    reference code) the random pairs are each sentence and its same-language draw, weighted like DREAM's three
    terms (translations + source randoms + target randoms): pushing apart sentences that share a language removes
    what they share. `cross_language` pairs x_a[i] with x_b[neg[i]], a random sentence in the other language; that
    rewards meaning embeddings that keep languages apart, the opposite of the goal (kept to compare: it lowered
    cross-lingual STS and Tatoeba here)."""
    if negatives not in NEGATIVES:
        raise ValueError(f"negatives '{negatives}' unknown; use one of {', '.join(NEGATIVES)}")
    x = torch.cat([x_a, x_b])
    m, lang_emb = model(x)
    n = len(x_a)
    m_a, m_b = m[:n], m[n:]
    ones = torch.ones(n, device=x.device)
    m_same, l_same = model(x_same)
    if negatives == "same_language":
        meaning = (meaning_loss(m_a, m_b, ones, margin) + meaning_loss(m_a, m_same[:n], -ones, margin)
                   + meaning_loss(m_b, m_same[n:], -ones, margin))
    else:
        meaning = meaning_loss(torch.cat([m_a, m_a]), torch.cat([m_b, m_b[neg]]), torch.cat([ones, -ones]), margin)
    return {"meaning": meaning,
            "reconstruction": reconstruction_loss(m, lang_emb, x),
            "language_id": language_id_loss(model.classifier(lang_emb), torch.cat([lang_a, lang_b])),
            "language_similarity": language_similarity_loss(lang_emb, l_same)}


def _negatives(n: int, rng: np.random.Generator) -> np.ndarray:
    """A permutation of range(n) without fixed points when n > 1 (a random cyclic shift of a random order)."""
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    order = rng.permutation(n)
    out = np.empty(n, dtype=np.int64)
    out[order] = order[(np.arange(n) + rng.integers(1, n)) % n]
    return out


def retrieval_accuracy(a: np.ndarray, b: np.ndarray) -> float:
    """Top-1 accuracy x 100 of finding b[i] as a[i]'s nearest row of b by cosine (and back), averaged."""
    acc = tatoeba_accuracy(a, b)["accuracy"]
    return float(acc) if acc is not None else float("nan")


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


def train_stage1(vectors: np.ndarray, langs: np.ndarray, pairs: np.ndarray, n_langs: int,
                 config: Stage1Config = Stage1Config(), device: str = "cpu") -> tuple[MeaningModel, dict[str, Any]]:
    """Train stage 1 on sentence vectors (n, dim), their language indices (n,) and translation pairs (p, 2) of row
    indices. A seeded `dev_fraction` of the pairs is held out; the epoch with the lowest dev loss is kept. Returns
    the model (on CPU, eval mode) and metrics: per-epoch losses, dev retrieval accuracy of encoder vs meaning."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    langs = np.asarray(langs, dtype=np.int64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2) if np.asarray(pairs).size else np.zeros((0, 2), int)
    check_parallel(vectors, langs, pairs, n_langs)
    if config.epochs < 1 or config.batch_size < 2:
        raise ValueError("meaning stage 1: epochs must be >= 1 and batch_size >= 2")
    unknown = set(config.weights) - set(LOSSES)
    if unknown:
        raise ValueError(f"meaning stage 1: unknown loss weight(s) {sorted(unknown)}; losses: {', '.join(LOSSES)}")
    weights = {k: float(config.weights.get(k, 1.0)) for k in LOSSES}
    rng = np.random.default_rng(config.seed)
    torch.manual_seed(config.seed)
    order = rng.permutation(len(pairs))
    n_dev = int(round(len(pairs) * config.dev_fraction)) if len(pairs) >= 20 else 0
    dev_pairs, train_pairs = pairs[order[:n_dev]], pairs[order[n_dev:]]
    model = MeaningModel(vectors.shape[1], n_langs, config.head, config.hidden, config.dropout).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    same = _SameLanguage(langs)
    x_all = torch.as_tensor(vectors, device=device)
    lang_all = torch.as_tensor(langs, device=device)

    def batch_losses(batch: np.ndarray, brng: np.random.Generator) -> dict[str, torch.Tensor]:
        a, b = batch[:, 0], batch[:, 1]
        idx = np.concatenate([a, b])
        same_idx = same.draw(idx, brng)
        return stage1_losses(model, x_all[a], x_all[b], lang_all[a], lang_all[b], x_all[same_idx],
                             torch.as_tensor(_negatives(len(batch), brng), device=device), config.margin,
                             config.negatives)

    def total(parts: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return sum((weights[k] * parts[k] for k in LOSSES), torch.zeros((), device=device))

    def dev_loss() -> dict[str, float] | None:
        if not len(dev_pairs):
            return None
        model.eval()
        drng = np.random.default_rng([config.seed, 1])  # the same dev draws every epoch
        sums, count = dict.fromkeys([*LOSSES, "total"], 0.0), 0
        with torch.no_grad():
            for s in range(0, len(dev_pairs), config.batch_size):
                batch = dev_pairs[s:s + config.batch_size]
                if len(batch) < 2:
                    continue
                parts = batch_losses(batch, drng)
                for k in LOSSES:
                    sums[k] += float(parts[k]) * len(batch)
                sums["total"] += float(total(parts)) * len(batch)
                count += len(batch)
        model.train()
        return {k: v / max(count, 1) for k, v in sums.items()}

    history: list[dict[str, Any]] = []
    best_state, best_loss, best_epoch = None, None, None
    initial = dev_loss()
    model.train()
    for epoch in range(1, config.epochs + 1):
        perm = train_pairs[rng.permutation(len(train_pairs))]
        sums, count = dict.fromkeys([*LOSSES, "total"], 0.0), 0
        for s in range(0, len(perm), config.batch_size):
            batch = perm[s:s + config.batch_size]
            if len(batch) < 2:
                continue
            parts = batch_losses(batch, rng)
            loss = total(parts)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"meaning stage 1: loss is {float(loss)} at epoch {epoch}; lower the lr")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            for k in LOSSES:
                sums[k] += float(parts[k].detach()) * len(batch)
            sums["total"] += float(loss.detach()) * len(batch)
            count += len(batch)
        entry: dict[str, Any] = {"epoch": epoch, "train": {k: v / max(count, 1) for k, v in sums.items()}}
        dev = dev_loss()
        if dev is not None:
            entry["dev"] = dev
        history.append(entry)
        score = dev["total"] if dev is not None else entry["train"]["total"]
        if best_loss is None or score < best_loss:
            best_loss, best_epoch = score, epoch
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        log.info("meaning stage 1 epoch %d/%d: %s", epoch, config.epochs, entry)
    assert best_state is not None
    model.load_state_dict(best_state)
    model = model.cpu().eval()
    metrics: dict[str, Any] = {"train_pairs": int(len(train_pairs)), "dev_pairs": int(len(dev_pairs)),
                               "best_epoch": best_epoch, "best_loss": best_loss, "initial_dev": initial,
                               "history": history}
    if len(dev_pairs) >= 2:
        a, b = vectors[dev_pairs[:, 0]], vectors[dev_pairs[:, 1]]
        metrics["dev_retrieval"] = {"encoder": retrieval_accuracy(a, b),
                                    "meaning": retrieval_accuracy(meaning_of(model, a), meaning_of(model, b))}
    return model, metrics


# ---------------------------------------------------------------------------------------------------- stage 2


@dataclass(frozen=True)
class Stage2Config:
    hidden: int | None = None
    dropout: float = 0.1
    residual: bool = True
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-4
    weight_decay: float = 0.01
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "dropout": self.dropout, "residual": self.residual, "epochs": self.epochs,
                "batch_size": self.batch_size, "lr": self.lr, "weight_decay": self.weight_decay, "seed": self.seed}


def spearman(pred: np.ndarray, gold: np.ndarray) -> float | None:
    """Spearman x 100 (None when undefined)."""
    return correlations(pred, gold)["spearman"]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return cosine(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def _check_sts(what: str, u: np.ndarray, v: np.ndarray, gold: np.ndarray) -> None:
    if u.ndim != 2 or u.shape != v.shape or len(gold) != len(u):
        raise ValueError(f"meaning stage 2 {what}: sentence1 {u.shape}, sentence2 {v.shape} and {len(gold)} gold "
                         "scores must align row by row")
    if len(u) < 2:
        raise ValueError(f"meaning stage 2 {what}: fewer than 2 scored pairs")
    if not (np.isfinite(u).all() and np.isfinite(v).all() and np.isfinite(gold).all()):
        raise ValueError(f"meaning stage 2 {what}: NaN/inf in the vectors or gold scores")


def train_stage2(u: np.ndarray, v: np.ndarray, gold: np.ndarray,
                 dev: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 config: Stage2Config = Stage2Config(), device: str = "cpu") -> tuple[StsHead, dict[str, Any]]:
    """Train the STS head on meaning embeddings of pairs (u[i], v[i]) with gold in [0, 1]; with `dev`, the epoch of
    the best dev Spearman is kept (else the last). Returns the head (CPU, eval) and per-epoch metrics."""
    u, v = np.asarray(u, dtype=np.float32), np.asarray(v, dtype=np.float32)
    gold = np.asarray(gold, dtype=np.float32)
    _check_sts("training pairs", u, v, gold)
    if dev is not None:
        _check_sts("dev pairs", np.asarray(dev[0]), np.asarray(dev[1]), np.asarray(dev[2]))
    if config.epochs < 1 or config.batch_size < 2:
        raise ValueError("meaning stage 2: epochs must be >= 1 and batch_size >= 2")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    head = StsHead(u.shape[1], config.hidden, config.dropout, config.residual).to(device)
    optimizer = torch.optim.AdamW(head.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    tu, tv, tg = (torch.as_tensor(x, device=device) for x in (u, v, gold))

    def dev_spearman() -> float | None:
        assert dev is not None
        a = apply_module(head, np.asarray(dev[0], np.float32), device)
        b = apply_module(head, np.asarray(dev[1], np.float32), device)
        head.train()
        return spearman(cosines(a, b), np.asarray(dev[2]))

    history: list[dict[str, Any]] = []
    initial = dev_spearman() if dev is not None else None
    best_state, best, best_epoch = None, None, None
    head.train()
    for epoch in range(1, config.epochs + 1):
        perm = rng.permutation(len(u))
        running, count = 0.0, 0
        for s in range(0, len(perm), config.batch_size):
            rows = torch.as_tensor(perm[s:s + config.batch_size], device=device)
            loss = sts_loss(head(tu[rows]), head(tv[rows]), tg[rows])
            if not torch.isfinite(loss):
                raise FloatingPointError(f"meaning stage 2: loss is {float(loss)} at epoch {epoch}; lower the lr")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            running, count = running + float(loss.detach()) * len(rows), count + len(rows)
        entry: dict[str, Any] = {"epoch": epoch, "train_loss": running / count}
        score = None
        if dev is not None:
            score = dev_spearman()
            entry["dev_spearman"] = score
        history.append(entry)
        if dev is None or best is None or (score is not None and score > best):
            best, best_epoch = score, epoch
            best_state = {k: x.detach().clone() for k, x in head.state_dict().items()}
    assert best_state is not None
    head.load_state_dict(best_state)
    return head.cpu().eval(), {"train_pairs": int(len(u)), "best_epoch": best_epoch, "best_dev_spearman": best,
                               "initial_dev_spearman": initial, "history": history}


# ---------------------------------------------------------------------------------------------------- save / load


def save_model(out_dir: Path, model: MeaningModel, base_encoder: str, langs: Sequence[str], stage1: Stage1Config,
               sts_head: StsHead | None = None, stage2: Stage2Config | None = None,
               extra_meta: Mapping[str, Any] | None = None) -> Path:
    """Write `out_dir/meaning.safetensors` (+ `sts_head.safetensors`) and, last, `model.json`; returns out_dir."""
    from safetensors.torch import save_model as save_st

    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_st(model, str(out_dir / STAGE1_FILE))
    if sts_head is not None:
        save_st(sts_head, str(out_dir / STAGE2_FILE))
    dim = int(model.classifier.in_features)
    meta = {"base_encoder": base_encoder, "dim": dim, "langs": list(langs), "stage1": stage1.as_dict(),
            "weights": STAGE1_FILE, "stage2": None if sts_head is None or stage2 is None else
            {**stage2.as_dict(), "weights": STAGE2_FILE}, **(extra_meta or {})}
    write_model_json(out_dir, "meaning", meta)
    return out_dir


def load_model(run_dir: Path | str) -> tuple[MeaningModel, StsHead | None, dict[str, Any]]:
    """The stage-1 model, the stage-2 head (None without one) and model.json of a finished run (safetensors only)."""
    from safetensors.torch import load_model as load_st


    run_dir = Path(run_dir)
    meta = json.loads((run_dir / "model.json").read_text(encoding="utf-8"))
    s1 = meta["stage1"]
    model = MeaningModel(int(meta["dim"]), len(meta["langs"]), s1["head"], s1.get("hidden"), s1.get("dropout", 0.0))
    load_st(model, str(model_subdir(run_dir, meta.get("weights", STAGE1_FILE))), device="cpu")
    head = None
    if meta.get("stage2"):
        s2 = meta["stage2"]
        head = StsHead(int(meta["dim"]), s2.get("hidden"), s2.get("dropout", 0.0), bool(s2.get("residual", True)))
        load_st(head, str(model_subdir(run_dir, s2.get("weights", STAGE2_FILE))), device="cpu")
    return model.eval(), None if head is None else head.eval(), meta


@dataclass
class MeaningEncoder:
    """`meaning:<run>` for the evaluation suite: frozen base encoder -> meaning head (-> stage-2 head)."""

    name: str
    model_id: str
    run_dir: str
    batch_size: int = 64
    device: str = "auto"
    models_root: str | None = None

    def __post_init__(self) -> None:
        self._model, self._head, meta = load_model(self.run_dir)
        self.base_name = str(meta["base_encoder"])
        self.base = load_encoder(self.base_name, batch_size=self.batch_size, device=self.device,
                                 models_root=self.models_root)
        if int(self.base.dim) != int(meta["dim"]):
            raise ValueError(f"{self.run_dir}/model.json: dim {meta['dim']} but encoder '{self.base_name}' gives "
                             f"{self.base.dim}")
        self.dim = int(meta["dim"])
        self.call_batch = int(getattr(self.base, "call_batch", self.batch_size))  # mUSE prefers large calls

    def heads(self, base: np.ndarray) -> np.ndarray:
        """Meaning (then stage-2) embeddings of base-encoder vectors."""
        base = np.asarray(base, dtype=np.float32)
        if not len(base):
            return np.zeros((0, self.dim), np.float32)
        out = meaning_of(self._model, base)
        return apply_module(self._head, out, "cpu") if self._head is not None else out

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.heads(self.base.encode(list(texts)))

    def encode_sentences(self, wh: Any, dataset: str, frame: Any) -> tuple[np.ndarray, None]:
        """Warehouse rows (key, text): the base encoder's vectors through the dataset's embeddings cache (computed
        once, shared with evaluations of the base encoder itself), then the heads."""
        embed_sentences(wh, dataset, self.base_name, frame, encoder=self.base)
        return self.heads(read_embeddings(wh, dataset, self.base_name, frame["key"].to_list())), None


def load_trained(name: str, mid: str, run_dir: str, batch_size: int, device: str,
                 models_root: str | None) -> MeaningEncoder:
    """The TRAINED_LOADERS entry of `meaning`."""
    return MeaningEncoder(name, mid, run_dir, batch_size, device, models_root)
