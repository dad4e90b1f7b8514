"""DuEAM (Goswami et al. 2021): a dual encoder whose learner regresses an anchor's Word Mover's Distance.

- Anchor: a frozen token encoder. A pair's target is exp(-WMD(s, t)), WMD being the earth mover's distance (POT
  `ot.emd2`) between the two sentences' token embeddings (special tokens and padding dropped; uniform or
  norm-proportional token weights; Euclidean ground cost, on L2-normalised token vectors by default so WMD lies in
  [0, 2] like the learner's distance). Targets are deterministic per pair: computed once before training.
- Learner: a sentence encoder with mean pooling (unit-normalised output by default). Loss L = L_A - lam * L_B with
  L_A = mean |exp(-||s' - t'||) - exp(-WMD(s, t))| and L_B = mean cos(s', t'), lam = 0.003 as in the paper.
- Pairs (paper §5), from NLI-style items (a premise and its hypotheses, each in one or more languages), labels
  unused: `monolingual` (premise and hypothesis of an item in one language), `cross_lingual` (premise in one language,
  its hypothesis in another), `unsupervised` (the same language layout, the hypothesis drawn from another item).

Nothing here reads the warehouse (see `dueam_run`); torch, transformers and POT are imported inside functions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.encoders import resolve_device
from amrsim.evaluate.sts import correlations
from amrsim.methods.training import (
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

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

LAMBDA = 0.003  # the paper's weight of L_B
MODES = ("unsupervised", "monolingual", "cross_lingual")
WEIGHTS = ("uniform", "norm")
EMPTY_TOKENS = "empty after tokenisation"


STUDENT, TARGETS = "student.safetensors", "anchor_wmd.npy"  # in the checkpoint


class EmptyTokensError(ValueError):
    """A sentence has no token left after tokenisation (special tokens removed): WMD is undefined for it."""


# ---------------------------------------------------------------------------------------------------- WMD (anchor)


def token_weights(x: np.ndarray, mode: str = "uniform") -> np.ndarray:
    """Mass of each token in the transport: `uniform` 1/n, or `norm` proportional to the token vector's L2 norm
    (uniform where every norm is 0). Sums to 1."""
    n = len(x)
    if mode == "uniform":
        return np.full(n, 1.0 / n)
    if mode == "norm":
        norms = np.linalg.norm(np.asarray(x, dtype=np.float64), axis=1)
        total = norms.sum()
        return norms / total if total > 0 else np.full(n, 1.0 / n)
    raise ValueError(f"token weights '{mode}' unknown; use one of {', '.join(WEIGHTS)}")


def wmd(x: np.ndarray, y: np.ndarray, weights: str = "uniform", normalize: bool = True) -> float:
    """Word Mover's Distance between two token-embedding sets (n, d) and (m, d): `ot.emd2` with Euclidean cost.
    `normalize` L2-normalises each token vector first (the weights are taken before). Never negative."""
    import ot

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"wmd: expected (n, d) and (m, d) token embeddings, got {x.shape} and {y.shape}")
    if not len(x) or not len(y):
        raise EmptyTokensError(f"wmd: a sentence has no tokens ({len(x)} and {len(y)}); WMD is undefined")
    a, b = token_weights(x, weights), token_weights(y, weights)
    if normalize:
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        y = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    cost = ot.dist(x, y, metric="euclidean")
    return max(0.0, float(ot.emd2(a, b, cost)))


@dataclass
class AnchorTargets:
    """WMD per training pair (NaN where skipped), why pairs were skipped (row -> reason), and cache counts."""

    wmd: np.ndarray
    skipped: dict[int, str]
    sentences_embedded: int
    distances_computed: int

    def reasons(self) -> dict[str, int]:
        return dict(Counter(self.skipped.values()))


class Anchor:
    """The frozen token encoder: per text, its token embeddings from hidden layer `layer` (-1: last) without special
    tokens and padding; each distinct text embedded once."""

    def __init__(self, path: str, layer: int = -1, max_length: int = 128, batch_size: int = 64,
                 device: str = "cpu"):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).to(device).eval()
        for p in self.model.parameters():
            p.requires_grad = False
        self.layer, self.max_length, self.batch_size, self.device = layer, max_length, batch_size, device
        self._torch = torch

    def tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        """(n_tokens, dim) float64 per text; n_tokens is 0 where nothing but special tokens is left."""
        torch = self._torch
        out: list[np.ndarray] = [np.zeros((0, 0))] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths batch with less padding
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start:start + self.batch_size]
                enc = self.tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                                     max_length=self.max_length, return_special_tokens_mask=True,
                                     return_tensors="pt")
                special = enc.pop("special_tokens_mask").bool()
                enc = {k: v.to(self.device) for k, v in enc.items()}
                result = self.model(**enc, output_hidden_states=self.layer != -1)
                hidden = result.last_hidden_state if self.layer == -1 else result.hidden_states[self.layer]
                keep = enc["attention_mask"].bool().cpu() & ~special
                hidden = hidden.float().cpu()
                for j, i in enumerate(rows):
                    out[i] = hidden[j][keep[j]].numpy().astype(np.float64)
        return out


def anchor_targets(anchor: Anchor, texts1: Sequence[str], texts2: Sequence[str], weights: str = "uniform",
                   normalize: bool = True) -> AnchorTargets:
    """WMD of every pair, each distinct sentence embedded once and each distinct pair computed once; identical texts
    get exactly 0 (target exp(0) = 1); a pair with a side empty after tokenisation is skipped with its reason."""
    distinct = list(dict.fromkeys([*texts1, *texts2]))
    embedded = dict(zip(distinct, anchor.tokens(distinct), strict=True))
    dist = np.full(len(texts1), np.nan)
    skipped: dict[int, str] = {}
    done: dict[tuple[str, str], float] = {}
    for i, (a, b) in enumerate(zip(texts1, texts2, strict=True)):
        empty = [side for side, t in (("sentence1", a), ("sentence2", b)) if not len(embedded[t])]
        if empty:
            skipped[i] = f"{EMPTY_TOKENS} ({', '.join(empty)})"
            continue
        if a == b:
            dist[i] = 0.0
            continue
        if (a, b) not in done:
            done[(a, b)] = wmd(embedded[a], embedded[b], weights, normalize)
        dist[i] = done[(a, b)]
    return AnchorTargets(dist, skipped, len(distinct), len(done))


# ---------------------------------------------------------------------------------------------------- losses


def anchor_loss(s: torch.Tensor, t: torch.Tensor, wmd_st: torch.Tensor) -> torch.Tensor:
    """L_A = mean |exp(-||s' - t'||_2) - exp(-WMD(s, t))| over the batch."""
    import torch

    d = torch.linalg.vector_norm(s - t, dim=-1)  # its gradient at d = 0 (identical embeddings) is 0, not NaN
    return (torch.exp(-d) - torch.exp(-wmd_st.to(d.dtype))).abs().mean()


def cosine_term(s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """L_B = mean cos(s', t') over the batch."""
    import torch.nn.functional as F  # noqa: N812

    return F.cosine_similarity(s, t, dim=-1, eps=1e-8).mean()


def dueam_loss(s: torch.Tensor, t: torch.Tensor, wmd_st: torch.Tensor, lam: float = LAMBDA
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(L, L_A, L_B) with L = L_A - lam * L_B."""
    la, lb = anchor_loss(s, t, wmd_st), cosine_term(s, t)
    return la - lam * lb, la, lb


