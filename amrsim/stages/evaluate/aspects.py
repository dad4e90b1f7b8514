"""The AMR aspect evaluation (S3BERT Table 1) over a dataset's `amr_metrics` rows, with the aspect layout a
decomposed model's run records; results reused while the model, the metric rows and what the model's vectors read
are unchanged."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from amrsim.encoders import find_trained, is_trained_name, model_id
from amrsim.encoders.cache import read_embeddings
from amrsim.errors import AmrsimError
from amrsim.evaluate import Score
from amrsim.evaluate.aspects import ASPECT_COLUMNS, aspect_scores
from amrsim.methods.loaders import vector_inputs
from amrsim.methods.portable import method_config
from amrsim.stages.evaluate.common import embed_with_progress, evaluated
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.store import OK


def aspect_slices(encoder: str, models_root: Path | None = None) -> dict[str, tuple[int, int]]:
    """A trained decomposed model's sub-embedding ranges by aspect column; {} for any other encoder."""
    if not is_trained_name(encoder):
        return {}
    model = find_trained(encoder, models_root)
    meta = method_config(model.path, "s3bert", model.meta)
    slices = {}
    for name, span in (meta.get("aspects") or {}).items():
        if (not isinstance(span, list | tuple) or len(span) != 2 or not all(isinstance(x, int) for x in span)
                or not 0 <= span[0] < span[1]):
            raise ValueError(f"model '{encoder}': aspects.{name} must be [start, end) with 0 <= start < end, "
                             f"got {span!r}")
        slices[name] = (span[0], span[1])
    return slices


def aspects_eval(wh: Warehouse, encoder: str, dataset: str, run_id: str, split: str | None = None,
                 pipeline: str = "cli", batch_size: int = 64, device: str = "auto") -> pl.DataFrame:
    """S3BERT-style aspect Spearman over the dataset's `amr_metrics` rows (ok rows of `split`, or all)."""
    metrics = wh.read(dataset, "amr_metrics").filter(pl.col("status") == OK)
    if split and split != "all":
        metrics = metrics.filter(pl.col("split") == split)
    if metrics.height < 2:
        raise AmrsimError(f"{dataset}/amr_metrics: fewer than 2 ok metric rows"
                          f"{f' in split {split!r}' if split else ''}; run the metrics stage first")
    metrics = metrics.unique(["sentence1_key", "sentence2_key"], keep="first", maintain_order=True)
    version = wh.version(dataset, "amr_metrics")
    needed = pl.concat([metrics.select(key="sentence1_key"), metrics.select(key="sentence2_key")]).unique()
    sentences = wh.read(dataset, "sentences", columns=["key", "text"]).join(needed, on="key", how="semi")
    read = vector_inputs(wh, dataset, encoder, sentences)  # an MSE-AMR run's graphs
    run_split = split or "all"
    # an aspect with one value on every pair (wikification where no graph has a :wiki) cannot rank pairs: its
    # Spearman is undefined by definition, so it is not evaluated here (it made every aspects mean undefined).
    # The set is part of the key: the report takes a (model, dataset, split)'s newest evaluation as its set
    aspects = [a for a in ASPECT_COLUMNS if metrics[a].drop_nulls().n_unique() > 1]
    parts = [model_id(encoder, wh.models_root), dataset, version, sorted(metrics["key"].to_list()),
             *([sorted(zip(sentences["key"], read, strict=True))] if read else []), aspects]

    def compute() -> list[Score]:
        embed_with_progress(wh, dataset, encoder, sentences, batch_size=batch_size, device=device)
        k1, k2 = metrics["sentence1_key"].to_list(), metrics["sentence2_key"].to_list()
        both = read_embeddings(wh, dataset, encoder, k1 + k2)
        return aspect_scores(encoder, dataset, run_split, metrics, both[: len(k1)], both[len(k1):],
                             aspect_slices(encoder, wh.models_root), aspects)

    results = [("aspects", dataset, run_split, a, "spearman") for a in aspects]
    return evaluated(wh, encoder, results, parts, compute, "evaluate:aspects", pipeline, run_id,
                     content_key("aspects"), {f"{dataset}.amr_metrics": version})
