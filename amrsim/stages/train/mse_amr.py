"""MSE-AMR in the pipeline: triples and graphs from the warehouse, STSb-dev model selection, then
`amrsim.methods.mse_amr.train.train_mse_amr` into `warehouse/models/mse_amr/<run id>/`.

Training data (`amrsim.methods.mse_amr.data.load_triples`): the `triples` tables of `datasets` (split `split`), each
sentence's graph from the dataset's `amr` table (parser `parser`, linearised as `linearize`), other languages from
ingested translations (their own graphs only: a graph parsed through the English side is the English graph again).
Triples with a role lacking a graph are skipped and counted by reason. Tables are read at the versions recorded in
lineage and model.json, so a model names the data it saw; a rerun with the same run id resumes the checkpoint.

Model selection (`dev_dataset`, e.g. STSb dev): Spearman x100 of the *combined* embedding (base encoder of the text
(+) AMR encoder of the graph, with the run's integration) on the dev pairs whose two sentences have a graph. The
combined model is what the evaluation suite loads (`mse_amr:latest`), and a graph encoder that scores well alone
may add nothing the base encoder lacks; `dev_metric: graph` selects on the graph encoder alone instead.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import numpy as np
import polars as pl

from amrsim.config import LoadedConfig, Pipeline
from amrsim.encoders.cache import read_embeddings
from amrsim.errors import ConfigError
from amrsim.evaluate.sts import correlations, cosine
from amrsim.methods.loaders import embed_sentences
from amrsim.methods.mse_amr.data import load_triples, pair_graphs, sentence_graphs
from amrsim.methods.mse_amr.params import Params
from amrsim.stages.train.common import run_dir, table_versions, train_summary, training_run
from amrsim.warehouse import Warehouse
from amrsim.warehouse.store import OK

log = logging.getLogger(__name__)

METHOD = "mse_amr"


def check_config(cfg: LoadedConfig, pipeline: str, params: Params) -> None:
    """Kinds and parsing of the datasets, before anything is read."""
    pipe = cfg.project.pipelines[pipeline]
    for d in params.datasets:
        if d in pipe.datasets and pipe.datasets[d].kind != "triples":
            raise ConfigError(f"{cfg.path}: pipeline '{pipeline}': train mse_amr datasets: '{d}' is kind "
                              f"'{pipe.datasets[d].kind}', needs 'triples'")
    if params.dev_dataset and params.dev_dataset in pipe.datasets and pipe.datasets[params.dev_dataset].kind != "pairs":
        raise ConfigError(f"{cfg.path}: pipeline '{pipeline}': train mse_amr dev_dataset '{params.dev_dataset}' "
                          f"needs kind 'pairs'")
    if params.parser != "provided":
        parsed = set(pipe.parse_datasets())
        unparsed = [d for d in [*params.datasets, *([params.dev_dataset] if params.dev_dataset else [])]
                    if d not in parsed]
        if unparsed:
            raise ConfigError(f"{cfg.path}: pipeline '{pipeline}': mse_amr reads graphs of {unparsed}, which the "
                              f"pipeline's `parse:` section does not parse")


def dev_evaluator(wh: Warehouse, params: Params, versions: dict[str, int | None]) -> tuple[Any, dict[str, Any]]:
    """`dev_eval(model, tokenizer) -> Spearman x100` on the dev pairs (English, both graphs present) and counts."""

    from amrsim.methods.mse_amr.train import embed_combined, encode_with

    ds = params.dev_dataset
    assert ds is not None
    pairs = wh.read(ds, "pairs", version=versions.get(f"{ds}.pairs"))
    if params.dev_split:
        pairs = pairs.filter(pl.col("split") == params.dev_split)
    total = pairs.height
    pairs = pairs.filter((pl.col("status") == OK) & (pl.col("lang1") == "en") & (pl.col("lang2") == "en"))
    # a pair's graphs: provided ones are its own (amr1_key/amr2_key), a parser's are its sentences'
    own = params.parser == "provided" and "amr1_key" in pairs.columns
    g1, g2 = ("amr1_key", "amr2_key") if own else ("sentence1_key", "sentence2_key")
    wanted = pairs[g1].drop_nulls().to_list() + pairs[g2].drop_nulls().to_list()
    if own:
        graphs = pair_graphs(wh, ds, wanted, params.linearize, versions.get(f"{ds}.amr"))
    else:
        graphs = sentence_graphs(wh, ds, params.parser, params.linearize, wanted, versions.get(f"{ds}.amr"))
    have = list(graphs.ok)
    usable = pairs.filter(pl.col(g1).is_in(have) & pl.col(g2).is_in(have))
    info = {"dataset": ds, "split": params.dev_split, "metric": params.dev_metric, "pairs": usable.height,
            "left_out": {"failed or not English": total - pairs.height, "no graph": pairs.height - usable.height}}
    if usable.height < 2:
        raise ConfigError(f"mse_amr: fewer than 2 dev pairs with graphs in {ds} ({info['left_out']}); run its parse "
                          f"stage")
    # one vector per (sentence, graph): a sentence given two graphs is embedded with each
    side1 = list(zip(usable["sentence1_key"].to_list(), usable[g1].to_list(), strict=True))
    side2 = list(zip(usable["sentence2_key"].to_list(), usable[g2].to_list(), strict=True))
    nodes = list(dict.fromkeys(side1 + side2))
    index = {n: i for i, n in enumerate(nodes)}
    i1 = np.array([index[n] for n in side1])
    i2 = np.array([index[n] for n in side2])
    gold = usable["score"].to_numpy()
    texts = [graphs.ok[g][0] for _, g in nodes]
    base = None
    if params.dev_metric == "combined" and params.integration != "h_only":
        keys = [k for k, _ in nodes]
        sentences = wh.read(ds, "sentences", columns=["key", "text"]).filter(pl.col("key").is_in(keys))
        embed_sentences(wh, ds, params.base_encoder, sentences)  # cached: computed once per sentence and model
        base = read_embeddings(wh, ds, params.base_encoder, keys)

    def dev_eval(model: Any, tokenizer: Any) -> float:
        h = encode_with(model, tokenizer, texts, pooling=params.pooling, max_length=params.max_length,
                        batch_size=128)
        emb = embed_combined(base, h, params.integration) if base is not None else h
        score = correlations(cosine(emb[i1], emb[i2]), gold)["spearman"]
        return float("nan") if score is None else score

    return dev_eval, info


def train(pipe: Pipeline, params: Params, run_id: str) -> dict[str, Any]:
    cfg, pipeline = pipe.loaded, pipe.name  # TEMPORARY: until this stage reads `pipe` only
    from amrsim.methods.mse_amr.train import train_mse_amr

    started = time.perf_counter()
    wh = Warehouse(cfg.warehouse_root)
    check_config(cfg, pipeline, params)
    with training_run(wh, pipeline, METHOD, run_id, params) as run:
        versions = table_versions(wh, params.datasets, ["triples", "parallel", "amr"])
        if params.dev_dataset:
            versions |= table_versions(wh, [params.dev_dataset], ["pairs", "amr"])
        run.input_versions = versions
        data = load_triples(wh, params.datasets, params.split, params.parser, params.linearize, params.langs,
                            params.require_graphs, versions)
        skipped = sum(data.skipped.values())
        run.rows_in, run.rows_computed, run.rows_failed = data.rows, len(data.triples), skipped
        if len(data.triples) < 2:
            raise ConfigError(f"mse_amr: fewer than 2 usable triples in {params.datasets} (split {params.split}; "
                              f"left out: {dict(data.skipped)}); run the pipeline's ingest and parse stages first")
        dev_eval, dev_info = dev_evaluator(wh, params, versions) if params.dev_dataset else (None, {})
        sources = _contradiction_sources(data.item_ids)
        meta = {
            "pipeline": pipeline, "parser": params.parser, "linearize": params.linearize,
            "table_versions": versions, "seeds": {"train": params.seed},
            "data": {"datasets": params.datasets, "split": params.split, "langs": data.langs,
                     "require_graphs": params.require_graphs, "rows": data.rows, "triples": len(data.triples),
                     "skipped": dict(data.skipped), "per_dataset": data.per_dataset,
                     "contradiction_sources": sources, "dev": dev_info},
            "encoder_init": params.encoder,
        }
        log.info("mse_amr: %d triples (%d rows, left out %s), langs %s", len(data.triples), data.rows,
                 dict(data.skipped), data.langs)
        out_dir = run_dir(wh, METHOD, run_id)
        result = train_mse_amr(data.triples, out_dir, params, langs=data.langs, dev_eval=dev_eval, extra_meta=meta)
        run.rows_out = len(data.triples) if result["completed"] else 0
    return train_summary(METHOD, run_id, data.rows, len(data.triples), skipped, started, result["completed"],
                         model_dir=str(out_dir), steps=result["steps"], total_steps=result["total_steps"],
                         resumed_from=result["resumed_from"], best_dev=result["best_dev"],
                         best_step=result["best_step"], langs=data.langs, left_out=dict(data.skipped),
                         contradiction_sources=sources)


def _contradiction_sources(item_ids: list[str]) -> dict[str, int]:
    """Triples by where their contradiction came from (`from_pairs` item ids `<id>/C|I|R<id>`; others: given)."""
    names = {"C": "labelled", "I": "inferred", "R": "random"}
    counts: dict[str, int] = {}
    for item in item_ids:
        m = re.search(r"/([CIR])[^/]*$", item)
        kind = names[m.group(1)] if m else "given"
        counts[kind] = counts.get(kind, 0) + 1
    return counts