# ---------------------------------------------------------------------------------------------------- pairs


@dataclass(frozen=True)
class NLIItem:
    """One NLI example: its premise and hypotheses, each as language -> text (the languages it exists in)."""

    item_id: str
    premise: Mapping[str, str]
    hypotheses: tuple[Mapping[str, str], ...]


@dataclass(frozen=True)
class TrainPair:
    """A training pair: premise text1 (lang1), hypothesis text2 (lang2); `source` is the item of the hypothesis
    (another item's for `unsupervised`)."""

    text1: str
    text2: str
    lang1: str
    lang2: str
    mode: str
    item_id: str
    source: str


def construct_pairs(items: Sequence[NLIItem], modes: Sequence[str], langs: Sequence[str] | None = None,
                    seed: int = 0, max_cross_per_item: int | None = None) -> tuple[list[TrainPair], Counter[str]]:
    """Pairs of the paper's §5 and counts of what could not be built.

    For each item and hypothesis, the language layouts are (L, L) for every language both sides have
    (`monolingual`) and (L1, L2), L1 != L2, premise in L1, hypothesis in L2 (`cross_lingual`; a seeded sample of
    `max_cross_per_item` layouts per hypothesis when set); `langs` restricts the languages. `unsupervised` uses every
    such layout of the item (mono and cross) but pairs the premise with the hypothesis, in L2, of a uniformly drawn
    other item: random premise/hypothesis pairs with the same language mix."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"DuEAM pair modes {unknown} unknown; use {', '.join(MODES)}")
    allowed = set(langs) if langs is not None else None
    rng = np.random.default_rng(seed)

    def ok(lang: str) -> bool:
        return allowed is None or lang in allowed

    layouts: list[tuple[int, int, str, str, bool]] = []  # item, hypothesis, lang1, lang2, cross
    for i, item in enumerate(items):
        p_langs = sorted(lg for lg in item.premise if ok(lg))
        for h, hyp in enumerate(item.hypotheses):
            h_langs = sorted(lg for lg in hyp if ok(lg))
            layouts += [(i, h, lg, lg, False) for lg in p_langs if lg in hyp and ok(lg)]
            cross = [(l1, l2) for l1 in p_langs for l2 in h_langs if l1 != l2]
            if max_cross_per_item is not None and len(cross) > max_cross_per_item:
                cross = [cross[k] for k in sorted(rng.choice(len(cross), max_cross_per_item, replace=False))]
            layouts += [(i, h, l1, l2, True) for l1, l2 in cross]

    pairs: list[TrainPair] = []
    missing: Counter[str] = Counter()
    for i, h, l1, l2, cross in layouts:
        item = items[i]
        if ("cross_lingual" if cross else "monolingual") in modes:
            pairs.append(TrainPair(item.premise[l1], item.hypotheses[h][l2], l1, l2,
                                   "cross_lingual" if cross else "monolingual", item.item_id, item.item_id))
    if "unsupervised" in modes:
        # hypotheses per language, in item order: the other items' hypotheses of item i are the pool minus a run
        pool: dict[str, list[tuple[int, int]]] = {}
        for i, item in enumerate(items):
            for h, hyp in enumerate(item.hypotheses):
                for lg in hyp:
                    if ok(lg):
                        pool.setdefault(lg, []).append((i, h))
        spans = {lg: _item_spans(entries) for lg, entries in pool.items()}
        for i, _, l1, l2, _ in layouts:
            entries = pool[l2]
            lo, hi = spans[l2].get(i, (0, 0))
            others = len(entries) - (hi - lo)
            if others <= 0:
                missing["unsupervised: no other item has a hypothesis in " + l2] += 1
                continue
            r = int(rng.integers(others))
            j, h = entries[r if r < lo else r + (hi - lo)]
            pairs.append(TrainPair(items[i].premise[l1], items[j].hypotheses[h][l2], l1, l2, "unsupervised",
                                   items[i].item_id, items[j].item_id))
    return pairs, missing


def _item_spans(entries: list[tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """item -> [start, end) of its run in `entries` (sorted by item)."""
    spans: dict[int, tuple[int, int]] = {}
    for pos, (i, _) in enumerate(entries):
        start, _ = spans.get(i, (pos, pos))
        spans[i] = (start, pos + 1)
    return spans


# ---------------------------------------------------------------------------------------------------- learner


def load_learner(path: str, normalize: bool = True, max_length: int = 128, device: str = "cpu"
                 ) -> SentenceTransformer:
    """The learner: a sentence-transformers directory (or hub id) as it is, or a plain transformers directory with
    mean pooling; a Normalize module is appended when `normalize` and missing (unit vectors: ||s' - t'|| in [0, 2])."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    local = Path(path)
    if local.is_dir() and not (local / "modules.json").exists():
        transformer = Transformer(str(local), max_seq_length=max_length)
        model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")],
                                    device=device)
    else:
        model = SentenceTransformer(path, device=device)
        if model.max_seq_length is None or model.max_seq_length > max_length:
            model.max_seq_length = max_length
    if normalize and not any(isinstance(m, Normalize) for m in model):
        model.append(Normalize())
    return model


