"""S3BERT in the pipeline: metric targets from the warehouse, then `amrsim.methods.s3bert.train_s3bert`.

Training pairs are the pairs of `datasets` (split `train_split`, languages `langs`) whose two graphs from `parser` are
ok (provided graphs: the pair's own, as its input row gave them) and that have an ok `amr_metrics` row for those graphs
computed with the pipeline's `metrics:` options (the metrics stage runs before training in the train flow). Each pair
adds a negative: its sentence1 with the sentence2 of a random other training pair, scored by the metrics engine here
(graph1 of one pair vs graph2 of the other). Targets are min-max normalised per split over positives and negatives
together, as the reference code does. Dev pairs (split `dev_split`) are built the same way and select the best
checkpoint by dev loss.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import polars as pl

from amrsim.config import Pipeline
from amrsim.errors import ConfigError
from amrsim.methods.s3bert import S3BERT_ASPECTS, Params, normalise_targets, partners, train_s3bert
from amrsim.methods.training import base_model_path
from amrsim.metrics.engine import score_pairs_parallel
from amrsim.stages.metrics import metric_graph_pairs
from amrsim.stages.train.common import SAMPLED_OUT, TrainingStage, sampled
from amrsim.warehouse import Warehouse
from amrsim.warehouse.store import OK

log = logging.getLogger(__name__)

METHOD = "s3bert"  # the method whose stage this is (amrsim.stages.train.LAYER_STAGES)

# the amr_metrics columns S3BERT regresses, in the paper's order, and the metrics-stage aspect producing each
ASPECT_OF_COLUMN = {"smatch_f1": "smatch"}


def required_columns(n_aspects: int) -> list[str]:
    return S3BERT_ASPECTS[:n_aspects]


def check_metric_config(pipe: Pipeline, params: Params) -> Any:
    """The pipeline's metrics options, after checking they compute every aspect S3BERT needs (a config error
    before any training, naming the missing aspects)."""
    metrics = pipe.spec.metrics
    if metrics is None:
        raise ConfigError(f"{pipe.where}: s3bert needs a `metrics:` section (its targets are the amr_metrics of the "
                          "training pairs)")
    options = metrics.options()
    needed = [ASPECT_OF_COLUMN.get(c, c) for c in required_columns(params.n_aspects)]
    missing = [a for a in needed if a not in options.aspects]
    if missing:
        raise ConfigError(f"{pipe.where}: s3bert needs metric aspect(s) {', '.join(missing)}, which "
                          "metrics.aspects leaves out")
    undone = [d for d in params.datasets if d not in metrics.datasets]
    if undone:
        raise ConfigError(f"{pipe.where}: s3bert datasets {undone} are not in metrics.datasets, so they have no "
                          "amr_metrics")
    return options


def scored_pairs(wh: Warehouse, dataset: str, split: str, langs: list[str], parser: str, options: Any,
                 columns: list[str]) -> tuple[pl.DataFrame, dict[str, int]]:
    """Pairs of one split with texts, graphs and their metric columns; and how many were left out, by reason."""
    pairs = wh.read(dataset, "pairs").filter(pl.col("split") == split)
    if "lang1" in pairs.columns:
        pairs = pairs.filter(pl.col("lang1").is_in(langs) & pl.col("lang2").is_in(langs))
    total = pairs.height
    pairs = pairs.filter(pl.col("status") == OK)
    with_graphs = metric_graph_pairs(wh, dataset, parser).filter(pl.col("split") == split)
    with_graphs = with_graphs.join(pairs.select(pair_key="key", sentence1="sentence1", sentence2="sentence2"),
                                   on="pair_key")
    keys = options.pair_keys(with_graphs["amr1"], with_graphs["amr2"])
    with_graphs = with_graphs.with_columns(pl.Series("key", keys, pl.String))
    metrics = wh.read(dataset, "amr_metrics") if wh.exists(dataset, "amr_metrics") else pl.DataFrame(
        {"key": [], "status": []}, schema={"key": pl.String, "status": pl.String})
    ok_metrics = metrics.filter(pl.col("status") == OK).select("key", *[c for c in columns if c in metrics.columns])
    rows = with_graphs.join(ok_metrics.unique("key"), on="key")
    for c in columns:
        if c not in rows.columns or (rows.height and rows[c].null_count() == rows.height):
            raise ConfigError(f"{dataset}.amr_metrics: column {c} is not computed for the {split} pairs; add its "
                              f"aspect to metrics.aspects and rerun the metrics stage before training s3bert")
    rows = rows.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in columns))
    skipped = {"failed pair rows": total - pairs.height,
               "graph failed or missing": pairs.height - with_graphs.height,
               "metrics failed or missing": with_graphs.height - rows.height}
    return rows.select("pair_key", "sentence1", "sentence2", "amr1", "amr2", *columns), skipped


def with_scored_negatives(rows: pl.DataFrame, columns: list[str], options: Any, seed: int,
                          workers: int | None) -> tuple[list[str], list[str], np.ndarray, int]:
    """Positives plus one negative per pair, the negatives' metrics computed now; negatives whose graphs fail to
    score are dropped (counted). Returns texts1, texts2, raw metric matrix, negatives dropped."""
    partner = partners(rows.height, np.random.default_rng(seed)).tolist()
    s1, s2, amr2 = rows["sentence1"].to_list(), rows["sentence2"].to_list(), rows["amr2"].to_list()
    frame = pl.DataFrame({"i": list(range(rows.height)), "amr1": rows["amr1"], "amr2": [amr2[j] for j in partner]})
    scored = score_pairs_parallel(frame, options, workers=workers)
    ok = scored.filter((pl.col("status") == OK) & pl.all_horizontal(pl.col(c).is_not_null() for c in columns))
    texts1 = s1 + [s1[i] for i in ok["i"]]
    texts2 = s2 + [s2[partner[i]] for i in ok["i"]]
    raw = np.vstack([rows.select(columns).to_numpy(), ok.select(columns).to_numpy()]).astype(np.float64)
    return texts1, texts2, raw, frame.height - ok.height


def _split(wh: Warehouse, params: Params, split: str, parser: str, options: Any, columns: list[str]
           ) -> tuple[list[str], list[str], np.ndarray, int, dict[str, int]]:
    """One split of every dataset: texts1, texts2, normalised targets, positive pairs, left out by reason."""
    parts, skipped = [], {}
    for ds in params.datasets:
        rows, left_out = scored_pairs(wh, ds, split, params.langs, parser, options, columns)
        parts.append(rows)
        for reason, n in left_out.items():
            skipped[reason] = skipped.get(reason, 0) + n
    # Delta tables and joins give no row order; sorted by content key, the rows (and the seeded sample, negatives
    # and data fingerprint drawn from them) are the same on every call, so an interrupted run can resume
    rows = pl.concat(parts, how="vertical_relaxed").sort("pair_key", "amr1", "amr2")
    cap = params.max_pairs if split == params.train_split else params.max_dev_pairs
    rows = sampled(rows, cap, params.seed, skipped)
    if rows.height < 2:
        return [], [], np.zeros((0, len(columns))), rows.height, skipped
    if params.negatives:
        texts1, texts2, raw, dropped = with_scored_negatives(rows, columns, options, params.seed, params.workers)
        skipped["negatives failed to score"] = dropped
    else:
        texts1, texts2, raw = rows["sentence1"].to_list(), rows["sentence2"].to_list(), rows.select(columns).to_numpy()
    return texts1, texts2, normalise_targets(raw, columns), rows.height, skipped


def train(pipe: Pipeline, params: Params, run_id: str) -> dict[str, Any]:
    stage = TrainingStage(pipe, METHOD, run_id)
    options = check_metric_config(pipe, params)
    parser = params.parser or options.extra.get("parser", "provided")
    columns = required_columns(params.n_aspects)
    with stage.record(params, params.datasets, ["pairs", "amr", "amr_metrics"]) as versions:
        t1, t2, y, positives, skipped = _split(stage.wh, params, params.train_split, parser, options, columns)
        if len(y) < 2:
            raise ConfigError(f"s3bert: fewer than 2 usable '{params.train_split}' pairs in {params.datasets} "
                              f"(left out: {skipped}); run the pipeline's parse/metrics stages first")
        dev = None
        dev_counts: dict[str, int] = {}
        if params.dev_split:
            d1, d2, dy, dev_positives, dev_counts = _split(stage.wh, params, params.dev_split, parser, options,
                                                           columns)
            dev_counts["positives"] = dev_positives
            dev = (d1, d2, dy) if len(dy) else None
        # failed: pairs left out for a reason in the data (graphs, metrics); a max_pairs sample is a choice
        stage.count(positives + sum(skipped.values()), len(y),
                    sum(n for reason, n in skipped.items() if reason != SAMPLED_OUT))
        data = {"pipeline": pipe.name, "datasets": params.datasets, "train_split": params.train_split,
                "dev_split": params.dev_split, "langs": params.langs, "parser": parser, "table_versions": versions,
                "metrics_options": {"aspects": list(options.aspects), "convention": options.convention,
                                    "vectors": options.vectors, "seed": options.seed},
                "train_positives": positives, "train_rows": len(y), "left_out": skipped,
                "dev": dev_counts | {"rows": len(dev[2]) if dev else 0}}
        log.info("s3bert: %d training rows (%d positive pairs), %d dev rows; left out %s", len(y), positives,
                 len(dev[2]) if dev else 0, skipped)
        result = stage.done(train_s3bert(base_model_path(params.base_model), t1, t2, y, dev, stage.out_dir, params,
                                         extra_meta={"base_model": params.base_model, "data": data}))
    return stage.summary(best_dev_loss=result["best_dev_loss"], initial_dev_loss=result["initial_dev_loss"],
                         left_out=skipped)
