"""DuEAM's two encoders: the frozen anchor (token embeddings -> each pair's WMD) and the learner (a sentence encoder;
a trained one is a plain sentence-transformers run that `amrsim.encoders` loads)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from amrsim.methods.dueam.loss import wmd

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

EMPTY_TOKENS = "empty after tokenisation"


@dataclass
class AnchorTargets:
    """WMD per training pair (NaN where skipped), why pairs were skipped (row -> reason), and cache counts."""

    wmd: np.ndarray
    skipped: dict[int, str]
    sentences_embedded: int
    distances_computed: int

    def reasons(self) -> dict[str, int]:
        return dict(Counter(self.skipped.values()))


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


def anchor_targets(anchor: Anchor, texts1: Sequence[str], texts2: Sequence[str], weights: str = "uniform",
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


def load_learner(path: str, normalize: bool = True, max_length: int = 128, device: str = "cpu"
                 ) -> SentenceTransformer:
    """A sentence-transformers directory (or hub id), or a plain transformers directory with mean pooling; unit
    vectors (a Normalize module) when `normalize`."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    local = Path(path)
    if local.is_dir() and not (local / "modules.json").exists():
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


def pooling_of(model: SentenceTransformer) -> str | None:
    """The learner's pooling mode (`mean` expected), for model.json."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    for module in model:
        if isinstance(module, Pooling):
            mode = module.get_config_dict().get("pooling_mode")
            return str(mode) if mode is not None else None
    return None