def pooling_of(model: SentenceTransformer) -> str | None:
    """The learner's pooling mode (`mean` expected), for model.json."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    for module in model:
        if isinstance(module, Pooling):
            mode = module.get_config_dict().get("pooling_mode")
            return str(mode) if mode is not None else None
    return None


# ---------------------------------------------------------------------------------------------------- training


def _fingerprint(*parts: Any) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(json.dumps(part, ensure_ascii=False, default=str).encode("utf-8"))
    return h.hexdigest()[:16]


def train_dueam(anchor_path: str, learner_path: str, texts1: Sequence[str], texts2: Sequence[str], out_dir: Path, *,
                dev: tuple[Sequence[str], Sequence[str], np.ndarray] | None = None, lam: float = LAMBDA,
                batch_size: int = 64, lr: float = 2e-5, warmup: int = 100, epochs: int = 1, eval_every: int = 1000,
                max_steps: int | None = None, seed: int = 0, device: str = "auto", resume: bool = True,
                anchor_layer: int = -1, weights: str = "uniform", unit_vectors: bool = True,
                normalize: bool = True, max_length: int = 128, weight_decay: float = 0.01,
                max_grad_norm: float = 1.0, extra_meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train the DuEAM learner on (texts1[i], texts2[i]) pairs against the anchor's WMD targets.

    Targets are computed once (pairs with a side empty after tokenisation are skipped and counted) and kept with the
    checkpoint, so a resumed run does not recompute them. `dev` = (texts1, texts2, gold scores): Spearman x100 of the
    learner's cosine, at the start and every `eval_every` steps; the best trained weights are kept (else the last).
    Checkpoint every `eval_every` steps in `out_dir/checkpoint/` (weights, optimizer, scheduler, RNG, step, targets);
    `max_steps` stops early, checkpointed. A finished run writes `out_dir/encoder/` (sentence-transformers,
    safetensors) and `out_dir/model.json`, then removes the checkpoint.
    """
    import torch
    from safetensors.torch import load_model, save_model


    out_dir = Path(out_dir)
    refuse_finished_run(out_dir)
    if len(texts1) != len(texts2):
        raise ValueError(f"DuEAM: {len(texts1)} sentence1s but {len(texts2)} sentence2s; they must align")
    if batch_size < 1 or epochs < 1 or eval_every < 1 or warmup < 0 or (max_steps is not None and max_steps < 1):
        raise ValueError("DuEAM: batch_size, epochs, eval_every (and max_steps when given) must be >= 1, warmup >= 0")
    if weights not in WEIGHTS:
        raise ValueError(f"token weights '{weights}' unknown; use one of {', '.join(WEIGHTS)}")
    device = resolve_device(device)
    texts1, texts2 = list(texts1), list(texts2)
    params = {"lam": lam, "batch_size": batch_size, "lr": lr, "warmup": warmup, "epochs": epochs,
              "anchor_layer": anchor_layer, "weights": weights, "unit_vectors": unit_vectors,
              "normalize": normalize, "max_length": max_length, "weight_decay": weight_decay,
              "max_grad_norm": max_grad_norm}
    run_key = {"anchor": anchor_path, "learner": learner_path, "seed": seed, **params,
               "train": _fingerprint(texts1, texts2),
               "dev": _fingerprint(list(dev[0]), list(dev[1]), np.asarray(dev[2]).tolist()) if dev else None}

    ckpt, saved = open_checkpoint(out_dir, run_key, resume)

    if saved is not None:  # the targets are part of the checkpoint: no anchor pass on resume
        dist = np.load(ckpt / TARGETS)
        anchor_info = saved["anchor"]
    else:
        anchor = Anchor(anchor_path, anchor_layer, max_length, device=device)
        targets = anchor_targets(anchor, texts1, texts2, weights, unit_vectors)
        del anchor
        dist = targets.wmd
        anchor_info = {"sentences_embedded": targets.sentences_embedded,
                       "distances_computed": targets.distances_computed, "skipped": targets.reasons()}
    keep = np.flatnonzero(np.isfinite(dist))
    if len(keep) < 1:
        raise ValueError(f"DuEAM: no usable training pairs (skipped: {anchor_info['skipped']})")
    y = dist[keep]
    t1, t2 = [texts1[i] for i in keep], [texts2[i] for i in keep]
    anchor_info |= {"pairs": len(keep), "identical_pairs": int(sum(a == b for a, b in zip(t1, t2, strict=True))),
                    "wmd_mean": float(y.mean()), "wmd_min": float(y.min()), "wmd_max": float(y.max()),
                    "target_mean": float(np.exp(-y).mean())}

    torch.manual_seed(seed)
    student = load_learner(learner_path, normalize, max_length, device)
    n = len(y)
    steps_per_epoch = math.ceil(n / batch_size)
    total = epochs * steps_per_epoch
    stop_at = total if max_steps is None else min(total, max_steps)
    named = [(name, p) for name, p in student.named_parameters() if p.requires_grad]
    no_decay = [p for name, p in named if "bias" in name or "norm" in name.lower()]
    decay = [p for name, p in named if not ("bias" in name or "norm" in name.lower())]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(warmup, total))
    best_path = out_dir / "best.safetensors"
    state: dict[str, Any] = {"step": 0, "run": run_key, "anchor": anchor_info, "best_dev": None, "best_step": None,
                             "initial_dev": None, "history": []}
    resumed_from = None
    if saved is not None:
        load_model(student, str(ckpt / STUDENT), device=device)
        resume_train_state(ckpt, optimizer, scheduler)  # weights_only: a crafted pickle is refused
        state = saved
        resumed_from = state["step"]
        log.info("DuEAM: resuming %s from step %d", out_dir, resumed_from)
    else:
        shutil.rmtree(ckpt, ignore_errors=True)
        best_path.unlink(missing_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)

    def dev_score() -> float | None:
        assert dev is not None
        student.eval()
        with torch.no_grad(), autocast(device):
            a = torch.cat([st_embed(student, dev[0][sl], device) for sl in batches(len(dev[0]), 128)])
            b = torch.cat([st_embed(student, dev[1][sl], device) for sl in batches(len(dev[1]), 128)])
        student.train()
        cos = torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).cpu().numpy()
        return correlations(cos, np.asarray(dev[2], dtype=np.float64))["spearman"]

    def checkpoint() -> None:
        def write_weights(directory: Path) -> None:
            save_model(student, str(directory / STUDENT))
            np.save(directory / TARGETS, dist)  # the anchor's targets: a resumed run does not recompute them

        save_checkpoint(out_dir, state, optimizer, scheduler, write_weights)

    def evaluate_and_checkpoint(step: int, losses: dict[str, float] | None) -> None:
        entry: dict[str, Any] = {"step": step, **(losses or {})}
        if dev is not None:
            score = dev_score()
            entry["dev_spearman"] = score
            if score is not None and (state["best_dev"] is None or score > state["best_dev"]):
                state["best_dev"], state["best_step"] = score, step
                save_model(student, str(best_path))
            log.info("DuEAM step %d/%d: %s, dev Spearman %s", step, total, losses, score)
        state["history"].append(entry)
        state["step"] = step
        checkpoint()

    if resumed_from is None and dev is not None:
        state["initial_dev"] = dev_score()
    student.train()

    def batch_losses(rows: np.ndarray) -> dict[str, torch.Tensor]:
        with autocast(device):
            emb = st_embed(student, [t1[i] for i in rows] + [t2[i] for i in rows], device)
        s, t = emb[:len(rows)], emb[len(rows):]
        loss, la, lb = dueam_loss(s, t, torch.as_tensor(y[rows], device=device), lam)
        return {"loss": loss, "l_a": la, "l_b": lb}

    step = run_steps("DuEAM", step=state["step"], stop_at=stop_at, n=n, batch_size=batch_size, seed=seed,
                     eval_every=eval_every, losses=batch_losses, parameters=[p for _, p in named],
                     optimizer=optimizer, scheduler=scheduler, max_grad_norm=max_grad_norm,
                     report=evaluate_and_checkpoint, row_ids=lambda rows: keep[rows])

    summary: dict[str, Any] = {"completed": step >= total, "steps": step, "total_steps": total,
                               "resumed_from": resumed_from, "best_dev": state["best_dev"],
                               "best_step": state["best_step"], "initial_dev": state["initial_dev"],
                               "final_loss": state["history"][-1].get("loss") if state["history"] else None,
                               "train_pairs": n, "skipped": anchor_info["skipped"], "anchor": anchor_info}
    if step < total:
        return summary
    meta = {"anchor": anchor_path, "learner": learner_path, "pooling": pooling_of(student),
            "loss": "L_A - lam * L_B; L_A = mean|exp(-||s'-t'||) - exp(-WMD(s,t))|, L_B = mean cos(s',t')",
            "params": params, "seed": seed, "device": device,
            "metrics": {k: v for k, v in summary.items() if k != "completed"}, "history": state["history"],
            **(extra_meta or {})}
    encoder_dir = finish_encoder_run(out_dir, "dueam", student, best_path if dev is not None else None, meta)
    return {**summary, "model_dir": str(out_dir), "encoder_dir": str(encoder_dir)}
