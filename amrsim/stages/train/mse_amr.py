"""MSE-AMR in the pipeline: triples and graphs from the warehouse, STSb-dev model selection, then
`amrsim.methods.mse_amr.train_mse_amr` into `warehouse/models/mse_amr/<run id>/`.

Training data (`load_triples`): the `triples` tables of `datasets` (split `split`), each sentence's graph from the
dataset's `amr` table (parser `parser`, linearised as `linearize`), other languages from ingested translations (their
own graphs only: a graph parsed through the English side is the English graph again). Triples with a role lacking a
graph are skipped and counted by reason. Tables are read at the versions recorded in lineage and model.json, so a
model names the data it saw; a rerun with the same run id resumes the checkpoint.

Model selection (`dev_dataset`, e.g. STSb dev): Spearman x100 of the *combined* embedding (base encoder of the text
(+) AMR encoder of the graph, with the run's integration) on the dev pairs whose two sentences have a graph: the
model the evaluation suite loads (`mse_amr:latest`). `dev_metric: graph` selects on the graph encoder alone.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from amrsim.amr.backends import PROVIDED
from amrsim.config import Pipeline
from amrsim.encoders.cache import read_embeddings
from amrsim.errors import ConfigError
from amrsim.evaluate.sts import StsEvaluator
from amrsim.methods.loaders import embed_sentences
from amrsim.methods.mse_amr import (
    ENGLISH,
    ROLES,
    Params,
    embed_combined,
    encode_with,
    sentence_graphs,
    text_langs,
    train_mse_amr,
    translations,
)
from amrsim.stages.train.common import TrainingStage, read_pinned, table_versions
from amrsim.warehouse import OK, Warehouse

__all__ = ["METHOD", "Params", "TripleData", "check_config", "dev_evaluator", "load_triples", "train"]

log = logging.getLogger(__name__)

METHOD = "mse_amr"
Example = dict[str, dict[str, dict[str, str | None]]]  # a triple as `train_mse_amr` reads it


def check_config(pipe: Pipeline, params: Params) -> None:
    """Kinds and parsing of the datasets, before anything is read."""
    datasets = pipe.spec.datasets
    for d in params.datasets:
        if d in datasets and datasets[d].kind != "triples":
            raise ConfigError(f"{pipe.where}: train mse_amr datasets: '{d}' is kind '{datasets[d].kind}', needs "
                              f"'triples'")
    if params.dev_dataset and params.dev_dataset in datasets and datasets[params.dev_dataset].kind != "pairs":
        raise ConfigError(f"{pipe.where}: train mse_amr dev_dataset '{params.dev_dataset}' needs kind 'pairs'")
    if params.parser != PROVIDED:
        parsed = set(pipe.spec.parse_datasets())
        unparsed = [d for d in [*params.datasets, *([params.dev_dataset] if params.dev_dataset else [])]
                    if d not in parsed]
        if unparsed:
            raise ConfigError(f"{pipe.where}: mse_amr reads graphs of {unparsed}, which the pipeline's `parse:` "
                              f"section does not parse")


def train(pipe: Pipeline, params: Params, run_id: str) -> dict[str, Any]:
    stage = TrainingStage(pipe, METHOD, run_id)
    check_config(pipe, params)
    with stage.record(params, params.datasets, ["triples", "parallel", "amr"]) as versions:
        if params.dev_dataset:
            stage.versions |= table_versions(stage.wh, [params.dev_dataset], ["pairs", "amr"])
        data = load_triples(stage.wh, params, versions)
        stage.count(data.rows, len(data.triples), sum(data.skipped.values()))
        if len(data.triples) < 2:
            raise ConfigError(f"mse_amr: fewer than 2 usable triples in {params.datasets} (split {params.split}; "
                              f"left out: {dict(data.skipped)}); run the pipeline's ingest and parse stages first")
        dev_eval, dev_info = dev_evaluator(stage.wh, params, versions) if params.dev_dataset else (None, {})
        sources = _contradiction_sources(data.item_ids)
        meta = {
            "pipeline": pipe.name, "parser": params.parser, "linearize": params.linearize,
            "table_versions": versions, "seeds": {"train": params.seed},
            "data": {"datasets": params.datasets, "split": params.split, "langs": data.langs,
                     **({"text_langs": data.text_langs} if params.train_base else {}),
                     "require_graphs": params.require_graphs, "rows": data.rows, "triples": len(data.triples),
                     "skipped": dict(data.skipped), "per_dataset": data.per_dataset,
                     "contradiction_sources": sources, "dev": dev_info},
            "encoder_init": params.encoder,
        }
        log.info("mse_amr: %d triples (%d rows, left out %s), langs %s", len(data.triples), data.rows,
                 dict(data.skipped), data.langs)
        result = stage.done(train_mse_amr(data.triples, stage.out_dir, params, langs=data.langs, dev_eval=dev_eval,
                                          extra_meta=meta))
    return stage.summary(best_dev=result["best_dev"], best_step=result["best_step"], langs=data.langs,
                         left_out=dict(data.skipped), contradiction_sources=sources)


# ---------------------------------------------------------------------------------------------------------------------
# model selection


def dev_evaluator(wh: Warehouse, params: Params, versions: dict[str, int | None]
                  ) -> tuple[Callable[..., float | None], dict[str, Any]]:
    """`dev_eval(model, tokenizer[, base])`: the `StsEvaluator` score (Spearman x100) on the dev pairs (English, both
    graphs present) of the embeddings the model gives now (with `base`, the base encoder being trained, the texts'
    embeddings are its own, else the base encoder's cached ones); and what was read."""
    ds = params.dev_dataset
    assert ds is not None
    pairs = read_pinned(wh, versions, ds, "pairs", params.dev_split)
    total = pairs.height
    pairs = pairs.filter((pl.col("status") == OK) & (pl.col("lang1") == ENGLISH) & (pl.col("lang2") == ENGLISH))
    # a pair's graphs: provided ones are its own (amr1_key/amr2_key), a parser's are its sentences'
    own = params.parser == PROVIDED and "amr1_key" in pairs.columns
    g1, g2 = ("amr1_key", "amr2_key") if own else ("sentence1_key", "sentence2_key")
    wanted = pairs[g1].drop_nulls().to_list() + pairs[g2].drop_nulls().to_list()
    graphs = sentence_graphs(wh, ds, params.parser, params.linearize, wanted, versions.get(f"{ds}.amr"),
                             by="key" if own else "sentence_key")
    usable = pairs.filter(pl.col(g1).is_in(list(graphs.ok)) & pl.col(g2).is_in(list(graphs.ok)))
    info = {"dataset": ds, "split": params.dev_split, "metric": params.dev_metric, "pairs": usable.height,
            "left_out": {"failed or not English": total - pairs.height, "no graph": pairs.height - usable.height}}
    if usable.height < 2:
        raise ConfigError(f"mse_amr: fewer than 2 dev pairs with graphs in {ds} ({info['left_out']}); run its parse "
                          f"stage")
    # one vector per (sentence, graph): a sentence given two graphs is embedded with each
    side1 = list(zip(usable["sentence1_key"].to_list(), usable[g1].to_list(), strict=True))
    side2 = list(zip(usable["sentence2_key"].to_list(), usable[g2].to_list(), strict=True))
    nodes = list(dict.fromkeys(side1 + side2))
    index = {n: str(i) for i, n in enumerate(nodes)}
    ids1, ids2, gold = [index[n] for n in side1], [index[n] for n in side2], usable["score"].to_numpy()
    texts = [graphs.ok[g][0] for _, g in nodes]
    base, sentence_texts = None, []
    if params.dev_metric == "combined" and params.integration != "h_only":
        keys = [k for k, _ in nodes]
        sentences = wh.read(ds, "sentences", columns=["key", "text"]).filter(pl.col("key").is_in(keys))
        if params.train_base:
            by_key = dict(sentences.iter_rows())
            sentence_texts = [by_key[k] for k in keys]
        else:
            embed_sentences(wh, ds, params.base_encoder, sentences)  # cached: computed once per sentence and model
            base = read_embeddings(wh, ds, params.base_encoder, keys)

    def dev_eval(model: Any, tokenizer: Any, trained_base: Any = None) -> float | None:
        h = encode_with(model, tokenizer, texts, pooling=params.pooling, max_length=params.max_length,
                        batch_size=128)
        s = base
        if trained_base is not None and sentence_texts:
            s = trained_base.encode(sentence_texts, batch_size=256, convert_to_numpy=True, show_progress_bar=False)
        emb = embed_combined(s, h, params.integration) if s is not None else h
        return StsEvaluator(ids1, ids2, gold, lambda ids: emb[[int(i) for i in ids]])()

    return dev_eval, info


# ---------------------------------------------------------------------------------------------------------------------
# training triples


@dataclass
class TripleData:
    """Training triples (sorted by dataset, item id), what was left out and why, and the languages found."""

    triples: list[Example] = field(default_factory=list)
    item_ids: list[str] = field(default_factory=list)  # "<dataset>:<item id>", aligned with triples
    rows: int = 0  # triple rows of the split read (every language variant counted once per item)
    skipped: Counter[str] = field(default_factory=Counter)
    per_dataset: dict[str, dict[str, Any]] = field(default_factory=dict)
    graph_langs: set[str] = field(default_factory=set)  # other languages with a graph of their own (not pivoted)
    langs: list[str] = field(default_factory=list)  # the languages the triples were built for
    text_langs: list[str] = field(default_factory=list)  # train_base: every language some sentence has text in


def load_triples(wh: Warehouse, params: Params, versions: dict[str, int | None] | None = None) -> TripleData:
    """Triples of `params.split` (None: all) from each of `params.datasets`' `triples` table (at `versions`) with
    graphs of `params.parser` from its `amr` table.

    Per item: the English row's texts and graphs; other languages from triple rows of the same item (ingested
    translations) and from the `parallel` table (translations of each English sentence). A non-English sentence
    counts only with a graph of its own. A role is usable with a graph in one of `params.langs` (default: English
    and every language with a graph of its own), or, when not `require_graphs`, with English text; a triple with an
    unusable role is skipped, counted by reason. With `train_base` (a base encoder trained on texts), each usable
    triple also keeps its texts in every other language, without a graph."""
    out = TripleData()
    items = [(ds, *item) for ds in params.datasets for item in _dataset_items(wh, ds, params, versions or {}, out)]
    use = list(params.langs) if params.langs else [ENGLISH, *sorted(out.graph_langs)]
    for ds, item_id, example, missing in items:
        reason = None
        for role in ROLES:
            entries = {lg: e for lg, e in example[role].items() if lg in use}
            has_graph = any(e.get("graph") for e in entries.values())
            has_text = bool((entries.get(ENGLISH) or {}).get("text"))
            if not has_graph and (params.require_graphs or not has_text):
                reason = next((why for k, why in missing.items() if k.startswith(f"{role}:")), f"no graph in {use}")
                break
        if reason is not None:
            out.skipped[reason] += 1
            skipped = out.per_dataset[ds]["skipped"]
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        out.triples.append({r: {lg: dict(e) if lg in use else {"text": e.get("text"), "graph": None}
                                for lg, e in example[r].items() if lg in use or (params.train_base and e.get("text"))}
                            for r in ROLES})
        out.item_ids.append(f"{ds}:{item_id}")
        out.per_dataset[ds]["used"] += 1
    out.langs = use
    if params.train_base:
        out.text_langs = text_langs(out.triples)
    return out


def _dataset_items(wh: Warehouse, ds: str, params: Params, versions: dict[str, int | None],
                   out: TripleData) -> list[tuple[str, Example, dict[str, str]]]:
    """(item id, example, role:lang -> why it has no graph) of one dataset's items, sorted; counts go to `out`. A
    sentence's text and own graph per language (a non-English sentence's graph parsed through English is none of
    its own)."""
    if versions.get(f"{ds}.triples") is None and not wh.exists(ds, "triples"):
        raise ValueError(f"dataset '{ds}' has no triples table: is it a `kind: triples` dataset of the pipeline, "
                         f"ingested?")
    table = read_pinned(wh, versions, ds, "triples", params.split)
    ok = table.filter(pl.col("status") == OK).sort("item_id", pl.col("lang") != ENGLISH, "lang")
    items = table.select("item_id").unique().height
    failed_items = items - ok.select("item_id").unique().height  # items without any ok row
    out.per_dataset[ds] = {"items": items, "used": 0, "skipped": {}}
    if failed_items:
        out.skipped["triple row failed at ingest"] += failed_items
        out.per_dataset[ds]["skipped"]["triple row failed at ingest"] = failed_items
    out.rows += items
    trans: dict[str, list[tuple[str, str, str]]] = {}  # English sentence key -> (lang, key, text) of translations
    for source, *target in translations(wh, ds, versions.get(f"{ds}.parallel")).select(
            "source_key", "target_lang", "target_key", "target").iter_rows():
        if tuple(target) not in trans.setdefault(source, []):
            trans[source].append(tuple(target))  # type: ignore[arg-type]
    keys = [k for r in ROLES for k in ok[f"{r}_key"].to_list()]
    keys += [t for k in set(keys) for _, t, _ in trans.get(k, [])]
    graphs = sentence_graphs(wh, ds, params.parser, params.linearize, keys, versions.get(f"{ds}.amr"))
    by_item: dict[str, Example] = {}
    why_missing: dict[str, dict[str, str]] = {}
    for row in ok.iter_rows(named=True):
        example = by_item.setdefault(row["item_id"], {r: {} for r in ROLES})
        reasons = why_missing.setdefault(row["item_id"], {})
        for role in ROLES:
            variants = [(row["lang"], row[f"{role}_key"], row[role])]
            if row["lang"] == ENGLISH:
                variants += trans.get(row[f"{role}_key"], [])
            for lang, key, text in variants:
                if lang in example[role]:
                    continue
                graph, pivot = graphs.ok.get(key, (None, None))
                if lang != ENGLISH and pivot is not None:
                    graph = None  # the English graph again
                elif graph is not None and lang != ENGLISH:
                    out.graph_langs.add(lang)
                if graph is None and (key in graphs.failed or lang == ENGLISH or pivot is None):
                    reasons.setdefault(f"{role}:{lang}", "graph failed to parse" if key in graphs.failed else
                                       "no graph (dataset not parsed?)")
                example[role][lang] = {"text": text, "graph": graph}
    return [(item_id, example, why_missing.get(item_id, {})) for item_id, example in sorted(by_item.items())]


def _contradiction_sources(item_ids: list[str]) -> dict[str, int]:
    """Triples by where their contradiction came from (`from_pairs` item ids `<id>/C|I|R<id>`; others: given)."""
    names = {"C": "labelled", "I": "inferred", "R": "random"}
    return dict(Counter(names[m.group(1)] if (m := re.search(r"/([CIR])[^/]*$", item)) else "given"
                        for item in item_ids))
