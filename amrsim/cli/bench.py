"""`amrsim bench translate|parse`: GPU throughput of the translation and parsing models."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from amrsim.errors import ConfigError

# The benchmarks (torch, transformers) are imported inside the commands: `amrsim --help` does not need them.

bench_app = typer.Typer(no_args_is_help=True, help="GPU throughput benchmarks of the translation and parsing models.")


TINY = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 1000,
        "max_position_embeddings": 128}


def _bench_device(device: str, tiny: bool) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device on this machine; run it on a GPU machine, or use "
                          "--device cpu --tiny to check the mechanics")
    if device == "cpu" and not tiny:
        raise ConfigError("--device cpu times full-size models on a CPU, which says nothing about the GPU figure; "
                          "add --tiny to check the mechanics")


@bench_app.command("translate")
def bench_translate_command(
        device: Annotated[str, typer.Option(help="cuda | cuda:N | cpu (with --tiny)")] = "cuda",
        sentences: Annotated[int, typer.Option(min=1)] = 2000,
        batch_size: Annotated[int, typer.Option(min=1)] = 64,
        out_tokens: Annotated[int, typer.Option(min=1, help="fixed output length")] = 64,
        num_beams: Annotated[int, typer.Option(min=1)] = 4,
        tiny: Annotated[bool, typer.Option(help="a tiny config instead of opus-mt-en-de's")] = False) -> None:
    """Randomly initialised opus-mt-en-de-shaped MarianMT: batched vs one-at-a-time sentences/s."""
    from amrsim.translate.bench import bench_translate

    _bench_device(device, tiny)
    tiny_marian = TINY | {"pad_token_id": TINY["vocab_size"] - 1, "decoder_start_token_id": TINY["vocab_size"] - 1}
    out = bench_translate(device=device, n_sentences=sentences, batch_size=batch_size, out_tokens=out_tokens,
                          num_beams=num_beams, config_overrides=tiny_marian if tiny else None)
    print(json.dumps(out, indent=2, default=str))


@bench_app.command("parse")
def bench_parse_command(
        device: Annotated[str, typer.Option(help="cuda | cuda:N | cpu (with --tiny)")] = "cuda",
        size: Annotated[str, typer.Option(help="base | large (BART shapes of amrlib's parse_xfm models)")] = "base",
        sentences: Annotated[int, typer.Option(min=1)] = 1000,
        batch_size: Annotated[int, typer.Option(min=1)] = 32,
        out_tokens: Annotated[int, typer.Option(min=1, help="fixed output length (linearised graph tokens)")] = 128,
        num_beams: Annotated[int, typer.Option(min=1)] = 4,
        tiny: Annotated[bool, typer.Option(help="a tiny config instead of BART's")] = False) -> None:
    """Randomly initialised BART-base/large parse_xfm-shaped model: batched vs one-at-a-time sentences/s."""
    from amrsim.amr.bench import bench_parse

    if size not in ("base", "large"):
        raise ConfigError(f"--size '{size}': use base or large")
    _bench_device(device, tiny)
    out = bench_parse(device=device, size=size, n_sentences=sentences, batch_size=batch_size, out_tokens=out_tokens,
                      num_beams=num_beams, config_overrides=TINY if tiny else None)
    print(json.dumps(out, indent=2, default=str))


