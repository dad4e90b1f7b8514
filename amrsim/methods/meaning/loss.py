"""The meaning method's losses and the random pairs they compare. Stage 1: meaning (cosine embedding loss of
translations, +1, and random pairs, -1), reconstruction (M(e) + L(e) against e), language ID (cross-entropy on
L(e)) and language similarity (1 - cos of two same-language L(e)); stage 2: MSE of cos(u, v) against gold STS."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from amrsim.methods.meaning.model import MeaningModel

NEGATIVES = ("same_language", "cross_language")


def meaning_loss(m_a: torch.Tensor, m_b: torch.Tensor, target: torch.Tensor, margin: float = 0.0) -> torch.Tensor:
    """Cosine embedding loss: 1 - cos for target +1 (translations), max(0, cos - margin) for target -1 (random)."""
    return F.cosine_embedding_loss(m_a, m_b, target.to(m_a.dtype), margin=margin)


def reconstruction_loss(meaning: torch.Tensor, language: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
    """Squared error of meaning + language against the encoder's embedding, summed over dims, mean over rows: an
    MSE per dimension would shrink the constraint by the embedding size (1/512 for muse) and let both parts drift."""
    return (meaning + language - original).pow(2).sum(-1).mean()


def language_id_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels)


def language_similarity_loss(l_a: torch.Tensor, l_b: torch.Tensor) -> torch.Tensor:
    """Mean 1 - cos of the language embeddings of two sentences in the same language."""
    return (1.0 - F.cosine_similarity(l_a, l_b, dim=-1, eps=1e-8)).mean()


def sts_loss(u: torch.Tensor, v: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """MSE of cos(u, v) against gold similarity in [0, 1]."""
    return F.mse_loss(F.cosine_similarity(u, v, dim=-1, eps=1e-8), gold.to(u.dtype))


def stage1_losses(model: MeaningModel, x_a: torch.Tensor, x_b: torch.Tensor, lang_a: torch.Tensor,
                  lang_b: torch.Tensor, x_same: torch.Tensor, neg: torch.Tensor, margin: float,
                  negatives: str = "same_language", original: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The four losses of a batch of translation pairs (x_a[i], x_b[i]); `x_same[k]` is a random same-language
    sentence of the k-th row of cat(x_a, x_b). `original`: what M + L reconstructs (default cat(x_a, x_b); the frozen
    encoder's vectors when the encoder trains, so the target does not move with it).

    With `same_language` (DREAM's reference code) the meaning loss's random pairs are each sentence and its
    same-language draw, weighted like DREAM's three terms (translations + source randoms + target randoms): pushing
    apart sentences that share a language removes what they share. `cross_language` pairs x_a[i] with x_b[neg[i]],
    a random sentence in the other language; that rewards meaning embeddings that keep languages apart, the opposite
    of the goal (kept to compare: it lowered cross-lingual STS and Tatoeba here)."""
    if negatives not in NEGATIVES:
        raise ValueError(f"negatives '{negatives}' unknown; use one of {', '.join(NEGATIVES)}")
    x = torch.cat([x_a, x_b])
    m, lang_emb = model(x)
    n = len(x_a)
    m_a, m_b = m[:n], m[n:]
    ones = torch.ones(n, device=x.device)
    m_same, l_same = model(x_same)
    if negatives == "same_language":
        meaning = (meaning_loss(m_a, m_b, ones, margin) + meaning_loss(m_a, m_same[:n], -ones, margin)
                   + meaning_loss(m_b, m_same[n:], -ones, margin))
    else:
        meaning = meaning_loss(torch.cat([m_a, m_a]), torch.cat([m_b, m_b[neg]]), torch.cat([ones, -ones]), margin)
    return {"meaning": meaning,
            "reconstruction": reconstruction_loss(m, lang_emb, x if original is None else original),
            "language_id": language_id_loss(model.classifier(lang_emb), torch.cat([lang_a, lang_b])),
            "language_similarity": language_similarity_loss(lang_emb, l_same)}


class SameLanguage:
    """Draws, for each sentence, a random other sentence of its language (itself if it is its language's only)."""

    def __init__(self, langs: np.ndarray):
        self.sorted = np.argsort(langs, kind="stable")
        rank = np.empty_like(self.sorted)
        rank[self.sorted] = np.arange(len(langs))
        self.start = np.searchsorted(langs[self.sorted], langs)
        self.within = rank - self.start  # position inside its language's block of `sorted`
        self.count = np.bincount(langs)[langs]

    def draw(self, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        count = self.count[idx]
        shift = rng.integers(1, np.maximum(count, 2))  # 1..count-1: never itself unless it is alone
        return self.sorted[self.start[idx] + (self.within[idx] + shift) % count]


def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A permutation of range(n) without fixed points when n > 1 (a random cyclic shift of a random order): the
    cross-language random pairs."""
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    order = rng.permutation(n)
    out = np.empty(n, dtype=np.int64)
    out[order] = order[(np.arange(n) + rng.integers(1, n)) % n]
    return out
