"""MSE-AMR's training on the shared `Trainer`: the AMR encoder learns supervised SimCSE on mixed views of NLI triples,
micro-batch by micro-batch. Where this follows the paper and its released code: docs/methods/mse_amr.md."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amrsim.amr.linearize import vocabulary
from amrsim.encoders import resolve_device
from amrsim.evaluate import DevScore
from amrsim.files import own_tree
from amrsim.methods.mse_amr.data import ENGLISH, ROLES, Triple, mixed_view, text_langs
from amrsim.methods.mse_amr.loss import simcse_loss
from amrsim.methods.mse_amr.model import check_pooling, embed_by_length, extend_vocabulary, reset_pooler
from amrsim.methods.mse_amr.params import Params
from amrsim.methods.portable import save_amrsim_module
from amrsim.methods.training import (
    CHECKPOINT,
    MODEL_JSON,
    Checkpoints,
    Part,
    Trainer,
    TrainResult,
    autocast,
    base_model_path,
    load_sentence_encoder,
    open_checkpoint,
    recover_dir,
    seeded_batches,
    st_embed,
    swap_dir,
    write_model_json,
)

# torch, transformers are imported inside the functions: the loader registry imports this package

if TYPE_CHECKING:
    import numpy as np
    import torch

log = logging.getLogger(__name__)


# the settings a checkpoint must agree on to be resumed (with the data, the languages and the micro-batch)
SETTINGS = {"lr", "batch_size", "max_length", "epochs", "min_count", "p_graph", "temperature", "symmetric_loss",
            "pooling", "warmup", "weight_decay", "max_grad_norm", "train_base", "base_lr",
            "base_train_embedding"}
TEXT_ENCODER = "text_encoder"  # train_base: the trained base, a sentence-transformers directory of the run
BASE_WEIGHTS = "text_encoder.safetensors"  # train_base: the base's weights in the checkpoint and the best model
LENGTH_CHUNK = 32  # texts run through the model in length-sorted chunks (`embed_by_length`)


class TripleSteps:
    """A step of MSE-AMR for `Trainer`: `rows(step)` its triples (each epoch's seeded order) and one `mixed_view` of
    each, drawn from (seed, step); the Trainer runs them micro-batch by micro-batch (`params.micro`,
    gradient accumulation), each weighted by its share of the step: an anchor is contrasted with its micro-batch's
    2 x micro-batch candidates (`__call__`: their loss).

    With a `base` (train_base): the same micro-batches also train the base sentence encoder with the same loss on
    text views (`text_view`, drawn from (seed, step) apart from the graph views, so those stay what a frozen-base
    run draws); the loss is the sum, and each model's gradients are clipped on their own."""

    def __init__(self, model: Any, tokenizer: Any, triples: Sequence[Triple], langs: Sequence[str], params: Params,
                 device: torch.device, base: Any = None, text_langs: Sequence[str] = ()):
        self.model, self.tokenizer, self.triples, self.langs, self.params = model, tokenizer, triples, langs, params
        self.device, self.base, self.text_langs = device, base, tuple(text_langs)
        self.batches = seeded_batches(params.seed, len(triples), params.batch_size)
        self.views: dict[int, tuple[dict[str, str], dict[str, str] | None]] = {}

    def rows(self, step: int) -> np.ndarray:
        """The step's triples; their views (and text views) drawn."""
        rows, p = self.batches(step), self.params
        rng = random.Random(f"mse_amr:{p.seed}:{step}")
        views = [mixed_view(self.triples[i], self.langs, rng, p.p_graph) for i in rows]
        text_rng = random.Random(f"mse_amr-text:{p.seed}:{step}")
        texts = [self.text_view(self.triples[i], text_rng) if self.base is not None else None for i in rows]
        self.views = {int(i): (v, t) for i, v, t in zip(rows, views, texts, strict=True)}
        return rows

    def save(self, path: Path, base: bool = True) -> None:
        """The AMR encoder and its tokenizer in `path`; with `base`, a trained base's weights (`BASE_WEIGHTS`)."""
        self.model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))
        if base and self.base is not None:
            from safetensors.torch import save_model

            save_model(self.base, str(path / BASE_WEIGHTS))

    def read_base(self, path: Path) -> None:
        """The base's weights that `save` wrote in `path` (a checkpoint or the best model)."""
        from safetensors.torch import load_model

        if self.base is not None:
            load_model(self.base, str(path / BASE_WEIGHTS), device=str(self.device))

    def text_view(self, example: Triple, rng: random.Random) -> dict[str, str]:
        """Role -> the text the base reads: each sentence in a language drawn uniformly from `text_langs` where it
        has text (the paper's per-sentence mixing, on texts)."""
        view: dict[str, str] = {}
        for role in ROLES:
            per_lang = example.get(role) or {}
            options = [lg for lg in self.text_langs if (per_lang.get(lg) or {}).get("text")]
            if not options:
                raise ValueError(f"train_base: '{role}' has no text in any of {list(self.text_langs)}")
            view[role] = str(per_lang[rng.choice(options)]["text"])
        return view

    def __call__(self, rows: np.ndarray) -> dict[str, torch.Tensor]:
        """The contrastive loss of a micro-batch (anchors, positives, hard negatives), and its base's."""
        views, p = [self.views[int(i)] for i in rows], self.params
        with autocast(self.device.type):
            emb = embed_by_length(self.model, self.tokenizer, [v[role] for role in ROLES for v, _ in views], p.pooling,
                                  p.max_length, self.device, LENGTH_CHUNK)
        loss = self._loss(emb, len(rows))
        if self.base is None:
            return {"loss": loss}
        with autocast(self.device.type):
            emb = st_embed(self.base, [t[role] for role in ROLES for _, t in views], str(self.device))
        text_loss = self._loss(emb, len(rows))
        return {"loss": loss + text_loss, "graph_loss": loss, "text_loss": text_loss}

    def _loss(self, emb: torch.Tensor, k: int) -> torch.Tensor:
        anchor, positive, negative = emb.float().split(k)
        return simcse_loss(anchor, positive, negative, self.params.temperature, symmetric=self.params.symmetric_loss)


