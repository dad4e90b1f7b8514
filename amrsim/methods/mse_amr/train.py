"""MSE-AMR (Cai et al. 2022, "Retrofitting Multilingual Sentence Embeddings with Abstract Meaning Representation"):
a text encoder trained with supervised SimCSE on linearised AMR graphs, whose graph embedding is joined to a frozen
multilingual sentence embedding (mUSE by default). This module is the library core: vocabulary extension, the loss,
the mixed sampling of training views, the training loop, the AMR encoder at inference and the integration.

Decisions, and where they follow the paper, the released code (github.com/jcyk/MSE-AMR, a SimCSE fork) or neither:

* **Representation.** ``pooling="mlp"`` (default): the BERT pooler, a dense layer + tanh over the final [CLS] state,
  used in training *and* at inference. That is what the release trains and evaluates (``--pooler_type cls
  --proj_mlp_type simcse_sup --after_projector``; ``simcse_to_huggingface.py`` renames the MLP to BERT's pooler and
  ``evaluation.py --pooler simcse_sup`` reads ``pooler_output``), and SimCSE's own choice for supervised models
  (``cls_before_pooler`` at test is its unsupervised recipe). As in the release, whose MLP is new, the pooler is
  re-initialised before training (BERT's NSP-trained pooler is not kept). ``pooling="cls"``: the raw [CLS] state.
  The MLP is the model's own pooler, so ``save_pretrained`` keeps it and ``AutoModel`` reloads it.
* **Loss.** `simcse_loss` is SimCSE's supervised loss. The release adds a second, symmetric term (each positive
  classifies its anchor among the batch's anchors: ``loss_fct(cos_sim[:N, :N].T, labels)``); ``symmetric_loss=True``
  (the training default) does the same. Hard-negative weight 0, as the release (its default).
* **Vocabulary.** Relation and frame tokens seen ``min_count`` times in the training graphs
  (`amrsim.amr.linearize.vocabulary`) become whole tokens, each initialised with the mean embedding of the pieces the
  *unextended* tokenizer cuts it into. The release instead adds SPRING's fixed AMR token list and averages the
  embeddings of hand-made splits (``:ARG0`` -> ``relation argument 0``, ``want-01`` -> ``want 01``). Added tokens
  match whole words only and before lower-casing (``single_word=True, normalized=False``), so ``go-02`` is not found
  inside ``undergo-02`` and ``:ARG0`` survives an uncased tokenizer.
* **Mixed sampling** (the paper's Algorithm 1): see `mixed_view`. Views are drawn afresh each time a triple is seen
  (from ``seed`` and the step), whereas the release drew three views per triple once, offline
  (``collect_amr_data.py``), and trained 3 epochs over that tripled file.
* **Gradient accumulation.** A step's ``batch_size`` triples are split into micro-batches and the contrastive loss is
  computed *within each micro-batch*: an anchor is contrasted with ``2 * micro_batch`` candidates, not with the
  ``2 * batch_size`` of a true large batch (the release gathered all 512 = 4 GPUs x 128 across devices). Set
  ``micro_batch=batch_size`` where the accelerator holds it. Cached-gradient schemes (GradCache) are not done.
* **Optimisation** as the HF Trainer the release ran: AdamW (weight decay 0), linear decay to 0 over the planned
  steps, gradient norm clipped at 1. Model selection: ``dev_eval`` (higher is better, e.g. STSb-dev Spearman) every
  ``eval_every`` steps and at the end; the best model is the one written. The release trained with
  ``max_seq_length 32`` and 3 epochs on bert-base/large-uncased; the defaults here (128, 1 epoch) are the caller's.
* **Integration** (`combine`): ``concat`` of the two unit vectors by default; ``sum``, ``s_only``, ``h_only``. The
  release's ``evaluation.py`` has ``cat`` and ``sum`` (its default), normalising only with ``--normalize``.

Not verified offline: the paper's text itself (Algorithm 1's exact wording, §4.2's list of integrations); what is
said above of the release was read from its code, not run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.amr.linearize import vocabulary
from amrsim.encoders import model_subdir, resolve_device
from amrsim.methods.mse_amr.params import Params
from amrsim.methods.training import (
    MODEL_JSON,
    NonFiniteLossError,
    autocast,
    base_model_path,
    epoch_order,
    linear_warmup,
    open_checkpoint,
    recover_dir,
    resume_train_state,
    save_checkpoint,
    swap_dir,
    write_model_json,
)

# torch, transformers are imported inside the functions: importing this module must stay cheap

if TYPE_CHECKING:
    import torch

__all__ = [
    "INTEGRATIONS", "POOLINGS", "ROLES", "AmrEncoder", "combine", "embed_combined", "encode_with",
    "LoopOptions", "extend_vocabulary", "mixed_view", "simcse_loss", "train_mse_amr",
]

log = logging.getLogger(__name__)

ROLES = ("premise", "entailment", "contradiction")  # anchor, positive, hard negative
POOLINGS = ("mlp", "cls")
INTEGRATIONS = ("concat", "sum", "s_only", "h_only")
ENGLISH = "en"

# role -> language -> {"text": str | None, "graph": linearised graph | None}
Triple = Mapping[str, Mapping[str, Mapping[str, str | None]]]


# ---------------------------------------------------------------------------------------------------------------------
# vocabulary, loss, pooling


def extend_vocabulary(tokenizer: Any, model: Any, tokens: Sequence[str]) -> int:
    """Add `tokens` (``:ARG0``, ``want-01``) as whole tokens, each embedding the mean of the embeddings of the pieces
    the tokenizer cut it into before (unknown pieces left out unless all are unknown); returns how many were added.
    Tokens already in the vocabulary, and repeats, are skipped."""
    import torch
    from transformers import AddedToken

    known = tokenizer.get_vocab()
    new: list[str] = []
    for tok in tokens:
        if tok and tok not in known and tok not in new:
            new.append(tok)
    if not new:
        return 0
    unk = tokenizer.unk_token_id
    pieces: dict[str, list[int]] = {}
    for tok in new:  # the old split, taken before any token is added
        ids = tokenizer(tok, add_special_tokens=False)["input_ids"]
        pieces[tok] = [i for i in ids if i != unk] or ids
    added = tokenizer.add_tokens([AddedToken(t, single_word=True, normalized=False) for t in new])
    rows = model.get_input_embeddings().weight.shape[0]
    model.resize_token_embeddings(max(rows, len(tokenizer)), mean_resizing=False)
    weight = model.get_input_embeddings().weight
    with torch.no_grad():
        for tok in new:
            ids = pieces[tok]
            if ids:
                weight[tokenizer.convert_tokens_to_ids(tok)] = weight[ids].mean(0)
    return int(added)


def simcse_loss(anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None = None,
                temperature: float = 0.05, *, symmetric: bool = False) -> torch.Tensor:
    """Supervised SimCSE: cosine of each anchor with every positive and every hard negative of the batch (b x 2b
    logits / temperature), cross-entropy with the anchor's own positive as the label. `symmetric` adds the released
    MSE-AMR code's second term: each positive picks its anchor among the b anchors."""
    import torch
    import torch.nn.functional as F

    a = F.normalize(anchor.float(), dim=-1)
    p = F.normalize(positive.float(), dim=-1)
    logits = a @ p.T
    if negative is not None:
        logits = torch.cat([logits, a @ F.normalize(negative.float(), dim=-1).T], dim=1)
    logits = logits / temperature
    labels = torch.arange(a.shape[0], device=a.device)
    loss = F.cross_entropy(logits, labels)
    if symmetric:
        loss = loss + F.cross_entropy(logits[:, : a.shape[0]].T, labels)
    return loss


