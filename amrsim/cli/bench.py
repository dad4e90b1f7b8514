"""`amrsim bench translate|parse`: GPU throughput of the translation and parsing models."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from amrsim.errors import ConfigError

# The benchmarks (torch, transformers) are imported inside the commands: `amrsim --help` does not need them.

bench_app = typer.Typer(no_args_is_help=True, help="GPU throughput benchmarks of the translation and parsing models.")


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
    from amrsim.bench.check import TINY_MARIAN
    from amrsim.bench.translate import bench_translate

    _bench_device(device, tiny)
    out = bench_translate(device=device, n_sentences=sentences, batch_size=batch_size, out_tokens=out_tokens,
                          num_beams=num_beams, config_overrides=TINY_MARIAN if tiny else None)
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
    from amrsim.bench.check import TINY
    from amrsim.bench.parse import bench_parse

    if size not in ("base", "large"):
        raise ConfigError(f"--size '{size}': use base or large")
    _bench_device(device, tiny)
    out = bench_parse(device=device, size=size, n_sentences=sentences, batch_size=batch_size, out_tokens=out_tokens,
                      num_beams=num_beams, config_overrides=TINY if tiny else None)
    print(json.dumps(out, indent=2, default=str))




@bench_app.command("all")
def bench_all_command(
        out: Annotated[str, typer.Option(help="the JSON to write")],
        device: Annotated[str, typer.Option(help="cuda | cuda:N | cpu (with --tiny)")] = "cuda",
        sentences: Annotated[int | None, typer.Option(min=1, help="sentences per run (default 2000 / 1000)")] = None,
        tiny: Annotated[bool, typer.Option(help="tiny configs instead of the real shapes")] = False) -> None:
    """The device check in one call: translation and bart-large parsing at the earlier fixed batches (parsing in
    fp32) and at today's defaults (token budget from free memory, parsing in bf16); one JSON. On a machine without
    amrsim's warehouse stack: `python -m amrsim.bench.check --out FILE`."""
    from pathlib import Path

    from amrsim.bench.check import run_check

    _bench_device(device, tiny)
    result = run_check(device, tiny, sentences)
    Path(out).write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    for run in result["runs"]:
        rate = run.get("sentences_per_s")
        print(f"{run['run']}: " + (f"{rate:.1f} sentences/s" if rate is not None else run.get("error", "")))
