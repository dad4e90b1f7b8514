"""The GPU device check in one call: the translation benchmark (opus-mt-en-de shape, 4 beams, 64 output tokens) and
the parse benchmark (bart-large shape, amrlib parse_xfm, 4 beams, 128 output tokens) at the earlier defaults (fixed
batches; parsing in fp32) and at today's defaults (batches from the token budget; parsing in bf16), plus parsing in
bf16 at the earlier fixed batch, written as one JSON with the card's name.

    python -m amrsim.bench.check --out gpu_check.json            # on the GPU machine
    python -m amrsim.bench.check --device cpu --tiny --out x.json  # the mechanics, on a CPU, tiny models

It runs with torch and transformers alone (a GPU machine need not have the warehouse stack or amrsim's compiled
graph reader): this package and `amrsim.generation` import neither."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from amrsim.bench.parse import bench_parse
from amrsim.bench.translate import bench_translate
from amrsim.generation import release_device_memory

TINY = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 1000,
        "max_position_embeddings": 128}
TINY_MARIAN = TINY | {"pad_token_id": TINY["vocab_size"] - 1, "decoder_start_token_id": TINY["vocab_size"] - 1}
EARLIER_TRANSLATE_BATCH, EARLIER_PARSE_BATCH = 64, 32  # the fixed batches of the first GPU runs


def run_check(device: str = "cuda", tiny: bool = False, sentences: int | None = None,
              free_memory: int | None = None) -> dict[str, Any]:
    """Every run of the check (see the module docstring): its settings, sentences/s and peak memory."""
    import torch

    n_translate, n_parse = sentences or (64 if tiny else 2000), sentences or (32 if tiny else 1000)
    common_t = {"device": device, "n_sentences": n_translate, "out_tokens": 64, "num_beams": 4, "n_naive": 4,
                "config_overrides": TINY_MARIAN if tiny else None, "free_memory": free_memory}
    common_p = {"device": device, "size": "large", "n_sentences": n_parse, "out_tokens": 128, "num_beams": 4,
                "n_naive": 2, "config_overrides": TINY if tiny else None, "free_memory": free_memory}
    runs: list[tuple[str, Any, dict[str, Any]]] = [
        ("translate, fixed batch (earlier default)", bench_translate,
         {**common_t, "batch_size": EARLIER_TRANSLATE_BATCH}),
        ("translate, token budget (default)", bench_translate, {**common_t, "batch_budget": "auto"}),
        ("parse, fp32, fixed batch (earlier default)", bench_parse,
         {**common_p, "batch_size": EARLIER_PARSE_BATCH, "dtype": "float32"}),
        ("parse, bf16, fixed batch", bench_parse,
         {**common_p, "batch_size": EARLIER_PARSE_BATCH, "dtype": "bfloat16"}),
        ("parse, bf16, token budget (default)", bench_parse,
         {**common_p, "dtype": "bfloat16", "batch_budget": "auto"}),
        # per-step overhead: transformers' static KV cache (compiles the decoder step); not a default until measured
        ("translate, token budget, static cache", bench_translate,
         {**common_t, "batch_budget": "auto", "cache_implementation": "static"}),
        ("parse, bf16, token budget, static cache", bench_parse,
         {**common_p, "dtype": "bfloat16", "batch_budget": "auto", "cache_implementation": "static"}),
    ]
    out: dict[str, Any] = {"device": device, "torch": torch.__version__, "tiny": tiny,
                           "device_name": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
                           "runs": []}
    for label, bench, kwargs in runs:
        t0 = time.perf_counter()
        try:
            result = bench(**kwargs)
        except Exception as e:  # one failed run (e.g. out of memory) must not lose the others' figures
            result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        release_device_memory(device)
        rate = result.get("batched_sentences_per_s", result.get("sentences_per_s"))
        out["runs"].append({"run": label, "wall_seconds": round(time.perf_counter() - t0, 1),
                            "sentences_per_s": rate, **result})
        print(f"{label}: {rate if rate is not None else result.get('error')} sentences/s", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny models: the mechanics, on any device")
    ap.add_argument("--sentences", type=int, default=None, help="sentences per run (default 2000 / 1000)")
    ap.add_argument("--free-memory-gib", type=float, default=None,
                    help="stand-in for the device's free memory (CPU mechanics)")
    ap.add_argument("--out", required=True, help="the JSON to write")
    args = ap.parse_args(argv)
    free = int(args.free_memory_gib * 2**30) if args.free_memory_gib is not None else None
    result = run_check(args.device, args.tiny, args.sentences, free)
    Path(args.out).write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