def _check_pooling(model: Any, pooling: str) -> None:
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling '{pooling}': use {' or '.join(POOLINGS)}")
    if pooling == "mlp" and getattr(model, "pooler", None) is None:
        raise ValueError(f"pooling 'mlp' needs a model with a pooler layer (BERT, XLM-R); "
                         f"{type(model).__name__} has none: use pooling='cls'")


def _reset_pooler(model: Any) -> None:
    """A fresh dense layer under the tanh, as the release's new SimCSE MLP."""
    import torch

    dense = getattr(model.pooler, "dense", None)
    if dense is None:
        return
    with torch.no_grad():
        dense.weight.normal_(0.0, float(getattr(model.config, "initializer_range", 0.02)))
        if dense.bias is not None:
            dense.bias.zero_()


def _embed(model: Any, tokenizer: Any, texts: Sequence[str], pooling: str, max_length: int,
           device: torch.device) -> torch.Tensor:
    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    out = model(**batch.to(device))
    return out.pooler_output if pooling == "mlp" else out.last_hidden_state[:, 0]


def _embed_by_length(model: Any, tokenizer: Any, texts: Sequence[str], pooling: str, max_length: int,
                     device: torch.device, chunk: int) -> torch.Tensor:
    """`_embed` with gradients, the texts run in chunks of similar length (each padded to its own longest) and the
    rows put back in input order: the same embeddings, less padding (graphs run 2-4x longer than sentences)."""
    import torch

    if len(texts) <= chunk:
        return _embed(model, tokenizer, texts, pooling, max_length, device)
    lengths = [len(ids) for ids in tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: lengths[i])
    parts = [_embed(model, tokenizer, [texts[i] for i in order[start:start + chunk]], pooling, max_length, device)
             for start in range(0, len(order), chunk)]
    inverse = torch.empty(len(order), dtype=torch.long, device=device)
    inverse[torch.tensor(order, device=device)] = torch.arange(len(order), device=device)
    return torch.cat(parts)[inverse]


