"""`meaning:<run>` at encode time: the frozen base encoder, then the run's meaning head (and STS head, when stage 2
was kept). `load_trained` is its `amrsim.methods.loaders` entry; torch loads with the run, not with this module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.encoders import Encoder, EncoderLoader, TrainedModel, run_base_encoder
from amrsim.encoders.cache import embed_sentences, read_embeddings

if TYPE_CHECKING:
    from amrsim.methods.meaning.model import MeaningModel, StsHead


@dataclass
class MeaningEncoder:
    name: str
    model_id: str
    base_name: str | None  # None: the encoder the run trained, whose vectors are not cached apart from the run's
    base: Encoder
    model: MeaningModel
    head: StsHead | None
    dim: int
    call_batch: int  # texts per encode() call: the base encoder's (mUSE prefers large calls)

    def heads(self, base: np.ndarray) -> np.ndarray:
        """Meaning (then stage-2) embeddings of base-encoder vectors."""
        from amrsim.methods.meaning.model import apply_module, meaning_of

        base = np.asarray(base, dtype=np.float32)
        if not len(base):
            return np.zeros((0, self.dim), np.float32)
        out = meaning_of(self.model, base)
        return apply_module(self.head, out, "cpu") if self.head is not None else out

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.heads(self.base.encode(list(texts)))

    def encode_sentences(self, wh: Any, dataset: str, frame: Any) -> tuple[np.ndarray, None]:
        """Warehouse rows (key, text): the base encoder's vectors through the dataset's embeddings cache (computed
        once, shared with evaluations of the base encoder itself), then the heads."""
        if self.base_name is None:
            return self.heads(self.base.encode(frame["text"].to_list())), None
        embed_sentences(wh, dataset, self.base_name, frame, encoder=self.base)
        return self.heads(read_embeddings(wh, dataset, self.base_name, frame["key"].to_list())), None


def load_trained(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
                 load: EncoderLoader) -> MeaningEncoder:
    """The meaning run `model` over its base encoder (loaded through `load`)."""
    from amrsim.methods.meaning.model import load_model

    net, head, meta = load_model(model.path)
    base, base_name = run_base_encoder(model, name, batch_size, device, models_root, load)
    if int(base.dim) != int(meta["dim"]):
        raise ValueError(f"{model.path}/model.json: dim {meta['dim']} but encoder '{base_name}' gives {base.dim}")
    return MeaningEncoder(name, model.model_id, base_name, base, net, head, int(meta["dim"]),
                          int(getattr(base, "call_batch", batch_size)))
