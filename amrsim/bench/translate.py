"""GPU throughput benchmark for the marian backend: length-sorted batched beam search vs one sentence at a time.

Why: the translation stage's cost is generation, and its speed depends on architecture, batch, beams and output
length, not on the trained weights. So the benchmark builds an OPUS-MT en-de-shaped model with random weights
(no download, runs on an isolated GPU box), feeds synthetic token ids of realistic sentence lengths, and forces
a FIXED output length (min_new_tokens = max_new_tokens) so random weights cannot end early and runs compare
like for like. It uses the same length-sorted batching and padding as `MarianTranslator`.

    python -m amrsim.bench.translate --device cuda --n-sentences 2000 --batch-size 64 --out-tokens 64
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from amrsim.generation import (
    budget_batches,
    length_sorted_batches,
    pad_batch,
    resolve_device,
    resolve_dtype,
    token_budget,
)

# torch, transformers are imported inside the functions: importing this module must stay cheap

# Helsinki-NLP/opus-mt-en-de config.json (https://huggingface.co/Helsinki-NLP/opus-mt-en-de/blob/main/config.json):
# a transformer-base Marian, 6+6 layers, d_model 512, 8 heads, FFN 2048, swish, shared 58101-piece vocab with
# <pad> = 58100 (also the decoder start), </s> = 0, scaled embeddings and static (sinusoidal) positions.
# Its generation settings (num_beams 4, bad_words_ids [[58100]]) are applied in `bench_translate`.
OPUS_MT_EN_DE: dict[str, Any] = dict(
    vocab_size=58101,
    decoder_vocab_size=58101,
    d_model=512,
    encoder_layers=6,
    decoder_layers=6,
    encoder_attention_heads=8,
    decoder_attention_heads=8,
    encoder_ffn_dim=2048,
    decoder_ffn_dim=2048,
    activation_function="swish",
    max_position_embeddings=512,
    scale_embedding=True,
    static_position_embeddings=True,
    share_encoder_decoder_embeddings=True,
    pad_token_id=58100,
    decoder_start_token_id=58100,
    eos_token_id=0,
    forced_eos_token_id=0,
    dropout=0.1,
    attention_dropout=0.0,
    activation_dropout=0.0,
)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def bench_translate(device: str = "cuda", n_sentences: int = 2000, batch_size: int = 64, out_tokens: int = 64,
                    dtype: str = "auto", num_beams: int = 4, n_naive: int = 50, min_in_tokens: int = 10,
                    max_in_tokens: int = 40, seed: int = 0, config_overrides: dict[str, Any] | None = None,
                    batch_budget: int | str | None = None, free_memory: int | None = None,
                    cache_implementation: str | None = None) -> dict:
    """Sentences/s and generated tokens/s, batched (length-sorted) and one at a time, and the speed-up.
    `batch_budget` ("auto": from free memory, as the translator sizes them, or a number) batches by token
    budget instead of `batch_size`; `free_memory` stands in for the device's free bytes (CPU mechanics)."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    config = MarianConfig(**{**OPUS_MT_EN_DE, **(config_overrides or {})})
    torch.manual_seed(seed)
    with torch.device(device):
        model = MarianMTModel(config)
    model = model.to(dtype=torch_dtype).eval()
    pad, eos = config.pad_token_id, config.eos_token_id
    gen = GenerationConfig(num_beams=num_beams, min_new_tokens=out_tokens, max_new_tokens=out_tokens,
                           decoder_start_token_id=config.decoder_start_token_id, pad_token_id=pad,
                           eos_token_id=eos, bad_words_ids=[[pad]], use_cache=True,
                           cache_implementation=cache_implementation)

    rng = random.Random(seed)
    special = {pad, eos, 1}  # </s>, <unk>, <pad>
    ids_pool = [i for i in range(min(config.vocab_size, 4096)) if i not in special] or [2]

    def sentence() -> list[int]:
        n = rng.randint(min_in_tokens, max_in_tokens)
        return [rng.choice(ids_pool) for _ in range(n - 1)] + [eos]

    sentences = [sentence() for _ in range(n_sentences)]
    naive = sentences[:min(n_naive, n_sentences)]

    def generate(seqs: list[list[int]]) -> int:
        ids, mask = pad_batch(seqs, pad, device)
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen)
        return out.shape[0] * (out.shape[1] - 1)  # minus the decoder start token

    budget = token_budget(batch_budget, config, torch_dtype, device, free_memory)
    batches = (budget_batches([len(s) for s in sentences], out_tokens, num_beams, budget.tokens) if budget else
               length_sorted_batches([len(s) for s in sentences], batch_size))
    generate([sentences[i] for i in batches[0]])  # warm-up: kernels, allocator, the largest batch
    generate(sentences[:1])
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)

    _sync(device)
    t0 = time.perf_counter()
    batched_tokens = sum(generate([sentences[i] for i in b]) for b in batches)
    _sync(device)
    batched_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    naive_tokens = sum(generate([s]) for s in naive)
    _sync(device)
    naive_s = time.perf_counter() - t0

    batched_sps, naive_sps = n_sentences / batched_s, len(naive) / naive_s
    result = {
        "device": device,
        "device_name": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
        "dtype": str(torch_dtype).removeprefix("torch."),
        "parameters": sum(p.numel() for p in model.parameters()),
        "num_beams": num_beams,
        "cache_implementation": cache_implementation,
        "batch_size": batch_size if budget is None else max(len(b) for b in batches),
        "batch_budget": None if budget is None else budget.tokens,
        "budget": None if budget is None else budget.source,
        "batches": len(batches),
        "out_tokens": out_tokens,
        "in_tokens_mean": sum(len(s) for s in sentences) / max(1, n_sentences),
        "n_sentences": n_sentences,
        "batched_seconds": batched_s,
        "batched_generated_tokens": batched_tokens,
        "batched_sentences_per_s": batched_sps,
        "batched_tokens_per_s": batched_tokens / batched_s,
        "naive_sentences": len(naive),
        "naive_seconds": naive_s,
        "naive_sentences_per_s": naive_sps,
        "naive_tokens_per_s": naive_tokens / naive_s,
        "speedup": batched_sps / naive_sps,
    }
    if device.startswith("cuda"):
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--n-sentences", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out-tokens", type=int, default=64)
    p.add_argument("--num-beams", type=int, default=4)
    p.add_argument("--n-naive", type=int, default=50)
    p.add_argument("--dtype", default="auto")
    a = p.parse_args(argv)
    print(json.dumps(bench_translate(device=a.device, n_sentences=a.n_sentences, batch_size=a.batch_size,
                                     out_tokens=a.out_tokens, dtype=a.dtype, num_beams=a.num_beams,
                                     n_naive=a.n_naive), indent=2))


if __name__ == "__main__":
    main()