def train_mse_amr(triples: Sequence[Triple], out_dir: str | Path, params: Params, *,
                  langs: Sequence[str] | None = None, dev_eval: Callable[..., float | None] | None = None,
                  resume: bool = True, extra_meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train the AMR encoder of MSE-AMR from `params.encoder` (`minilm`, `hf:<id|path>`, a directory) on NLI
    `triples` (role -> language -> {"text", "graph"}); writes `out_dir/amr_encoder/` (safetensors + extended
    tokenizer) and `out_dir/model.json` (`extra_meta`, what the data was, merged in). `langs`: the languages the
    data has (default `params.langs`, else English).

    Steps as `TripleSteps`, on the shared `Trainer` (checkpoints every `eval_every` steps, resumed when `resume`;
    views and data order derive from `seed` and the step, so a resumed run sees what an uninterrupted one would).
    `dev_eval(model, tokenizer) -> score` (higher is better, None when undefined; embed with `encode_with`) runs
    every `eval_every` steps and at the end, and the best model is the one written; without it, the last. bf16
    autocast on CUDA only.

    `params.train_base`: the base encoder (`params.base_encoder`) trains beside it on text views in every language
    a triple has text in, is given to `dev_eval` as a third argument, and is written as `out_dir/text_encoder/`
    (sentence-transformers)."""
    import torch

    langs = tuple(langs if langs is not None else params.langs or (ENGLISH,))
    if not triples or not langs:
        raise ValueError(f"train_mse_amr: {'no triples' if not triples else 'langs is empty'}")
    micro, encoder_path, out_dir = params.micro, base_model_path(params.encoder), Path(out_dir)
    own_tree(out_dir)  # no link or special file that the savers would write through
    out_dir.mkdir(parents=True, exist_ok=True)
    # lang_weights: once a setting of experiments, always None now; kept so that earlier checkpoints resume
    run_key = _fingerprint(triples, encoder_path=encoder_path, langs=list(langs), micro_batch=micro,
                           seed=params.seed, lang_weights=None, **params.model_dump(include=SETTINGS))
    best_dir = out_dir / "best_model"
    recover_dir(best_dir)
    _, saved = open_checkpoint(out_dir, run_key, resume)
    if saved is None:
        shutil.rmtree(best_dir, ignore_errors=True)
    model, tokenizer, added = _start_model(encoder_path, triples, langs, params, out_dir / CHECKPOINT, saved)
    device = torch.device(resolve_device(params.device))
    model.to(device).train()
    base, parts = None, [Part(model, params.lr, "AMR encoder")]
    if params.train_base:
        with torch.random.fork_rng(devices=[]):  # building it draws no numbers the AMR encoder's dropout would
            base = load_sentence_encoder(params.base_encoder if params.base_encoder == "muse" else
                                         base_model_path(params.base_encoder), False, params.max_length,
                                         str(device), params.base_train_embedding)
        base.train()
        parts.append(Part(base, params.base_lr or params.lr, "base encoder"))
    steps = TripleSteps(model, tokenizer, triples, langs, params, device, base,
                        text_langs(triples) if base is not None else ())

    def score() -> float:
        trained = [m for m in (model, base) if m is not None]
        for m in trained:
            m.eval()
        with torch.no_grad():
            value = dev_eval(model, tokenizer, *trained[1:])  # type: ignore[misc]
        for m in trained:
            m.train()
        return math.nan if value is None else float(value)  # NaN: never the best

    # the AMR encoder was read with its tokenizer (`_start_model`); the base's weights are read here
    checkpoints = Checkpoints(out_dir, run_key, lambda ckpt: steps.save(ckpt / "model"),
                              lambda ckpt: steps.read_base(ckpt / "model"), resume)
    trainer = Trainer(
        "MSE-AMR", params, parts, math.ceil(len(triples) / params.batch_size), steps.rows, steps,
        checkpoint_every=params.eval_every, evaluator=DevScore(score) if dev_eval is not None else None,
        score_at_start=False, keep_best=lambda: swap_dir(best_dir, steps.save), checkpoints=checkpoints,
        row_ids=sorted, rows_are="indices of its triples", micro_batch=micro, clip_apart=True,
        step_losses=True).start()
    trainer.state.setdefault("losses", [])
    trainer.state["added_tokens"] = added
    result = trainer.fit()
    if dev_eval is not None and result.completed and (not result.history or result.history[-1]["step"] != result.steps):
        trainer.report(result.steps, {})  # a resumed run with nothing left to train, checkpointed after its last score
    return _write_run(out_dir, params, steps, trainer, result, encoder_path, added, dev_eval is not None, extra_meta)


def _write_run(out_dir: Path, params: Params, steps: TripleSteps, trainer: Trainer, result: TrainResult,
               encoder_path: str, added: int, has_dev: bool, extra_meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """The best (else the last) weights as amr_encoder/, the root's sentence-transformers files (amrsim's module),
    model.json; a completed run's checkpoint removed unless `keep_checkpoint`. Returns train_mse_amr's summary."""
    best_dir, enc_dir = out_dir / "best_model", out_dir / "amr_encoder"
    state, step, base, micro, device = trainer.state, result.steps, steps.base, params.micro, steps.device
    best_step, losses = state["best_step"], state["losses"]
    if best_step is not None and best_dir.is_dir():
        swap_dir(enc_dir, lambda path: shutil.copytree(best_dir, path, dirs_exist_ok=True,
                                                       ignore=shutil.ignore_patterns(BASE_WEIGHTS)))
        steps.read_base(best_dir)
    else:
        swap_dir(enc_dir, lambda path: steps.save(path, base=False))
    if base is not None:
        swap_dir(out_dir / TEXT_ENCODER, lambda path: base.save(str(path)))
    best_dev = state["best_score"] if best_step is not None else None
    run_params = {
        "encoder_path": encoder_path, **params.model_dump(include=SETTINGS | {"max_steps", "eval_every"}),
        "micro_batch": micro, "grad_accum": math.ceil(params.batch_size / micro), "candidates_per_anchor": 2 * micro,
        "lang_weights": None, "length_chunk": LENGTH_CHUNK, "n_triples": len(steps.triples), "device": device.type,
        "bf16": device.type == "cuda"}
    metrics = {
        "steps": step, "total_steps": result.total_steps, "completed": result.completed,
        "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
        "best_dev": best_dev, "best_step": best_step, "selected_step": best_step if best_step is not None else step,
        "dev_history": [[e["step"], e["dev"]] for e in state["history"]] if has_dev else [],
    }
    save_amrsim_module(out_dir, "encoder")  # `SentenceTransformer(out_dir, trust_remote_code=True)` loads it
    write_model_json(out_dir, "mse_amr", {
        "amr_encoder": enc_dir.name, "base_encoder": params.base_encoder, "integration": params.integration,
        "pooling": params.pooling, "max_length": params.max_length, "langs": list(steps.langs), "params": run_params,
        **({"text_encoder": TEXT_ENCODER, "text_langs": list(steps.text_langs)} if base is not None else {}),
        "seed": params.seed, "added_tokens": added, "metrics": metrics, **dict(extra_meta or {}),
    })
    if result.completed and not params.keep_checkpoint:
        shutil.rmtree(out_dir / CHECKPOINT, ignore_errors=True)
        shutil.rmtree(best_dir, ignore_errors=True)
    return {"run_dir": str(out_dir), "model_json": str(out_dir / MODEL_JSON), "steps": step,
            "total_steps": result.total_steps, "completed": result.completed, "resumed_from": result.resumed_from,
            "losses": losses, "best_dev": best_dev, "best_step": best_step, "added_tokens": added}


def _fingerprint(triples: Sequence[Triple], **settings: Any) -> dict[str, Any]:
    """The run key of a checkpoint: `settings`, the number of triples and a hash of up to 64 evenly spaced ones
    (hashing every triple would cost a pass over the data)."""
    n = len(triples)
    h = hashlib.sha256()
    for i in sorted({(k * n) // 64 for k in range(64)} if n > 64 else range(n)):
        h.update(json.dumps(triples[i], sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return {**settings, "n_triples": n, "triples_sample_sha256": h.hexdigest()}


def _start_model(encoder_path: str, triples: Sequence[Triple], langs: Sequence[str], params: Params,
                 ckpt_dir: Path, saved: Mapping[str, Any] | None) -> tuple[Any, Any, int]:
    """(model, tokenizer, number of added AMR tokens): from the checkpoint when resuming, else `encoder_path` with
    its vocabulary extended by the training graphs' frequent tokens (and, for `mlp` pooling, a fresh pooler)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    if saved is None:
        torch.manual_seed(params.seed)
    path = encoder_path if saved is None else str(ckpt_dir / "model")
    tokenizer = AutoTokenizer.from_pretrained(path)
    # a checkpoint is amrsim's own: safetensors only, never a pickled pytorch_model.bin
    model = AutoModel.from_pretrained(path, use_safetensors=True if saved is not None else None)
    check_pooling(model, params.pooling)
    if saved is not None:
        return model, tokenizer, int(saved["added_tokens"])
    graphs = (entry.get("graph") for t in triples for role in ROLES
              for lang, entry in (t.get(role) or {}).items() if lang in langs and entry)
    added = extend_vocabulary(tokenizer, model, list(vocabulary(graphs, min_count=params.min_count)))
    if params.pooling == "mlp":
        reset_pooler(model)
    log.info("MSE-AMR: %d AMR tokens added to %s's vocabulary", added, encoder_path)
    return model, tokenizer, added
