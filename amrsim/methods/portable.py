"""Run directories that load outside amrsim, laid out as Hub tools expect. A method with one transformer (S3BERT,
DuEAM, PEAR) saves it at the run root (config.json, model.safetensors, tokenizer files, modules.json, model.json
`encoder: "."`), so `SentenceTransformer(run_dir)` / `CrossEncoder(run_dir)` load it with nothing but
sentence-transformers imported. A run whose model is more (MSE-AMR, meaning, symmetric or residual PEAR,
pear_fused) gets a modules.json naming amrsim's installed module class (`amrsim.methods.hub`), which
sentence-transformers imports only with `trust_remote_code=True`. Every run root has `modules.json` and
`config_sentence_transformers.json` (`model_type`: SentenceTransformer or CrossEncoder), the latter also carrying
what amrsim knows about the model (S3BERT's aspect layout) under the method's name. Runs written before keep their
model in a subdirectory (`encoder/`, `cross_encoder/`) with a root modules.json pointing into it (`link_run_root`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amrsim.files import atomic_json

# sentence_transformers is imported inside the functions: importing this module must stay cheap

MODULES = "modules.json"
ST_CONFIG = "config_sentence_transformers.json"
ROOT = "."  # model.json `encoder` of a run whose transformer lies at its root


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


def add_root_config(run_dir: Path, extra: dict[str, Any] | None) -> None:
    """Merge `extra` (e.g. {"s3bert": {...aspect layout...}}) into the run root's sentence-transformers config."""
    if extra:
        atomic_json(run_dir / ST_CONFIG, {**root_config(run_dir), **extra})


def save_at_root(model: Any, run_dir: Path, extra: dict[str, Any] | None = None) -> None:
    """Save a sentence-transformers model (SentenceTransformer or CrossEncoder) at the run root, beside what the
    run already holds (model.json, checkpoints, the card: no model card is written), then `extra` into its
    config."""
    model.save(str(run_dir), create_model_card=False)
    add_root_config(run_dir, extra)


# kind -> (amrsim's module class, sentence-transformers model type); named, not imported: amrsim.methods.hub loads
# runs through the method loaders, which import this module
AMRSIM_MODULES = {"encoder": ("amrsim.methods.hub.AmrsimEncoder", "SentenceTransformer"),
                  "cross-encoder": ("amrsim.methods.hub.AmrsimPairScorer", "CrossEncoder")}


def save_amrsim_module(run_dir: Path, kind: str, extra: dict[str, Any] | None = None) -> None:
    """Make `run_dir` load through amrsim's module (`amrsim.methods.hub`): kind "encoder" as a SentenceTransformer
    (MSE-AMR, meaning), "cross-encoder" as a CrossEncoder whose scores are amrsim's as they are (identity
    activation: symmetric or residual PEAR, pear_fused). The two files are what sentence-transformers' own save
    writes for that module (tests/methods/test_portable.py compares them), plus `extra` in the config; the run's
    model files stay where the method wrote them."""
    from importlib.metadata import version

    if kind not in AMRSIM_MODULES:
        raise ValueError(f"unknown model kind {kind!r}: use 'encoder' or 'cross-encoder'")
    module, model_type = AMRSIM_MODULES[kind]
    config: dict[str, Any] = {
        "__version__": {"pytorch": version("torch"), "sentence_transformers": version("sentence-transformers"),
                        "transformers": version("transformers")},
        "default_prompt_name": None, "model_type": model_type, "prompts": {}}
    if kind == "encoder":
        config |= {"prompts": {"document": "", "query": ""}, "similarity_fn_name": "cosine"}
    else:
        config["activation_fn"] = "torch.nn.modules.linear.Identity"
    atomic_json(run_dir / ST_CONFIG, {**config, **(extra or {})})
    atomic_json(run_dir / MODULES, [{"idx": 0, "name": "0", "path": "", "type": module}])
