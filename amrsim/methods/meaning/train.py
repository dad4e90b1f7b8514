"""The meaning method's two stages on the shared `Trainer`: stage 1 on precomputed vectors of parallel sentences (the
lowest dev loss kept), stage 2 on meaning embeddings of scored pairs (the best dev Spearman kept). Each stage draws
its epochs' orders and its batches' random pairs from one seeded rng."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from amrsim.evaluate import DevScore
from amrsim.evaluate.bitext import tatoeba_accuracy
from amrsim.methods.meaning.loss import SameLanguage, derangement, stage1_losses, sts_loss
from amrsim.methods.meaning.model import MeaningModel, StsHead, apply_module, cosines, meaning_of, spearman
from amrsim.methods.meaning.params import LOSSES, Hyper
from amrsim.methods.training import Part, Trainer, st_embed


def epoch_batches(rng: np.random.Generator, n: int, batch_size: int,
                  min_rows: int = 1) -> tuple[int, Callable[[int], np.ndarray]]:
    """(steps per epoch, `rows(step)` for a Trainer): batches of `rng.permutation(n)`, drawn at each epoch's first
    step from the rng the batches draw from too; a last batch under `min_rows` rows is left out."""
    steps = -(-n // batch_size) - int(0 < n % batch_size < min_rows)
    order = np.arange(n)

    def rows(step: int) -> np.ndarray:
        nonlocal order
        if step % steps == 0:
            order = rng.permutation(n)
        return order[step % steps * batch_size:(step % steps + 1) * batch_size]

    return steps, rows


class BestWeights:
    """The weights of the best evaluation so far, kept in memory (a Trainer's `keep_best`): every parameter and
    buffer of `model`, and the trainable parameters of `also` (the trained encoder; its frozen table is not copied)."""

    def __init__(self, model: nn.Module, also: nn.Module | None = None):
        self.model, self.also = model, also
        self.state: dict[str, torch.Tensor] | None = None
        self.also_state: dict[str, torch.Tensor] | None = None
        self.score, self.step = None, None  # the best's, where the Trainer does not keep it (no dev score)

    def keep(self) -> None:
        self.state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        if self.also is not None:
            self.also_state = {k: p.detach().clone() for k, p in self.also.named_parameters() if p.requires_grad}

    def restore(self) -> None:
        if self.state is not None:
            self.model.load_state_dict(self.state)
        if self.also is not None and self.also_state is not None:
            self.also.load_state_dict(self.also_state, strict=False)


# ---------------------------------------------------------------------------------------------------- stage 1


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


class Stage1Losses:
    """Stage 1's losses of a batch of translation pairs (rows of sentence indices), its random pairs drawn from the
    rng given; `total` weighs them; `dev` is their mean over dev pairs (the same draws every time). With an
    `encoder` (a sentence-transformers model being trained) the heads read its embeddings of `texts` (aligned with
    `vectors`), and `vectors` stay the reconstruction target."""

    def __init__(self, model: MeaningModel, vectors: np.ndarray, langs: np.ndarray, hp: Hyper, device: str,
                 encoder: Any = None, texts: Sequence[str] | None = None):
        self.model, self.hp, self.device, self.encoder, self.texts = model, hp, device, encoder, texts
        self.same = SameLanguage(langs)
        self.x, self.lang = torch.as_tensor(vectors, device=device), torch.as_tensor(langs, device=device)

    def __call__(self, batch: np.ndarray, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        n, a, b = len(batch), batch[:, 0], batch[:, 1]
        idx = np.concatenate([a, b, self.same.draw(np.concatenate([a, b]), rng)])
        x = self.x[idx] if self.encoder is None else st_embed(self.encoder, [self.texts[i] for i in idx], self.device)
        return stage1_losses(self.model, x[:n], x[n:2 * n], self.lang[a], self.lang[b], x[2 * n:],
                             torch.as_tensor(derangement(n, rng), device=self.device), self.hp.margin,
                             self.hp.negatives, None if self.encoder is None else self.x[idx[:2 * n]])

    def total(self, parts: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return sum((self.hp.weights[k] * parts[k] for k in LOSSES), torch.zeros((), device=self.device))

    def dev(self, pairs: np.ndarray) -> dict[str, float]:
        self.model.eval()
        if self.encoder is not None:
            self.encoder.eval()
        rng, size = np.random.default_rng([self.hp.seed, 1]), self.hp.batch_size
        sums, count = dict.fromkeys([*LOSSES, "total"], 0.0), 0
        with torch.no_grad():
            for batch in (pairs[s:s + size] for s in range(0, len(pairs), size)):
                if len(batch) < 2:
                    continue
                parts = self(batch, rng)
                for k, value in [*((k, parts[k]) for k in LOSSES), ("total", self.total(parts))]:
                    sums[k] += float(value) * len(batch)
                count += len(batch)
        self.model.train()
        if self.encoder is not None:
            self.encoder.train()
        return {k: v / max(count, 1) for k, v in sums.items()}


def retrieval_accuracy(a: np.ndarray, b: np.ndarray) -> float:
    """Top-1 accuracy x 100 of finding b[i] as a[i]'s nearest row of b by cosine (and back), averaged."""
    acc = tatoeba_accuracy(a, b)["accuracy"]
    return float(acc) if acc is not None else float("nan")


def train_stage1(vectors: np.ndarray, langs: np.ndarray, pairs: np.ndarray, n_langs: int, hp: Hyper | None = None,
                 device: str = "cpu", encoder: Any = None, texts: Sequence[str] | None = None
                 ) -> tuple[MeaningModel, dict[str, Any]]:
    """Train stage 1 on sentence vectors (n, dim), their language indices (n,) and translation pairs (p, 2) of row
    indices. A seeded `dev_fraction` of the pairs is held out; the evaluation with the lowest dev loss (without dev
    pairs: train loss) is kept. Returns the model (on CPU, eval mode) and metrics: losses per evaluation, dev
    retrieval accuracy of encoder vs meaning.

    `encoder` (`hp.train_encoder`: the sentence-transformers model that gave `vectors`, e.g. muse's port) trains
    with the heads on `texts` (aligned with `vectors`) at `hp.encoder_lr`; it is left in place with its best
    weights, in eval mode, and the dev retrieval is then measured on its embeddings."""
    hp = hp or Hyper()
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    langs = np.asarray(langs, dtype=np.int64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    check_parallel(vectors, langs, pairs, n_langs)
    rng = np.random.default_rng(hp.seed)
    torch.manual_seed(hp.seed)
    order = rng.permutation(len(pairs))
    n_dev = int(round(len(pairs) * hp.dev_fraction)) if len(pairs) >= 20 else 0
    dev_pairs, train_pairs = pairs[order[:n_dev]], pairs[order[n_dev:]]
    if len(train_pairs) < 2:
        raise ValueError(f"meaning stage 1: {len(train_pairs)} training pair(s) after holding out {n_dev} dev "
                         "pair(s); give more parallel data or a lower dev_fraction")
    if (encoder is None) != (texts is None) or (texts is not None and len(texts) != len(vectors)):
        raise ValueError("meaning stage 1: a trained encoder needs the texts of every vector, in the same order")
    model = MeaningModel(vectors.shape[1], n_langs, hp.head, hp.hidden, hp.dropout).to(device)
    losses = Stage1Losses(model, vectors, langs, hp, device, encoder, texts)
    steps, rows = epoch_batches(rng, len(train_pairs), hp.batch_size, min_rows=2)
    best, devs = BestWeights(model, encoder), []
    trains = [Part(model, hp.lr)]
    if encoder is not None:
        encoder.to(device).train()
        trains.append(Part(encoder, hp.encoder_lr or hp.lr))

    def dev_total() -> float:
        devs.append(losses.dev(dev_pairs))
        return devs[-1]["total"]

    def entry(step: int, means: dict[str, float], score: float | None) -> dict[str, Any]:
        if not n_dev and (best.score is None or means["total"] < best.score):  # no dev pairs: the lowest train loss
            best.keep()
            best.score, best.step = means["total"], step
        return {"epoch": -(-step // steps), **({"step": step} if hp.eval_every else {}), "train": means,
                **({"dev": devs[-1]} if n_dev else {})}

    result = Trainer("meaning stage 1", hp, trains, steps, rows, lambda r: losses(train_pairs[r], rng),
                     objective=losses.total,
                     evaluator=DevScore(dev_total, greater_is_better=False) if n_dev else None, keep_best=best.keep,
                     entry=entry, weigh_by_rows=True, row_ids=lambda r: order[n_dev:][r]).fit()
    best.restore()
    model = model.cpu().eval()
    if encoder is not None:
        encoder.eval()
    best_step, best_loss = (result.best_step, result.best_score) if n_dev else (best.step, best.score)
    metrics = {"train_pairs": len(train_pairs), "dev_pairs": n_dev, "best_epoch": -(-best_step // steps),
               "best_loss": best_loss, "initial_dev": devs[0] if devs else None, "history": result.history}
    if n_dev >= 2:
        a, b = vectors[dev_pairs[:, 0]], vectors[dev_pairs[:, 1]]
        metrics["dev_retrieval"] = {"encoder": retrieval_accuracy(a, b)}
        if encoder is not None and texts is not None:
            a, b = (encoder.encode([texts[i] for i in dev_pairs[:, k]], convert_to_numpy=True,
                                   show_progress_bar=False) for k in (0, 1))
            metrics["dev_retrieval"]["trained_encoder"] = retrieval_accuracy(a, b)
        metrics["dev_retrieval"]["meaning"] = retrieval_accuracy(meaning_of(model, a), meaning_of(model, b))
    return model, metrics


# ---------------------------------------------------------------------------------------------------- stage 2


def check_sts(what: str, u: np.ndarray, v: np.ndarray, gold: np.ndarray) -> None:
    if u.ndim != 2 or u.shape != v.shape or len(gold) != len(u):
        raise ValueError(f"meaning stage 2 {what}: sentence1 {u.shape}, sentence2 {v.shape} and {len(gold)} gold "
                         "scores must align row by row")
    if len(u) < 2:
        raise ValueError(f"meaning stage 2 {what}: fewer than 2 scored pairs")
    if not (np.isfinite(u).all() and np.isfinite(v).all() and np.isfinite(gold).all()):
        raise ValueError(f"meaning stage 2 {what}: NaN/inf in the vectors or gold scores")


def train_stage2(u: np.ndarray, v: np.ndarray, gold: np.ndarray,
                 dev: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None, hp: Hyper | None = None,
                 device: str = "cpu") -> tuple[StsHead, dict[str, Any]]:
    """Train the STS head (`sts_*` settings) on meaning embeddings of pairs (u[i], v[i]) with gold in [0, 1]; with
    `dev`, the epoch of the best dev Spearman is kept (else the last). Returns the head (CPU, eval) and metrics."""
    hp = hp or Hyper()
    u, v, gold = (np.asarray(x, dtype=np.float32) for x in (u, v, gold))
    check_sts("training pairs", u, v, gold)
    if dev is not None:
        check_sts("dev pairs", np.asarray(dev[0]), np.asarray(dev[1]), np.asarray(dev[2]))
    torch.manual_seed(hp.seed)
    rng = np.random.default_rng(hp.seed)
    head = StsHead(u.shape[1], hp.sts_hidden, hp.sts_dropout, hp.sts_residual).to(device)
    tu, tv, tg = (torch.as_tensor(x, device=device) for x in (u, v, gold))
    steps, rows = epoch_batches(rng, len(u), hp.sts_batch_size)
    best = BestWeights(head)

    def losses(r: np.ndarray) -> dict[str, torch.Tensor]:
        t = torch.as_tensor(r, device=device)
        return {"sts": sts_loss(head(tu[t]), head(tv[t]), tg[t])}

    def dev_spearman() -> float | None:
        assert dev is not None
        a, b = (apply_module(head, np.asarray(x, np.float32), device) for x in dev[:2])
        head.train()
        return spearman(cosines(a, b), np.asarray(dev[2]))

    def entry(step: int, means: dict[str, float], score: float | None) -> dict[str, Any]:
        return {"epoch": -(-step // steps), "train_loss": means["sts"],
                **({"dev_spearman": score} if dev is not None else {})}

    result = Trainer("meaning stage 2", hp.stage2_args(), [head], steps, rows, losses, keep_best=best.keep,
                     entry=entry, evaluator=None if dev is None else DevScore(dev_spearman), weigh_by_rows=True).fit()
    best.restore()  # none kept (no dev, or no defined Spearman): the last epoch
    history, best_step = result.history, result.best_step
    return head.cpu().eval(), {"train_pairs": len(u),
                               "best_epoch": history[-1]["epoch"] if best_step is None else -(-best_step // steps),
                               "best_dev_spearman": result.best_score,
                               "initial_dev_spearman": result.initial_score, "history": history}
