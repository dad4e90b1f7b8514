"""Run directories that load outside amrsim: `SentenceTransformer(run_dir)` / `CrossEncoder(run_dir)` with nothing
but sentence-transformers imported. The run keeps its model in a subdirectory (`encoder/`); the run directory gets
a `modules.json` whose module paths point into it, and a `config_sentence_transformers.json` that also carries what
amrsim knows about the model (S3BERT's aspect layout) under the method's name. Only sentence-transformers' own
module classes are referenced: since sentence-transformers 6.0 any other class needs `trust_remote_code=True`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amrsim.files import atomic_json

# sentence_transformers is imported inside the functions: importing this module must stay cheap

MODULES = "modules.json"
ST_CONFIG = "config_sentence_transformers.json"


def link_run_root(run_dir: Path, sub: str = "encoder", extra: dict[str, Any] | None = None) -> None:
    """Make `run_dir` load as the sentence-transformers model saved in `run_dir/sub`: its modules.json with every
    path prefixed by `sub`, its config plus `extra` (e.g. {"s3bert": {...aspect layout...}})."""
    modules = json.loads((run_dir / sub / MODULES).read_text(encoding="utf-8"))
    for module in modules:
        if not str(module["type"]).startswith("sentence_transformers."):
            raise ValueError(f"{run_dir / sub / MODULES}: module type {module['type']!r} is not a "
                             "sentence-transformers class; it would need trust_remote_code to load")
        module["path"] = f"{sub}/{module['path']}".rstrip("/")
    config_path = run_dir / sub / ST_CONFIG
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    atomic_json(run_dir / ST_CONFIG, {**config, **(extra or {})})
    atomic_json(run_dir / MODULES, modules)  # last: a directory with modules.json is a complete model


def root_config(run_dir: Path) -> dict[str, Any]:
    """The run directory's sentence-transformers config ({} when the run predates portable run directories)."""
    path = run_dir / ST_CONFIG
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def method_config(run_dir: Path, method: str, meta: dict[str, Any]) -> dict[str, Any]:
    """What the run's sentence-transformers config records for `method` (S3BERT: aspects, residual, scales); a run
    saved before that config existed falls back to its model.json."""
    return root_config(run_dir).get(method) or meta


def add_cross_encoder_files(directory: Path, max_length: int) -> None:
    """Turn a transformers sequence-classification directory (one logit) into a sentence-transformers CrossEncoder
    directory: its modules.json and configs (sigmoid activation) as sentence-transformers writes them, plus the
    truncation length amrsim scores with, which sentence-transformers does not save."""
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(directory), device="cpu", max_length=max_length, model_kwargs={"use_safetensors": True})
    model.save(str(directory), create_model_card=False)
    config_path = directory / "sentence_bert_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    atomic_json(config_path, {**config, "max_seq_length": max_length})