def encode_with(model: Any, tokenizer: Any, texts: Sequence[str], *, pooling: str = "mlp", max_length: int = 128,
                batch_size: int = 64) -> np.ndarray:
    """Embeddings (n, dim) float32 from a live model, without gradients, as the trained encoder computes them: what a
    `train_mse_amr` ``dev_eval`` callback should use. Batches go by length to pad less; rows keep input order."""
    import torch

    _check_pooling(model, pooling)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"encode: item {i} is {type(t).__name__}, not a linearised graph string")
    dim = int(model.config.hidden_size)
    if not texts:
        return np.zeros((0, dim), np.float32)
    device = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), dim), np.float32)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                idx = order[start:start + batch_size]
                vecs = _embed(model, tokenizer, [texts[i] for i in idx], pooling, max_length, device)
                out[idx] = vecs.float().cpu().numpy()
    finally:
        model.train(was_training)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# mixed sampling (Algorithm 1)


def mixed_view(example: Triple, langs: Sequence[str], rng: random.Random, p_graph: float = 0.5, *,
               lang_weights: Sequence[float] | None = None) -> dict[str, str]:
    """One training view of a triple: role -> the string the AMR encoder reads.

    Drawn *per sentence*: premise, entailment and contradiction each draw their own language from `langs`
    (uniformly, or by `lang_weights`), so one triple can mix languages and forms. A non-English sentence is always
    the linearised graph of that language's sentence (a parse of its translation); an English one is the graph with
    probability `p_graph`, else the English text. Languages where the sentence is unusable (non-English: no graph;
    English: neither graph nor text) are left out of that sentence's draw; an English sentence with only one of the
    two gives that one.

    The released code did the same per sentence (independent ``random.choices`` per column of the triple, over
    [English text, English graph, graphs of de es it fr ar], uniformly or with the English graph weighted 10:2);
    whether the paper's Algorithm 1 draws the language once per triple instead could not be checked offline.
    """
    if not langs:
        raise ValueError("mixed_view: langs is empty")
    if not 0.0 <= p_graph <= 1.0:
        raise ValueError(f"mixed_view: p_graph {p_graph} is not a probability")
    if lang_weights is not None and len(lang_weights) != len(langs):
        raise ValueError(f"mixed_view: {len(lang_weights)} lang_weights for {len(langs)} langs")
    view: dict[str, str] = {}
    for role in ROLES:
        per_lang = example.get(role) or {}
        options: list[str] = []
        weights: list[float] = []
        for i, lang in enumerate(langs):
            entry = per_lang.get(lang) or {}
            usable = bool(entry.get("graph")) or (lang == ENGLISH and bool(entry.get("text")))
            weight = 1.0 if lang_weights is None else float(lang_weights[i])
            if usable and weight > 0:
                options.append(lang)
                weights.append(weight)
        if not options:
            raise ValueError(f"mixed_view: '{role}' has no usable graph (or English text) in any of {list(langs)}")
        lang = rng.choices(options, weights=weights)[0]
        entry = per_lang[lang]
        graph, text = entry.get("graph"), entry.get("text")
        if lang == ENGLISH and text and (not graph or rng.random() >= p_graph):
            view[role] = str(text)
        else:
            view[role] = str(graph)
    return view


