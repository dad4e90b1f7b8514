"""DuEAM in the pipeline: NLI-style items from the pinned warehouse tables (labels never read), the paper's pairs,
then `amrsim.methods.dueam.train_dueam` into `warehouse/models/dueam/<run id>/` (loadable as `dueam:<run id|latest>`).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import numpy as np
import polars as pl

from amrsim.config import Pipeline
from amrsim.errors import ConfigError
from amrsim.methods.dueam import MUSE, NLIItem, Params, TrainPair, construct_pairs, train_dueam
from amrsim.methods.training import base_model_path
from amrsim.stages.train.common import SAMPLED_OUT, TrainingStage, read_pinned, table_versions
from amrsim.warehouse import Warehouse
from amrsim.warehouse.store import OK

log = logging.getLogger(__name__)

METHOD = "dueam"
ENGLISH_ONLY = ("all-MiniLM-L6-v2 (the packaged `minilm`) is an English model: other languages are split into "
                "English word pieces, so anchor WMDs and the learner are English-only in substance")
# each kind (its table's name): the premise's column, its hypotheses', the premise's language column, the hypotheses'
ROLES = {"triples": ("premise", ("entailment", "contradiction"), "lang", "lang"),
         "pairs": ("sentence1", ("sentence2",), "lang1", "lang2")}


def check_config(pipe: Pipeline, params: Params) -> dict[str, str]:
    """Dataset name -> kind (triples or pairs), before anything is read."""
    datasets = pipe.spec.datasets
    kinds = {}
    for d in params.datasets:
        kind = datasets[d].kind if d in datasets else None
        if kind not in ROLES:
            raise ConfigError(f"{pipe.where}: train dueam datasets: '{d}' is kind '{kind}', "
                              f"needs 'triples' or 'pairs' (premise-hypothesis rows)")
        kinds[d] = kind
    if params.dev_dataset and datasets[params.dev_dataset].kind != "pairs":
        raise ConfigError(f"{pipe.where}: train dueam dev_dataset '{params.dev_dataset}' "
                          f"needs kind 'pairs' (with gold scores)")
    return kinds


def translations_by_key(wh: Warehouse, dataset: str, versions: dict[str, int | None]) -> dict[str, dict[str, str]]:
    """Sentence key -> {language: text} of its translations: the `parallel` table (given in the input) first, then
    the `translations` table (the translate stage); ok rows only."""
    out: dict[str, dict[str, str]] = {}
    for table, text in (("parallel", "target"), ("translations", "text")):
        version = versions.get(f"{dataset}.{table}")
        if version is None and not wh.exists(dataset, table):
            continue
        rows = wh.read(dataset, table, version=version).filter(pl.col("status") == OK)
        for key, lang, value in zip(rows["source_key"], rows["target_lang"], rows[text], strict=True):
            if value:
                out.setdefault(key, {}).setdefault(lang, value)
    return out


def load_items(wh: Warehouse, kinds: dict[str, str], split: str | None, versions: dict[str, int | None]
               ) -> tuple[list[NLIItem], Counter[str], int]:
    """NLI items of every dataset (sorted by dataset, item id), rows left out by reason, rows read. An item is the
    rows of a `triples` table (premise; entailment and contradiction are its hypotheses) or a `pairs` table
    (sentence1 = premise, sentence2 = hypothesis) sharing an item id, in every language of its own translated rows,
    its `parallel` table and its `translations` table."""
    items: list[NLIItem] = []
    left_out: Counter[str] = Counter()
    rows_read = 0
    for ds, kind in kinds.items():
        if versions.get(f"{ds}.{kind}") is None and not wh.exists(ds, kind):
            raise ConfigError(f"dueam: dataset '{ds}' has no {kind} table; ingest it first (the train flow's refresh "
                              f"does)")
        frame = read_pinned(wh, versions, ds, kind, split)
        rows_read += frame.height
        failed = frame.filter(pl.col("status") != OK).height
        if failed:
            left_out["row failed at ingest"] += failed
        frame = frame.filter(pl.col("status") == OK).sort("item_id", "source_line")
        premise_col, hyp_cols, lang_p, lang_h = ROLES[kind]
        trans = translations_by_key(wh, ds, versions)
        # item id -> (premise by language, hypotheses by language, sentence keys per role: premise, then hypotheses)
        grouped: dict[str, tuple[dict[str, str], list[dict[str, str]], list[list[str]]]] = {}
        for row in frame.iter_rows(named=True):
            premise, hyps, keys = grouped.setdefault(
                row["item_id"], ({}, [{} for _ in hyp_cols], [[] for _ in range(1 + len(hyp_cols))]))
            premise.setdefault(row[lang_p], row[premise_col])
            for hyp, col in zip(hyps, hyp_cols, strict=True):
                hyp.setdefault(row[lang_h], row[col])
            for role_keys, col in zip(keys, (premise_col, *hyp_cols), strict=True):
                role_keys.append(row[f"{col}_key"])
        for item_id, (premise, hyps, keys) in sorted(grouped.items()):
            for side, role_keys in zip((premise, *hyps), keys, strict=True):  # translations of the item's sentences
                for key in role_keys:
                    for lang, text in trans.get(key, {}).items():
                        side.setdefault(lang, text)
            items.append(NLIItem(f"{ds}:{item_id}", premise, tuple(hyps)))
    return items, left_out, rows_read


def dev_pairs(wh: Warehouse, params: Params, versions: dict[str, int | None]
              ) -> tuple[tuple[list[str], list[str], Any] | None, dict[str, Any]]:
    """(texts1, texts2, gold) of the dev pairs in `dev_lang_pair`, and counts."""
    ds = params.dev_dataset
    assert ds is not None
    pairs = read_pinned(wh, versions, ds, "pairs", params.dev_split)
    l1, _, l2 = params.dev_lang_pair.partition("-")
    usable = pairs.filter((pl.col("status") == OK) & (pl.col("lang1") == l1) & (pl.col("lang2") == (l2 or l1))
                          & pl.col("score").is_not_null())
    info = {"dataset": ds, "split": params.dev_split, "lang_pair": params.dev_lang_pair, "pairs": usable.height,
            "left_out": pairs.height - usable.height}
    if usable.height < 2:
        raise ConfigError(f"dueam: fewer than 2 dev pairs in {ds} (split {params.dev_split}, {params.dev_lang_pair})")
    return (usable["sentence1"].to_list(), usable["sentence2"].to_list(),
            usable["score"].to_numpy().astype(np.float64)), info


def sample_pairs(items: list[NLIItem], params: Params, left_out: Counter[str]
                 ) -> tuple[list[TrainPair], Counter[str]]:
    """The pairs (a seeded sample of `max_pairs`) and how many of each mode were built; what was not, in `left_out`."""
    pairs, missing = construct_pairs(items, params.modes, params.langs, params.seed, params.max_cross_per_item)
    left_out.update(missing)
    built = Counter(p.mode for p in pairs)
    if params.max_pairs is not None and len(pairs) > params.max_pairs:
        left_out[SAMPLED_OUT] = len(pairs) - params.max_pairs
        pick = np.sort(np.random.default_rng(params.seed).choice(len(pairs), params.max_pairs, replace=False))
        pairs = [pairs[i] for i in pick]
    if not pairs:
        raise ConfigError(f"dueam: no training pairs from {params.datasets} (split {params.split}, modes "
                          f"{params.modes}, langs {params.langs}; left out: {dict(left_out)}); ingest the "
                          f"datasets, or add translations for cross_lingual")
    return pairs, built


def run_meta(pipe: Pipeline, params: Params, versions: dict[str, int | None], items: list[NLIItem],
             pairs: list[TrainPair], built: Counter[str], left_out: Counter[str], dev_info: dict[str, Any]
             ) -> dict[str, Any]:
    """What model.json records beside the training: the data read and the pairs built, the named base models."""
    langs_found = sorted({lg for it in items for lg in [*it.premise, *(k for h in it.hypotheses for k in h)]})
    data = {"pipeline": pipe.name, "datasets": params.datasets, "split": params.split, "modes": params.modes,
            "langs": params.langs, "langs_found": langs_found, "table_versions": versions, "items": len(items),
            "pairs_built": dict(built), "pairs_used": dict(Counter(p.mode for p in pairs)),
            "lang_pairs_used": dict(Counter(f"{p.lang1}-{p.lang2}" for p in pairs)),
            "left_out": dict(left_out), "dev": dev_info}
    log.info("dueam: %d pairs %s from %d items (langs %s); left out %s", len(pairs), data["pairs_used"],
             len(items), langs_found, dict(left_out))
    meta: dict[str, Any] = {"data": data, "anchor_name": params.anchor, "learner_name": params.learner}
    return meta | ({"languages": ENGLISH_ONLY} if "minilm" in (params.anchor, params.learner) else {})


def train(pipe: Pipeline, params: Params, run_id: str) -> dict[str, Any]:
    stage = TrainingStage(pipe, METHOD, run_id)
    kinds = check_config(pipe, params)
    with stage.record(params, params.datasets, ["triples", "pairs", "parallel", "translations"]) as versions:
        if params.dev_dataset:
            stage.versions |= table_versions(stage.wh, [params.dev_dataset], ["pairs"])
        items, left_out, rows_read = load_items(stage.wh, kinds, params.split, versions)
        pairs, built = sample_pairs(items, params, left_out)
        dev, dev_info = dev_pairs(stage.wh, params, versions) if params.dev_dataset else (None, {})
        meta = run_meta(pipe, params, versions, items, pairs, built, left_out, dev_info)
        # muse trains through its PyTorch port; every other base loads from a transformers path
        anchor = MUSE if params.anchor == MUSE else base_model_path(params.anchor)
        learner = MUSE if params.learner == MUSE else base_model_path(params.learner)
        result = stage.done(train_dueam(anchor, learner, [p.text1 for p in pairs], [p.text2 for p in pairs],
                                        stage.out_dir, params, dev=dev, extra_meta=meta,
                                        anchor_texts2=[p.anchor_text2(params.anchor_same_language) for p in pairs]))
        skipped = dict(result["skipped"])
        stage.count(rows_read, result["train_pairs"],
                    sum(n for reason, n in left_out.items() if reason != SAMPLED_OUT) + sum(skipped.values()))
    return stage.summary(best_dev=result["best_dev"], best_step=result["best_step"], initial_dev=result["initial_dev"],
                         pairs=meta["data"]["pairs_used"], left_out={**dict(left_out), **skipped})
