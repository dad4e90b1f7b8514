"""`amrsim score`: a trained cross-encoder (PEAR) scores every sentence pair of a file."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from amrsim.cli.common import ConfigOpt, check_out, input_path, warehouse_root, write_out
from amrsim.console import console, progress_bar
from amrsim.errors import ConfigError, InputError
from amrsim.files import file_format, header_columns

_S1 = ("sentence1", "sentence_A", "sentence_a", "s1")
_S2 = ("sentence2", "sentence_B", "sentence_b", "s2")
_GOLD = ("score", "relatedness_score", "similarity", "label", "gold")


def score_command(
        file: Annotated[Path, typer.Option(help="TSV/CSV/JSONL/Parquet with two sentence columns")],
        model: Annotated[str, typer.Option(help="a trained cross-encoder: pear:<run id|latest>")] = "pear:latest",
        out: Annotated[Path | None, typer.Option(help="TSV to write (default: print to stdout)")] = None,
        sentence1_col: Annotated[str | None, typer.Option(help="default: sentence1 or sentence_A")] = None,
        sentence2_col: Annotated[str | None, typer.Option(help="default: sentence2 or sentence_B")] = None,
        score_col: Annotated[str | None, typer.Option(help="gold column to correlate with, when present "
                                                           "(default: score or relatedness_score)")] = None,
        batch_size: Annotated[int, typer.Option(min=1)] = 64,
        device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
        config: ConfigOpt = "pipelines.yaml") -> None:
    """Predict a 0-1 relatedness score for every pair; with a gold column, also Spearman and Pearson (x100)."""
    import numpy as np
    import polars as pl

    from amrsim.encoders import find_trained, is_trained_name, list_trained
    from amrsim.evaluate.sts import correlations
    from amrsim.ingest.readers import read_rows
    from amrsim.methods.loaders import load_encoder
    from amrsim.text import empty_reason

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if out is not None:
        check_out(out, "score", file=file)
    input_path(file, "--file")
    root = warehouse_root(config) / "models"
    if not is_trained_name(model):  # minilm, hf:...: sentence encoders, which embed sentences one at a time
        runs = [f"pear:{r}" for r in list_trained(root).get("pear", [])]
        raise ConfigError(f"--model '{model}': score needs a trained cross-encoder (pear:<run id|latest>; trained: "
                          f"{', '.join(runs) or 'none'}); compare a sentence encoder's embeddings with "
                          f"`amrsim evaluate sts --encoder {model}`")
    try:
        trained = find_trained(model, root)
    except ValueError as e:
        raise ConfigError(f"--model: {e}") from None
    if trained.meta.get("kind") != "cross-encoder":
        raise ConfigError(f"--model '{model}' is a {trained.meta.get('method')} sentence encoder, not a cross-encoder; "
                          f"compare its embeddings with `amrsim evaluate sts --encoder {model}`")
    fmt = file_format(file, default="tsv")
    header = header_columns(file, fmt)
    s1 = sentence1_col or next((c for c in _S1 if c in header), _S1[0])
    s2 = sentence2_col or next((c for c in _S2 if c in header), _S2[0])
    gold_col = score_col or next((c for c in _GOLD if c in header), None)
    wanted = [s1, s2] + ([gold_col] if gold_col and gold_col in header else [])
    frame = read_rows(file, fmt, wanted, text_columns=[s1, s2])
    unusable = frame.filter(pl.col("__error").is_not_null())
    if unusable.height:  # a prediction of an empty or repr'd text would be a number that means nothing
        raise InputError(str(file), unusable["__error"][0], unusable["__line"][0])
    texts1 = frame[s1].fill_null("").to_list()
    texts2 = frame[s2].fill_null("").to_list()
    for a, b, line in zip(texts1, texts2, frame["__line"], strict=True):  # before a model loads
        if why := empty_reason(a, s1) or empty_reason(b, s2):
            raise InputError(str(file), f"{why}: every row needs two sentences to score", line)
    scorer = load_encoder(model, batch_size=batch_size, device=device, models_root=root)
    with progress_bar(len(texts1), f"score with {model}", unit="pairs") as advance:
        pred = scorer.score(texts1, texts2, on_progress=advance)  # type: ignore[attr-defined]
    result = pl.DataFrame({"sentence1": texts1, "sentence2": texts2, "prediction": np.round(pred, 6)})
    if len(wanted) == 3:
        gold = frame[wanted[2]].cast(pl.Float64, strict=False)
        result = result.with_columns(gold.alias("gold"))
    if out is None:
        print(result.write_csv(separator="\t", quote_style="never"), end="")
    else:
        write_out(out, lambda path: result.write_csv(path, separator="\t", quote_style="never"))
        console.print(f"{result.height} pairs scored with {model} ({trained.run_id}) -> {out}")
    if "gold" in result.columns:
        ok = result.filter(pl.col("gold").is_not_null())
        corr = correlations(ok["prediction"].to_numpy(), ok["gold"].to_numpy())
        if corr["spearman"] is not None:
            message = (f"{ok.height} pairs with gold '{wanted[2]}': Spearman {corr['spearman']:.2f}, "
                       f"Pearson {corr['pearson']:.2f} (x100)")
            if out is None:
                print(message, file=sys.stderr)
            else:
                console.print(message)