# ---------------------------------------------------------------------------------------------------------------------
# integration


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norm, 1e-12)  # a zero vector stays zero


def combine(s: np.ndarray | None, h: np.ndarray | None, mode: str = "concat") -> np.ndarray:
    """Final embedding from the sentence embedding `s` and the graph embedding `h` (last axis = features), float32:
    ``concat`` s/|s| (+) h/|h| (cosine = mean of the two cosines), ``sum`` s/|s| + h/|h| (equal dims), ``s_only``
    s/|s|, ``h_only`` h/|h|; the side a mode does not use may be None."""
    if mode not in INTEGRATIONS:
        raise ValueError(f"unknown integration '{mode}': use {', '.join(INTEGRATIONS)}")
    need_s, need_h = mode != "h_only", mode != "s_only"
    if (need_s and s is None) or (need_h and h is None):
        raise ValueError(f"integration '{mode}' needs both the sentence and the graph embedding")
    sn = _unit(np.asarray(s, dtype=np.float32)) if need_s else None
    hn = _unit(np.asarray(h, dtype=np.float32)) if need_h else None
    if sn is None:
        return hn  # type: ignore[return-value]
    if hn is None:
        return sn
    if sn.shape[:-1] != hn.shape[:-1]:
        raise ValueError(f"integration '{mode}': shapes {sn.shape} and {hn.shape} do not pair up")
    if mode == "sum":
        if sn.shape[-1] != hn.shape[-1]:
            raise ValueError(f"integration 'sum' needs equal dimensions, got {sn.shape[-1]} and {hn.shape[-1]}: "
                             f"use 'concat'")
        return sn + hn
    return np.concatenate([sn, hn], axis=-1)


def embed_combined(base_vectors: np.ndarray, graph_vectors: np.ndarray, mode: str = "concat") -> np.ndarray:
    """`combine` for row-aligned matrices (n, d_s) and (n, d_h): one final embedding per sentence, C-contiguous."""
    s = np.asarray(base_vectors, dtype=np.float32)
    h = np.asarray(graph_vectors, dtype=np.float32)
    if s.ndim != 2 or h.ndim != 2:
        raise ValueError(f"embed_combined: expected 2-D matrices, got {s.ndim}-D and {h.ndim}-D")
    if s.shape[0] != h.shape[0]:
        raise ValueError(f"embed_combined: {s.shape[0]} sentence vectors but {h.shape[0]} graph vectors")
    return np.ascontiguousarray(combine(s, h, mode))


# ---------------------------------------------------------------------------------------------------------------------
# inference


