"""The training skeleton every method shares: batch slices, the warmup-then-linear LR factor, CUDA-only autocast, a
sentence-transformers forward pass with gradients, one non-finite-loss error, one base-model resolver, model.json,
atomic directory swaps and one checkpoint format (weights, optimizer, scheduler, every RNG, step, settings
fingerprint). Each method keeps only its data, model and loss."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import logging
import math
import os
import pickle
import random
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

from amrsim.console import progress_bar
from amrsim.encoders import split_hf_name
from amrsim.errors import AmrsimError, WarehouseError
from amrsim.evaluate import Evaluator
from amrsim.files import atomic_json, ordinary_modes, own_tree
from amrsim.methods.portable import ROOT, minilm_dir, portable_record, save_at_root

# torch is imported inside the functions: importing this module must stay cheap

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
    """The hyperparameters every method has; the `Trainer` is built from them whole. A method's `Params` subclasses
    it and sets its own defaults in `DEFAULTS` (the field, its type and its bounds stay declared once, here);
    `DECAY_EVERY_PARAMETER` True puts weight decay on biases and norms too (the shared rule spares them)."""

    DEFAULTS: ClassVar[dict[str, Any]] = {}
    DECAY_EVERY_PARAMETER: ClassVar[bool] = False

    batch_size: StrictInt = Field(default=32, ge=2)
    lr: StrictFloat = Field(default=2e-5, gt=0)
    epochs: StrictInt = Field(default=1, ge=1)
    eval_every: StrictInt | None = Field(default=None, ge=1)  # steps between dev evaluations (None: once an epoch)
    max_steps: StrictInt | None = Field(default=None, ge=1)  # stop early, checkpointed (the same run id resumes)
    weight_decay: StrictFloat = Field(default=0.0, ge=0)
    max_grad_norm: StrictFloat = Field(default=1.0, ge=0)  # 0: gradients not clipped
    # linear warmup from 0: whole steps (an integer >= 0) or a fraction (in [0, 1)) of the run's steps, rounded up
    warmup: Annotated[int, Field(strict=True, ge=0)] | Annotated[float, Field(strict=True, ge=0, lt=1)] = 0
    lr_schedule: Literal["linear", "constant"] = "linear"  # after warmup: down to 0 at the last step, or constant
    # each step's batch in this many chunks, their gradients summed (less memory, the same step)
    grad_accumulation_steps: StrictInt = Field(default=1, ge=1)
    seed: StrictInt = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"

    @model_validator(mode="after")
    def _chunks(self) -> Self:
        if self.grad_accumulation_steps > self.batch_size:
            raise ValueError(f"grad_accumulation_steps {self.grad_accumulation_steps} is over batch_size "
                             f"{self.batch_size}: a step's batch cannot be cut into more chunks than it has rows")
        return self

    @classmethod
    def given(cls, args: MethodParams | None = None, **settings: Any) -> Self:
        """`cls` from the fields it shares with `args` (e.g. a method's pipeline params), `settings` in their place;
        the bounds are checked here, once."""
        return cls(**{**(args.model_dump(include=set(cls.model_fields)) if args else {}), **settings})

    def warmup_steps(self, total: int) -> int:
        """The warmup in optimizer steps for a run of `total` steps."""
        return math.ceil(total * self.warmup) if isinstance(self.warmup, float) else self.warmup

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


def linear_warmup(warmup: int, total: int, decay: bool = True) -> Callable[[int], float]:
    """LR factor: 0 -> 1 over `warmup` steps, then linearly to 0 at `total` (sentence-transformers' WarmupLinear);
    without `decay`, 1 after the warmup."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup)) if decay else 1.0

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
        return str(minilm_dir())
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
    meta = {"method": method, "run_id": Path(out_dir).name, "created_at": datetime.now(UTC).isoformat(),
            **portable_record(dict(fields), Path(out_dir))}
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


@dataclass
class EncoderRun:
    """A sentence-transformers model trained into `out_dir` on the `Trainer`: its weights in the checkpoint
    (`student.safetensors`), the best dev weights so far (`best.safetensors`, with `leftovers`: what the method keeps
    beside them) and the finished run."""

    method: str
    model: SentenceTransformer
    out_dir: Path
    device: str
    leftovers: Sequence[Path] = ()

    @property
    def best(self) -> Path:
        return self.out_dir / "best.safetensors"

    def keep_best(self) -> None:
        from safetensors.torch import save_model

        save_model(self.model, str(self.best))

    def checkpoints(self, run_key: Mapping[str, Any], resume: bool, also: Callable[[Path], None] = lambda d: None,
                    **extra: Any) -> Checkpoints:
        """`Checkpoints` of the model's weights and what `also(dir)` writes beside them; `extra`: tensors, restore."""
        from safetensors.torch import load_model, save_model

        def write(directory: Path) -> None:
            save_model(self.model, str(directory / STUDENT))
            also(directory)

        return Checkpoints(self.out_dir, run_key, write, lambda d: load_model(self.model, str(d / STUDENT),
                                                                              device=self.device), resume, **extra)

    def start(self, trainer: Trainer) -> Trainer:
        """Resume, or start fresh without an earlier attempt's best weights; the model in training mode."""
        if trainer.start().resumed_from is None:
            for path in (self.best, *self.leftovers):
                path.unlink(missing_ok=True)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.model.train()
        return trainer

    def finish(self, result: TrainResult, summary: dict[str, Any], meta: Mapping[str, Any],
               extra_meta: Mapping[str, Any] | None, with_dev: bool, root_config: dict[str, Any] | None = None
               ) -> dict[str, Any]:
        """`summary` of an unfinished run; else the finished run (`finish_encoder_run`: the best dev weights when
        `with_dev`, model.json of `meta`, the summary as metrics, the history, `extra_meta`), its directories added."""
        if not result.completed:
            return summary
        meta = {**meta, "metrics": {k: v for k, v in summary.items() if k != "completed"}, "history": result.history,
                **(extra_meta or {})}
        finish_encoder_run(self.out_dir, self.method, self.model, self.best if with_dev else None, meta, root_config,
                           self.leftovers)
        return {**summary, "model_dir": str(self.out_dir), "encoder_dir": str(self.out_dir)}


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
STUDENT = "student.safetensors"  # an `EncoderRun`'s weights in the checkpoint


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


def seeded_batches(seed: int, n: int, batch_size: int) -> Callable[[int], np.ndarray]:
    """`rows(step)` for `Trainer`: batches of `batch_size` rows in each epoch's order, a function of (seed, epoch)
    only, so a resumed run sees the batches an uninterrupted one would."""
    steps_per_epoch = -(-n // batch_size)
    order = functools.lru_cache(maxsize=1)(lambda epoch: np.random.default_rng([seed, epoch]).permutation(n))

    def rows(step: int) -> np.ndarray:
        epoch, k = divmod(step, steps_per_epoch)
        return order(epoch)[k * batch_size:(k + 1) * batch_size]

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

    def save(self, state: Mapping[str, Any], optimizer: Any, scheduler: Any) -> None:
        """Write the checkpoint beside the previous one, then swap: a crash mid-write keeps the previous checkpoint
        whole. `state` must hold `run` (the settings fingerprint) and `step`."""
        import torch

        def write(tmp: Path) -> None:
            self.write_weights(tmp)
            torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng_states(),
                        **self.tensors()}, tmp / TRAIN_STATE)
            atomic_json(tmp / STATE_JSON, dict(state))

        swap_dir(Path(self.out_dir) / CHECKPOINT, write)

    def load(self, optimizer: Any, scheduler: Any) -> dict[str, Any] | None:
        """Resume: the saved progress (state.json), with the weights, optimizer, scheduler, every RNG and the method's
        tensors put back; None when starting fresh (an older checkpoint removed)."""
        ckpt, saved = open_checkpoint(self.out_dir, self.run_key, self.resume)
        if saved is None:
            shutil.rmtree(ckpt, ignore_errors=True)
            return None
        self.read_weights(ckpt)
        train_state = load_state(ckpt / TRAIN_STATE)
        optimizer.load_state_dict(train_state["optimizer"])
        scheduler.load_state_dict(train_state["scheduler"])
        restore_rng(train_state)
        self.restore(train_state)
        return saved


def param_groups(part: Any, weight_decay: float, lr: float | None = None,
                 decay_every: bool = False) -> list[dict[str, Any]]:
    """AdamW groups of `part` (a module's trainable parameters, or parameters): the decayed ones, then biases and
    normalisation weights (every parameter under 2 dimensions) with weight decay 0 (`decay_every`: one group, all
    decayed); each group lists `names` (the module's names, else positions) and, when given, its `lr`."""
    named = ([(n, p) for n, p in part.named_parameters() if p.requires_grad] if hasattr(part, "named_parameters")
             else [(str(i), p) for i, p in enumerate(part)])
    split = [named] if decay_every else [[(n, p) for n, p in named if p.ndim >= 2],
                                         [(n, p) for n, p in named if p.ndim < 2]]
    return [{"params": [p for _, p in g], "names": [n for n, _ in g], "weight_decay": decay,
             **({} if lr is None else {"lr": lr})} for g, decay in zip(split, (weight_decay, 0.0), strict=False)]


@dataclass(frozen=True)
class Part:
    """What a `Trainer` trains besides the rest: a module's trainable parameters (or the parameters given) at `lr`
    (None: the args' lr); `name` says whose gradients in errors."""

    of: Any
    lr: float | None = None
    name: str = ""


@dataclass
class TrainResult:
    """What `Trainer.fit` did: the step reached and whether the run is complete, the history, the best dev score
    and its step, the untrained model's score, and the step a resumed run started from (None: a fresh run)."""

    steps: int
    total_steps: int
    completed: bool
    history: list[dict[str, Any]]
    best_score: float | None
    best_step: int | None
    initial_score: float | None
    resumed_from: int | None

    def summary(self) -> dict[str, Any]:
        return {"completed": self.completed, "steps": self.steps, "total_steps": self.total_steps,
                "resumed_from": self.resumed_from}


@dataclass
class Trainer:
    """The one training loop of every method, built from its `TrainingArgs` whole: AdamW over `trains` (modules,
    parameters or `Part`s) with the shared weight-decay rule (`param_groups`), the warmup and LR schedule, gradient
    accumulation (each step's rows in `grad_accumulation_steps` chunks, or chunks of `micro_batch` rows, each
    chunk's loss weighted by its share of the rows), clipping to `max_grad_norm` (all together, or each `Part` on
    its own with `clip_apart`), `epochs`, `max_steps` and `eval_every`. Batch `rows(step)`, named `losses(rows)` (the
    first, or `objective(losses)`, optimised); a NaN/inf loss or gradient norm stops with NonFiniteLossError naming
    the step and the rows. Every `eval_every` steps (default: once an epoch) and at the last step: the mean losses
    since the last report, the `evaluator`'s dev score, `keep_best()` when it is the best so far, a history entry
    (`entry(step, means, score)`) and, with `checkpoints`, a checkpoint (also every `checkpoint_every` steps).
    `max_steps` stops early; with `checkpoints`, as an interruption would: checkpointed with the loss sums since the
    last report, no extra dev score; a resumed run (same `run_key`) continues exactly where the checkpoint was, to
    the weights and history of an uninterrupted run. `step_losses`: each step's loss kept in `state["losses"]`."""

    method: str
    args: TrainingArgs
    trains: Sequence[Any]
    steps_per_epoch: int
    rows: Callable[[int], np.ndarray]
    losses: Callable[[np.ndarray], Mapping[str, torch.Tensor]]
    objective: Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None = None
    checkpoint_every: int | None = None
    evaluator: Evaluator | None = None
    score_at_start: bool = True  # False: no dev score of the untrained model (`initial_score` stays None)
    keep_best: Callable[[], None] | None = None
    entry: Callable[[int, dict[str, float], float | None], dict[str, Any]] | None = None
    weigh_by_rows: bool = False  # report means weighted by batch size (else the mean over steps)
    checkpoints: Checkpoints | None = None
    row_ids: Callable[[np.ndarray], Iterable[int]] = lambda rows: rows
    rows_are: str = "batch rows (indices into the training pairs)"
    micro_batch: int | None = None
    clip_apart: bool = False
    step_losses: bool = False
    state: dict[str, Any] = field(default_factory=dict)
    resumed_from: int | None = None

    def __post_init__(self) -> None:
        import torch

        parts = [t if isinstance(t, Part) else Part(t) for t in self.trains]
        groups = [g for p in parts for g in param_groups(p.of, self.args.weight_decay, p.lr,
                                                         type(self.args).DECAY_EVERY_PARAMETER)]
        self.optimizer = torch.optim.AdamW([{k: v for k, v in g.items() if k != "names"} for g in groups],
                                           lr=self.args.lr)
        # clipped in the parts' own order
        self.clipped = [(p.name, [q for g in param_groups(p.of, 0.0, decay_every=True) for q in g["params"]])
                        for p in parts]
        if not self.clip_apart:
            self.clipped = [("", [q for _, params in self.clipped for q in params])]
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, linear_warmup(
            self.args.warmup_steps(self.total_steps), self.total_steps, self.args.lr_schedule == "linear"))

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.args.epochs

    @property
    def stop_at(self) -> int:
        return min(self.total_steps, self.args.max_steps or self.total_steps)

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
        saved = self.checkpoints and self.checkpoints.load(self.optimizer, self.scheduler)
        if saved:
            self.state = {**self.state, **saved}
            self.resumed_from = int(saved["step"])
            log.info("%s: resuming %s from step %d", self.method, self.checkpoints.out_dir, self.resumed_from)
        return self

    def fit(self) -> TrainResult:
        """Train from the current step to `stop_at` (`state` holds the history and the best)."""
        self.start()
        if self.resumed_from is None and self.state["step"] == 0 and self.evaluator is not None and self.score_at_start:
            # before the steps' progress: a dev set's score can take minutes on a CPU
            log.info("%s: scoring the starting model on the dev set, then %d steps", self.method, self.stop_at)
            self.state["initial_score"] = self.evaluator()
        eval_every = self.args.eval_every or self.steps_per_epoch
        # the loss sums since the last report: a checkpoint between reports keeps them, so a resumed run reports
        # the same means an uninterrupted one does
        window = self.state.pop("window", None) or {"sums": {}, "count": 0}
        sums: dict[str, float] = dict(window["sums"])
        count = int(window["count"])
        step = int(self.state["step"])
        with progress_bar(self.stop_at, f"train {self.method}", unit="steps", least=2) as advance:
            if step:  # resumed from a checkpoint: those steps are not run again
                advance.plan(self.stop_at - step, step)
            step = self._steps(step, eval_every, sums, count, advance)
        return TrainResult(step, self.total_steps, self.completed, self.state["history"], self.state["best_score"],
                           self.state["best_step"], self.state["initial_score"], self.resumed_from)

    def _steps(self, step: int, eval_every: int, sums: dict[str, float], count: int,
               advance: Callable[[int], None]) -> int:
        """`fit`'s loop from `step` to `stop_at`, with the loss sums since the last report; returns the last step."""
        while step < self.stop_at:
            rows = self.rows(step)
            values = self.train_step(step, rows)
            step += 1
            weight = len(rows) if self.weigh_by_rows else 1
            for name, value in values.items():
                sums[name] = sums.get(name, 0.0) + value * weight
            count += weight
            self.state["step"] = step
            if self.step_losses:
                self.state.setdefault("losses", []).append(values["total" if self.objective else next(iter(values))])
            # with checkpoints, max_steps stops as an interruption would: no dev score an uninterrupted run would not
            # take (the best model and the history stay the same); without, it is where the run ends
            last = step == self.total_steps or (step == self.stop_at and self.checkpoints is None)
            if step % eval_every == 0 or last:
                self.report(step, {name: total / max(count, 1) for name, total in sums.items()})
                sums, count = {}, 0
            elif step == self.stop_at or (self.checkpoint_every and step % self.checkpoint_every == 0):
                self.save(window={"sums": sums, "count": count})  # between reports: the window's sums kept
            advance(1)
        return step

    def train_step(self, step: int, rows: np.ndarray) -> dict[str, float]:
        """One optimizer step on `rows`, chunk by chunk (gradient accumulation); returns each loss's value."""
        import torch

        size = self.micro_batch or -(-self.args.batch_size // self.args.grad_accumulation_steps)
        chunks = [rows] if len(rows) <= size else [rows[i:i + size] for i in range(0, len(rows), size)]
        self.optimizer.zero_grad(set_to_none=True)
        values: dict[str, float] = {}
        for i, chunk in enumerate(chunks):
            share = 1.0 if len(chunks) == 1 else len(chunk) / len(rows)
            parts = self.losses(chunk)
            loss = self.objective(parts) if self.objective is not None else next(iter(parts.values()))
            if not torch.isfinite(loss):
                where = "" if len(chunks) == 1 and self.micro_batch is None else (
                    f" (epoch {step // self.steps_per_epoch + 1}), micro-batch {i + 1} of {len(chunks)}")
                raise NonFiniteLossError(self.method, f"loss is {float(loss.detach())}", step + 1,
                                         self.row_ids(chunk), where=where, rows_are=self.rows_are)
            if loss.requires_grad:
                (loss if share == 1.0 else loss * share).backward()
            for name, value in (dict(parts) if self.objective is None else {**parts, "total": loss}).items():
                values[name] = values.get(name, 0.0) + float(value.detach()) * share
        if self.args.max_grad_norm > 0:
            for name, params in self.clipped:
                norm = torch.nn.utils.clip_grad_norm_(params, self.args.max_grad_norm)
                if not torch.isfinite(norm):
                    raise NonFiniteLossError(self.method, f"{name + ' ' if name else ''}gradient norm is "
                                             f"{float(norm.detach())}", step + 1, self.row_ids(rows),
                                             rows_are=self.rows_are)
        self.optimizer.step()
        self.scheduler.step()
        return values

    def report(self, step: int, means: dict[str, float]) -> None:
        """Evaluate, keep the best, add a history entry, checkpoint."""
        score = None if self.evaluator is None else self.evaluator()
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
            self.checkpoints.save({**self.state, "window": window} if window else self.state, self.optimizer,
                                  self.scheduler)
