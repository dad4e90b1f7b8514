"""GPU throughput of amrlib-style text-to-AMR generation, without the released weights.

`bench_parse` builds a randomly initialised `BartForConditionalGeneration` with the shapes of bart-base or
bart-large (the backbones of amrlib's parse_xfm models) and times beam search the way `AmrlibParser` runs it:
longest-first batches, ``num_return_sequences = num_beams``. Random weights would stop at a random length, so every
sentence generates exactly ``out_tokens`` tokens (``min_new_tokens = max_new_tokens``): the figure is the cost of a
given output length, not of a model's habits. A real parse of a 15-25 word sentence is ~80-200 linearised-graph
BPE tokens. Inputs are random token ids with lengths drawn like English STS sentences (median ~20 BPE tokens).

It also times a naive one-sentence-at-a-time loop over a few sentences and reports the ratio. The CLI's
``amrsim bench parse --device cpu --tiny`` runs the mechanics on a CPU with a tiny config.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

from amrsim.generation import budget_batches, resolve_dtype, token_budget

# transformers, torch are imported inside the functions: importing this module must stay cheap

__all__ = ["BART_SHAPES", "bench_parse", "synthetic_lengths"]

# Shapes of facebook/bart-base and facebook/bart-large (their config.json). amrlib's parse_xfm models keep BART's
# vocabulary (50265 tokens; they add no AMR tokens, the graph is written with ordinary BPE). SPRING-style parsers add
# ~3k AMR tokens (~53k): pass config_overrides={"vocab_size": 53000} to time that; it changes little.
BART_SHAPES: dict[str, dict[str, int]] = {
    "base": {"d_model": 768, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 12,
             "decoder_attention_heads": 12, "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072},
    "large": {"d_model": 1024, "encoder_layers": 12, "decoder_layers": 12, "encoder_attention_heads": 16,
              "decoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096},
}
VOCAB_SIZE = 50265
MAX_POSITIONS = 1024
_N_SPECIAL = 4  # <s> <pad> </s> <unk>: ids 0-3, never drawn as input words


def synthetic_lengths(n: int, seed: int = 0, lo: int = 6, hi: int = 96) -> list[int]:
    """Input lengths in BPE tokens (with <s> and </s>): log-normal, median ~20, clipped to [lo, hi]."""
    rng = random.Random(seed)
    return [max(lo, min(hi, round(math.exp(rng.gauss(math.log(20), 0.45))))) for _ in range(n)]


def _config(size: str, overrides: dict[str, Any] | None):
    from transformers import BartConfig

    if size not in BART_SHAPES:
        raise ValueError(f"size '{size}': use base or large")
    values: dict[str, Any] = {**BART_SHAPES[size], "vocab_size": VOCAB_SIZE, "max_position_embeddings": MAX_POSITIONS,
                              "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 2,
                              # no forced </s>: it would fight min_new_tokens at the last step
                              "forced_bos_token_id": 0, "forced_eos_token_id": None, "dropout": 0.0,
                              "attention_dropout": 0.0, "activation_dropout": 0.0}
    values.update(overrides or {})
    return BartConfig(**values)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def bench_parse(device: str = "cuda", size: str = "base", n_sentences: int = 1000, batch_size: int = 32,
                out_tokens: int = 128, num_beams: int = 4, config_overrides: dict[str, Any] | None = None,
                n_naive: int = 8, dtype: str = "float32", seed: int = 0, batch_budget: int | str | None = None,
                free_memory: int | None = None, cache_implementation: str | None = None) -> dict[str, Any]:
    """Sentences/s and output tokens/s of batched beam search on a BART-shaped random model; see the module doc.

    ``out_tokens`` and input lengths are clipped to the model's positions (a tiny config has few). ``dtype``:
    float32 (what amrlib runs), float16 or bfloat16. `batch_budget` ("auto": from free memory, as AmrlibParser sizes
    them, or a number) batches by token budget instead of `batch_size`; `free_memory` stands in for the device's
    free bytes (CPU mechanics). `cache_implementation` ("static": transformers' fixed-shape KV cache, which lets
    the decoder step be compiled) is passed to generation."""
    import torch
    import transformers
    from transformers import BartForConditionalGeneration

    if n_sentences < 1 or batch_size < 1 or out_tokens < 1 or num_beams < 1:
        raise ValueError("n_sentences, batch_size, out_tokens and num_beams must be >= 1")
    torch.manual_seed(seed)
    config = _config(size, config_overrides)
    torch_dtype = resolve_dtype(dtype, device)
    model = BartForConditionalGeneration(config).to(device=device, dtype=torch_dtype).eval()
    params = sum(p.numel() for p in model.parameters())

    max_len = config.max_position_embeddings - 2
    out_len = min(out_tokens, max_len)
    lengths = [min(n, max_len) for n in synthetic_lengths(n_sentences, seed)]
    gen = torch.Generator().manual_seed(seed)
    vocab = config.vocab_size

    def inputs(lens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(lens)
        ids = torch.full((len(lens), width), config.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(lens), width), dtype=torch.long)
        for r, n in enumerate(lens):  # <s> words </s>, right-padded as the BART tokenizer does
            ids[r, 0], ids[r, n - 1] = config.bos_token_id, config.eos_token_id
            ids[r, 1:n - 1] = torch.randint(_N_SPECIAL, vocab, (n - 2,), generator=gen)
            mask[r, :n] = 1
        return ids.to(device), mask.to(device)

    gen_kwargs = {"num_beams": num_beams, "num_return_sequences": num_beams, "early_stopping": num_beams > 1,
                  "min_new_tokens": out_len, "max_new_tokens": out_len, "no_repeat_ngram_size": 0,
                  "do_sample": False}
    if cache_implementation:
        gen_kwargs["cache_implementation"] = cache_implementation

    @torch.inference_mode()
    def run(batches: list[list[int]]) -> tuple[float, int]:
        _sync(device)
        t0 = time.perf_counter()
        width = 0
        for lens in batches:
            ids, mask = inputs(lens)
            out = model.generate(input_ids=ids, attention_mask=mask, **gen_kwargs)
            width = max(width, out.shape[1])
        _sync(device)
        return time.perf_counter() - t0, width

    order = sorted(lengths, reverse=True)  # longest first, as AmrlibParser batches
    budget = token_budget(batch_budget, config, torch_dtype, device, free_memory)
    batches = ([[lengths[i] for i in b] for b in budget_batches(lengths, out_len, num_beams, budget.tokens)]
               if budget else [order[i:i + batch_size] for i in range(0, len(order), batch_size)])
    run(batches[:1])  # warm-up: kernels, allocator, the largest batch
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
    seconds, width = run(batches)
    naive_lens = lengths[:max(1, min(n_naive, n_sentences))]
    naive_seconds, _ = run([[n] for n in naive_lens])

    batched_rate = n_sentences / seconds
    naive_rate = len(naive_lens) / naive_seconds
    result: dict[str, Any] = {
        "device": device,
        "device_name": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
        "model": f"bart-{size} shapes, random weights" + (" (config overridden)" if config_overrides else ""),
        "params_m": round(params / 1e6, 3),
        "dtype": dtype,
        "n_sentences": n_sentences,
        "batch_size": batch_size if budget is None else max(len(b) for b in batches),
        "batch_budget": None if budget is None else budget.tokens,
        "cache_implementation": cache_implementation,
        "budget": None if budget is None else budget.source,
        "batches": len(batches),
        "num_beams": num_beams,
        "out_tokens": out_len,
        "out_tokens_requested": out_tokens,
        "fixed_length_ok": width == out_len + 1,  # decoder start token + exactly out_len generated
        "input_tokens_mean": round(sum(lengths) / len(lengths), 1),
        "input_tokens_max": max(lengths),
        "seconds": round(seconds, 3),
        "sentences_per_s": round(batched_rate, 2),
        "output_tokens_per_s": round(n_sentences * out_len / seconds, 1),  # tokens of the returned best graph
        "beam_tokens_per_s": round(n_sentences * out_len * num_beams / seconds, 1),
        "naive": {"n_sentences": len(naive_lens), "seconds": round(naive_seconds, 3),
                  "sentences_per_s": round(naive_rate, 2)},
        "speedup_vs_naive": round(batched_rate / naive_rate, 2),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    if device.startswith("cuda"):
        result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    return result