@dataclass
class AmrEncoder:
    """The trained AMR encoder (`out_dir/amr_encoder/`): linearised graphs -> (n, dim) float32, batched, no grad."""

    path: str | Path
    pooling: str = "mlp"
    max_length: int = 128
    batch_size: int = 64
    device: str = "auto"
    name: str = "mse_amr"
    model_id: str = ""

    def __post_init__(self) -> None:
        from transformers import AutoModel, AutoTokenizer

        self._device = resolve_device(self.device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        # a trained model in the warehouse: safetensors only, never a pickled pytorch_model.bin
        self.model = AutoModel.from_pretrained(str(self.path), use_safetensors=True).to(self._device).eval()
        _check_pooling(self.model, self.pooling)
        self.dim = int(self.model.config.hidden_size)
        self.model_id = self.model_id or f"mse_amr-graph:{self.path}"

    @classmethod
    def from_run(cls, run_dir: str | Path, batch_size: int = 64, device: str = "auto") -> AmrEncoder:
        """The encoder a `train_mse_amr` run wrote, with the pooling and length it was trained with."""
        run_dir = Path(run_dir)
        meta = json.loads((run_dir / "model.json").read_text(encoding="utf-8"))
        return cls(model_subdir(run_dir, meta.get("amr_encoder", "amr_encoder")), pooling=meta.get("pooling", "mlp"),
                   max_length=int(meta.get("max_length", 128)), batch_size=batch_size, device=device,
                   model_id=f"trained:{meta.get('method', 'mse_amr')}/{meta.get('run_id', run_dir.name)}#graph")

    def encode(self, linearized: list[str]) -> np.ndarray:
        return encode_with(self.model, self.tokenizer, linearized, pooling=self.pooling, max_length=self.max_length,
                           batch_size=self.batch_size)


# ---------------------------------------------------------------------------------------------------------------------
# training


def _fingerprint(triples: Sequence[Triple], **settings: Any) -> dict[str, Any]:
    """What a checkpoint must agree on to be resumed: the settings that shape the data order and the schedule, the
    number of triples and a hash of up to 64 evenly spaced ones (hashing every triple would cost a pass over data)."""
    n = len(triples)
    h = hashlib.sha256()
    for i in sorted({(k * n) // 64 for k in range(64)} if n > 64 else range(n)):
        h.update(json.dumps(triples[i], sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return {**settings, "n_triples": n, "triples_sample_sha256": h.hexdigest()}


def _save_pretrained(model: Any, tokenizer: Any) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        model.save_pretrained(str(path))
        tokenizer.save_pretrained(str(path))

    return write


@dataclass(frozen=True)
class LoopOptions:
    """Settings of `train_mse_amr` that are not pipeline params: for experiments and tests."""

    grad_accum: int | None = None  # micro-batches a step (default: ceil(batch_size / micro_batch))
    lang_weights: Sequence[float] | None = None  # sampling weights of `langs` in `mixed_view`
    max_grad_norm: float = 1.0  # 0: no clipping
    checkpoint_every: int | None = None  # default: params.eval_every
    length_chunk: int | None = 32  # texts run through the model in length-sorted chunks (None: one padded batch)


def train_mse_amr(triples: Sequence[Triple], out_dir: str | Path, params: Params, *,
                  langs: Sequence[str] | None = None, dev_eval: Callable[[Any, Any], float] | None = None,
                  resume: bool = True, extra_meta: Mapping[str, Any] | None = None,
                  loop: LoopOptions = LoopOptions()) -> dict[str, Any]:
    """Train the AMR encoder of MSE-AMR from `params.encoder` (`minilm`, `hf:<id|path>`, a directory) on NLI
    `triples` (role -> language -> {"text", "graph"}); writes `out_dir/amr_encoder/` (safetensors + extended
    tokenizer) and `out_dir/model.json`. The data keys of `params` (datasets, split, parser, ...) are the caller's;
    `langs` are the languages the data has (default `params.langs`, else English).

    A step takes `batch_size` triples (shuffled per epoch from `seed`), draws one `mixed_view` of each and
    accumulates micro-batches (`loop.grad_accum`, default ceil(batch_size / micro_batch)), the loss computed within
    each micro-batch (see the module notes). `dev_eval(model, tokenizer) -> float` (higher is better; embed with
    `encode_with`) runs every `eval_every` steps and at the end, and the best model is the one written; without it,
    the last. `out_dir/checkpoint/` (the shared format of `amrsim.methods.training`: model and tokenizer, optimizer,
    scheduler, every RNG, step, losses, best score) is written every `loop.checkpoint_every` steps (default
    `eval_every`) and at the end, and picked up when `resume`; views and data order derive from `seed` and the step,
    so a resumed run sees what an uninterrupted one would. `max_steps` stops at that global step (the schedule still
    spans `epochs`), outputs written. A non-finite loss raises NonFiniteLossError (a FloatingPointError) naming the
    step and the micro-batch's triple indices. bf16 autocast on CUDA only. `extra_meta` (what the data was: table
    versions, counts, pipeline) is merged into model.json."""
    import torch

    langs = tuple(langs if langs is not None else params.langs or (ENGLISH,))
    _check_training_input(triples, langs, params, loop)
    encoder_path = base_model_path(params.encoder)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device(resolve_device(params.device))
    n = len(triples)
    micro = math.ceil(params.batch_size / loop.grad_accum) if loop.grad_accum else min(params.micro_batch,
                                                                                        params.batch_size)
    steps_per_epoch = math.ceil(n / params.batch_size)
    total_steps = steps_per_epoch * params.epochs
    stop = min(total_steps, params.max_steps) if params.max_steps is not None else total_steps
    checkpoint_every = loop.checkpoint_every or params.eval_every
    lang_weights = None if loop.lang_weights is None else [float(w) for w in loop.lang_weights]
    fingerprint = _fingerprint(
        triples, encoder_path=encoder_path, langs=list(langs), lr=params.lr, batch_size=params.batch_size,
        micro_batch=micro, max_length=params.max_length, epochs=params.epochs, seed=params.seed,
        min_count=params.min_count, p_graph=params.p_graph, lang_weights=lang_weights,
        temperature=params.temperature, symmetric_loss=params.symmetric_loss, pooling=params.pooling,
        warmup_ratio=params.warmup_ratio, weight_decay=params.weight_decay, max_grad_norm=loop.max_grad_norm)

    best_dir = out_dir / "best_model"
    recover_dir(best_dir)
    ckpt_dir, state = open_checkpoint(out_dir, fingerprint, resume)
    if state is None:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        shutil.rmtree(best_dir, ignore_errors=True)
    model, tokenizer, added = _start_model(encoder_path, triples, langs, params, ckpt_dir, state)
    if state is not None:
        log.info("MSE-AMR: resuming %s at step %d of %d", out_dir, state["step"], total_steps)

    model.to(dev).train()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]  # biases and LayerNorm, as the HF Trainer
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": params.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=params.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, linear_warmup(int(params.warmup_ratio * total_steps), total_steps))
    step, best_score, best_step = 0, -math.inf, None
    losses: list[float] = []
    dev_history: list[list[float]] = []
    resumed_from = None
    if state is not None:
        resume_train_state(ckpt_dir, optimizer, scheduler)  # weights_only: a crafted pickle is refused
        step, resumed_from = int(state["step"]), int(state["step"])
        best_score = float(state["best_score"])
        best_step = None if state["best_step"] is None else int(state["best_step"])
        losses = [float(x) for x in state["losses"]]
        dev_history = [[float(s), float(v)] for s, v in state["dev_history"]]

    def checkpoint() -> None:
        progress = {"run": fingerprint, "step": step, "added_tokens": added, "best_score": best_score,
                    "best_step": best_step, "losses": losses, "dev_history": dev_history}
        save_checkpoint(out_dir, progress, optimizer, scheduler,
                        lambda directory: _save_pretrained(model, tokenizer)(directory / "model"))

    def evaluate() -> None:
        nonlocal best_score, best_step
        assert dev_eval is not None
        model.eval()
        with torch.no_grad():
            score = float(dev_eval(model, tokenizer))
        model.train()
        dev_history.append([step, score])
        log.info("MSE-AMR: step %d dev %.4f (best %.4f)", step, score, best_score)
        if score > best_score:  # NaN never wins
            best_score, best_step = score, step
            swap_dir(best_dir, _save_pretrained(model, tokenizer))

    order: np.ndarray | None = None
    order_epoch = -1
    while step < stop:
        epoch, pos = divmod(step, steps_per_epoch)
        if epoch != order_epoch:
            order, order_epoch = epoch_order(params.seed, epoch, n), epoch
        assert order is not None
        idx = [int(i) for i in order[pos * params.batch_size:(pos + 1) * params.batch_size]]
        rng = random.Random(f"mse_amr:{params.seed}:{step}")
        views = [mixed_view(triples[i], langs, rng, params.p_graph, lang_weights=lang_weights) for i in idx]
        optimizer.zero_grad(set_to_none=True)
        step_loss = _accumulate_step(model, tokenizer, views, idx, micro, params, loop, dev, step, epoch)
        if loop.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), loop.max_grad_norm)
        optimizer.step()
        scheduler.step()
        step += 1
        losses.append(step_loss)
        if step % 50 == 0 or step == stop:
            log.info("MSE-AMR: step %d/%d loss %.4f lr %.2e", step, total_steps, step_loss, scheduler.get_last_lr()[0])
        if dev_eval is not None and (step % params.eval_every == 0 or step == stop):
            evaluate()
        if step % checkpoint_every == 0 or step == stop:
            checkpoint()
    if dev_eval is not None and step > 0 and (not dev_history or dev_history[-1][0] != step):
        evaluate()  # a resumed run that had nothing left to train, evaluated before its last checkpoint

    enc_dir = out_dir / "amr_encoder"
    if best_step is not None and best_dir.is_dir():
        swap_dir(enc_dir, lambda path: shutil.copytree(best_dir, path, dirs_exist_ok=True))
    else:
        swap_dir(enc_dir, _save_pretrained(model, tokenizer))
    completed = step >= total_steps
    run_params = {
        "encoder_path": encoder_path, "lr": params.lr, "batch_size": params.batch_size, "micro_batch": micro,
        "grad_accum": math.ceil(params.batch_size / micro), "candidates_per_anchor": 2 * micro,
        "max_length": params.max_length, "epochs": params.epochs, "max_steps": params.max_steps,
        "eval_every": params.eval_every, "min_count": params.min_count, "p_graph": params.p_graph,
        "lang_weights": lang_weights, "temperature": params.temperature, "symmetric_loss": params.symmetric_loss,
        "pooling": params.pooling, "warmup_ratio": params.warmup_ratio, "weight_decay": params.weight_decay,
        "max_grad_norm": loop.max_grad_norm, "length_chunk": loop.length_chunk, "n_triples": n,
        "device": dev.type, "bf16": dev.type == "cuda",
    }
    metrics = {
        "steps": step, "total_steps": total_steps, "completed": completed,
        "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
        "best_dev": best_score if best_step is not None else None, "best_step": best_step,
        "selected_step": best_step if best_step is not None else step, "dev_history": dev_history,
    }
    write_model_json(out_dir, "mse_amr", {
        "amr_encoder": enc_dir.name, "base_encoder": params.base_encoder, "integration": params.integration,
        "pooling": params.pooling, "max_length": params.max_length, "langs": list(langs), "params": run_params,
        "seed": params.seed, "added_tokens": added, "metrics": metrics, **dict(extra_meta or {}),
    })
    if completed and not params.keep_checkpoint:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        shutil.rmtree(best_dir, ignore_errors=True)
    return {
        "run_dir": str(out_dir), "model_json": str(out_dir / MODEL_JSON), "steps": step,
        "total_steps": total_steps, "completed": completed, "resumed_from": resumed_from, "losses": losses,
        "best_dev": metrics["best_dev"], "best_step": best_step, "added_tokens": added,
    }


def _check_training_input(triples: Sequence[Triple], langs: Sequence[str], params: Params,
                          loop: LoopOptions) -> None:
    if not triples:
        raise ValueError("train_mse_amr: no triples")
    if not langs:
        raise ValueError("train_mse_amr: langs is empty")
    if params.pooling not in POOLINGS:
        raise ValueError(f"unknown pooling '{params.pooling}': use {' or '.join(POOLINGS)}")
    if params.integration not in INTEGRATIONS:
        raise ValueError(f"unknown integration '{params.integration}': use {', '.join(INTEGRATIONS)}")
    if loop.grad_accum is not None and not 1 <= loop.grad_accum <= params.batch_size:
        raise ValueError(f"train_mse_amr: grad_accum {loop.grad_accum} must be between 1 and batch_size "
                         f"{params.batch_size}")


def _start_model(encoder_path: str, triples: Sequence[Triple], langs: Sequence[str], params: Params,
                 ckpt_dir: Path, state: Mapping[str, Any] | None) -> tuple[Any, Any, int]:
    """(model, tokenizer, number of added AMR tokens): from the checkpoint when resuming, else `encoder_path` with
    its vocabulary extended by the training graphs' frequent tokens (and, for `mlp` pooling, a fresh pooler)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    if state is not None:
        tokenizer = AutoTokenizer.from_pretrained(str(ckpt_dir / "model"))
        model = AutoModel.from_pretrained(str(ckpt_dir / "model"), use_safetensors=True)
        _check_pooling(model, params.pooling)
        return model, tokenizer, int(state["added_tokens"])
    torch.manual_seed(params.seed)
    tokenizer = AutoTokenizer.from_pretrained(encoder_path)
    model = AutoModel.from_pretrained(encoder_path)
    _check_pooling(model, params.pooling)
    graphs = (entry.get("graph") for t in triples for role in ROLES
              for lang, entry in (t.get(role) or {}).items() if lang in langs and entry)
    added = extend_vocabulary(tokenizer, model, list(vocabulary(graphs, min_count=params.min_count)))
    if params.pooling == "mlp":
        _reset_pooler(model)
    log.info("MSE-AMR: %d AMR tokens added to %s's vocabulary", added, encoder_path)
    return model, tokenizer, added


def _accumulate_step(model: Any, tokenizer: Any, views: list[dict[str, str]], idx: list[int], micro: int,
                     params: Params, loop: LoopOptions, dev: torch.device, step: int, epoch: int) -> float:
    """Forward and backward of one step's views, micro-batch by micro-batch (gradients accumulated, each loss
    weighted by its share of the step); returns the step's loss."""
    import torch

    step_loss = 0.0
    for start in range(0, len(idx), micro):
        chunk = views[start:start + micro]
        k = len(chunk)
        texts = [v[role] for role in ROLES for v in chunk]  # anchors, then positives, then hard negatives
        with autocast(dev.type):
            emb = (_embed(model, tokenizer, texts, params.pooling, params.max_length, dev)
                   if loop.length_chunk is None else
                   _embed_by_length(model, tokenizer, texts, params.pooling, params.max_length, dev, loop.length_chunk))
        anchor, positive, negative = emb.float().split(k)
        loss = simcse_loss(anchor, positive, negative, params.temperature, symmetric=params.symmetric_loss)
        if not torch.isfinite(loss).item():
            raise NonFiniteLossError(
                "MSE-AMR", f"loss is {loss.item()}", step + 1, sorted(idx[start:start + k]),
                where=f" (epoch {epoch + 1}), micro-batch {start // micro + 1} of {math.ceil(len(idx) / micro)}",
                rows_are="indices of its triples")
        (loss * (k / len(idx))).backward()
        step_loss += loss.item() * k / len(idx)
    return step_loss
