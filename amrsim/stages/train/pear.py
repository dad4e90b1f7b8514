"""PEAR in the pipeline: gold pairs of `datasets` in `langs` from the warehouse (normalised to 0-1 by each dataset's
`score_range`), kNN silver pairs of their sentences, an optional Optuna search (a study kept under
`<models>/pear/studies/`, its trials in `meta/optuna_trials`), then `amrsim.methods.pear.fit_pear`."""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from amrsim.config import Pipeline
from amrsim.errors import ConfigError
from amrsim.evaluate.ood import SCORE_RANGE
from amrsim.evaluate.sts import correlations, cosine
from amrsim.files import atomic_json, check_own, own_dir
from amrsim.methods.loaders import load_encoder
from amrsim.methods.pear import (
    FUSED_METHOD,
    BaseOffset,
    Params,
    PearCrossEncoder,
    base_cosines,
    base_targets,
    checkpoint_state,
    cross_encoder_scorer,
    fit_fusion,
    fit_pear,
    gold_scale_line,
    normalise_scores,
    on_gold_scale,
    save_fused,
    save_run,
)
from amrsim.methods.pear.params import SEARCHED
from amrsim.methods.pear.train import Augmenter
from amrsim.methods.training import NonFiniteLossError, base_model_path
from amrsim.stages.evaluate.ood import derive_split
from amrsim.stages.train.common import TrainingStage, read_pinned, run_dir, sampled, score_range, table_versions
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.store import OK

log = logging.getLogger(__name__)

METHOD = "pear"  # the method whose stage this is (amrsim.stages.train.LAYER_STAGES)

TRIALS_DATASET, TRIALS_TABLE = "meta", "optuna_trials"


# ---------------------------------------------------------------------------------------------------- data


def gold_pairs(wh: Warehouse, datasets: list[str], split: str, langs: list[str],
               ranges: dict[str, tuple[float, float]]) -> tuple[pl.DataFrame, dict[str, int]]:
    """Ok pairs of one split in `langs` with texts, languages and the 0-1 target; rows left out, by reason."""
    parts, left = [], {"failed pair rows": 0, "no score": 0}
    for ds in datasets:
        pairs = wh.read(ds, "pairs").filter((pl.col("split") == split) & pl.col("lang1").is_in(langs)
                                            & pl.col("lang2").is_in(langs))
        ok = pairs.filter(pl.col("status") == OK)
        scored = ok.filter(pl.col("score").is_not_null())
        left["failed pair rows"] += pairs.height - ok.height
        left["no score"] += ok.height - scored.height
        lo, hi = ranges[ds]
        parts.append(scored.select("sentence1_key", "sentence2_key", "sentence1", "sentence2", "lang1", "lang2")
                     .with_columns(dataset=pl.lit(ds), target=pl.Series(normalise_scores(scored["score"], lo, hi))))
    return (pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()), left


def _cosines(name: str, pairs: pl.DataFrame, params: Params, models_root: Path | None) -> np.ndarray:
    """Cosine of the bi-encoder `name`'s embeddings of each pair's two sentences."""
    return base_cosines(load_encoder(name, device=params.device, models_root=models_root),
                        pairs["sentence1"].to_list(), pairs["sentence2"].to_list())


def distill_pairs(wh: Warehouse, params: Params, langs: list[str], gold: pl.DataFrame,
                  dev: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, Any]]:
    """`params.distill_pairs` pairs (sentence1, sentence2, target) of `params.distill_datasets`' sentences in `langs`
    that are in no gold or dev pair: half nearest neighbours by `params.biencoder`, half random partners (targets span
    the scale), then `params.distill_edits` (English sentence, edited copy) pairs; targets the bi-encoder's cosine on
    the gold scale (the line fitted on `gold`). Also returns what model.json records of them."""
    from amrsim.augment.knn import knn  # (it normalises the vectors itself)

    if params.distill_edits and "en" not in langs:
        raise ConfigError(f"pear: distill_edits edits English sentences; langs {langs} has no 'en' "
                          "(set distill_edits: 0)")
    seen = {k for pairs in (gold, dev) if pairs.height for c in ("sentence1_key", "sentence2_key") for k in pairs[c]}
    versions = table_versions(wh, params.distill_datasets, ["sentences"])
    parts = [read_pinned(wh, versions, d, "sentences").filter((pl.col("status") == OK) & pl.col("lang").is_in(langs))
             .select("key", "text", "lang") for d in params.distill_datasets]
    pool = (pl.concat(parts).unique("key").filter(~pl.col("key").is_in(list(seen))).sort("key")
            .filter(pl.col("text").str.strip_chars() != ""))
    half = params.distill_pairs // 2
    # neighbours among four times the anchors (close, not equal); twice the edits' sentences, as not every one edits
    pool = sampled(pool, 4 * max(half, 1) + 2 * params.distill_edits, params.seed)
    if pool.height < 4:
        raise ConfigError(f"pear: distill_datasets {params.distill_datasets} hold {pool.height} usable sentences in "
                          f"{langs} (not in the gold or dev pairs); ingest them first")
    texts = pool["text"].to_list()
    encoder = load_encoder(params.biencoder, device=params.device, models_root=wh.models_root)
    vectors = np.asarray(encoder.encode(texts), np.float32)
    rng = np.random.default_rng(params.seed)
    anchors = rng.choice(pool.height, size=min(half, pool.height), replace=False)
    first, second = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if half:
        _, nearest = knn(vectors, 1)
        others = (anchors + rng.integers(1, pool.height, size=len(anchors))) % pool.height  # never the anchor
        first, second = np.concatenate([anchors, anchors]), np.concatenate([nearest[anchors, 0], others])
        first, second = first[second >= 0], second[second >= 0]
    s1, s2 = [texts[i] for i in first], [texts[j] for j in second]
    cos = cosine(vectors[first], vectors[second])
    edited: dict[str, int] = {}
    if params.distill_edits:
        rows, s2e, edited = _edited_pairs(pool, set(anchors.tolist()), params)
        # the sentences are the pool's, already encoded: only their edited copies are new
        cos = np.concatenate([cos, cosine(vectors[rows], np.asarray(encoder.encode(s2e), np.float32))])
        s1, s2 = s1 + [texts[i] for i in rows], s2 + s2e
    line = gold_scale_line(gold["target"].to_numpy(), _cosines(params.biencoder, gold, params, wh.models_root))
    frame = pl.DataFrame({"sentence1": s1, "sentence2": s2, "target": on_gold_scale(cos, line).astype(np.float32)},
                         schema={"sentence1": pl.String, "sentence2": pl.String, "target": pl.Float32})
    return frame, {"datasets": params.distill_datasets, "pairs": frame.height, "sentences": pool.height,
                   "biencoder": params.biencoder, **line, "table_versions": versions,
                   **({"edits": edited} if params.distill_edits else {})}


def _edited_pairs(pool: pl.DataFrame, anchors: set[int], params: Params) -> tuple[list[int], list[str], dict[str, int]]:
    """`params.distill_edits` (sentence, edited copy) pairs from the English sentences of `pool` that are not
    `anchors`: the sentences' rows in `pool`, their edited copies, and how many of each edit."""
    from amrsim.amr.ud import load_spacy
    from amrsim.augment.edits import edited_copies

    rows = [i for i, lang in enumerate(pool["lang"]) if lang == "en" and i not in anchors]
    texts = pool["text"].to_list()
    edits = edited_copies([texts[i] for i in rows], load_spacy("en"), params.distill_edits, params.seed)
    if not edits:
        raise ConfigError(f"pear: no sentence of distill_datasets {params.distill_datasets} could be edited "
                          "(amrsim.augment.edits needs a clause with a verb); set distill_edits: 0")
    counts = {name: sum(1 for _, e, _ in edits if e == name) for name in sorted({e for _, e, _ in edits})}
    return [rows[i] for i, _, _ in edits], [text for _, _, text in edits], counts


def knn_silver(gold: pl.DataFrame, params: Params, models_root: Path | None) -> Augmenter:
    """The augmenter of `fit_pear`: kNN silver pairs of the gold pairs' sentences, by language, weak-labelled by the
    cross-encoder handed in (by the bi-encoder's cosine when none)."""
    from amrsim.augment.knn import CosineScorer, augment_pairs

    sides = pl.concat([gold.select(key="sentence1_key", text="sentence1", lang="lang1"),
                       gold.select(key="sentence2_key", text="sentence2", lang="lang2")])
    sentences = sides.unique("key", keep="first").sort("key")
    labelled = set(zip(gold["sentence1_key"].to_list(), gold["sentence2_key"].to_list(), strict=True))

    def augment(model: PearCrossEncoder | None, k: int) -> tuple[list[str], list[str], np.ndarray]:
        encoder = load_encoder(params.biencoder, device=params.device, models_root=models_root)
        t1: list[str] = []
        t2: list[str] = []
        labels: list[float] = []
        for lang in sorted(set(sentences["lang"].to_list())):
            rows = sentences.filter(pl.col("lang") == lang)
            if rows.height < 2:
                continue
            keys, texts = rows["key"].to_list(), rows["text"].to_list()
            scorer = CosineScorer(params.biencoder) if model is None else cross_encoder_scorer(model, texts, "pear")
            silver = augment_pairs(keys, np.asarray(encoder.encode(texts), np.float32), min(k, len(keys) - 1),
                                   labelled=labelled, scorer=scorer)
            silver = sampled(silver.filter(pl.col("status") == OK), params.max_silver, params.seed)
            index = {key: i for i, key in enumerate(keys)}
            t1 += [texts[index[a]] for a in silver["sentence1_key"]]
            t2 += [texts[index[b]] for b in silver["sentence2_key"]]
            labels += silver["weak_label"].to_list()
        return t1, t2, np.clip(np.asarray(labels, dtype=np.float32), 0.0, 1.0)

    return augment


def _fit(params: Params, gold: pl.DataFrame, models_root: Path | None = None, distill: pl.DataFrame | None = None,
         out_dir: Path | None = None, carry: dict[str, Any] | None = None) -> tuple[PearCrossEncoder, dict[str, Any]]:
    """The cross-encoder on `gold` (kNN silver from its sentences) and `distill`'s pairs, trained as gold pairs."""
    texts1, texts2, targets = gold["sentence1"].to_list(), gold["sentence2"].to_list(), gold["target"].to_numpy()
    extra: dict[str, Any] = {}
    if params.base_target is not None:
        cos = _cosines(params.base_target, gold, params, models_root)
        targets, line = base_targets(targets, cos, params.base_target_weight)
        extra["base_target"] = {"model": params.base_target, "weight": params.base_target_weight, **line}
    if distill is not None and distill.height:
        texts1, texts2 = texts1 + distill["sentence1"].to_list(), texts2 + distill["sentence2"].to_list()
        targets = np.concatenate([np.asarray(targets, np.float32), distill["target"].to_numpy().astype(np.float32)])
    offset = None
    if params.residual_on is not None:
        encoder = load_encoder(params.residual_on, device=params.device, models_root=models_root)
        cos = base_cosines(encoder, gold["sentence1"].to_list(), gold["sentence2"].to_list())
        offset = BaseOffset(encoder, params.residual_on, **gold_scale_line(gold["target"].to_numpy(), cos))
        extra["residual"] = offset.record()
    model, fit = fit_pear(base_model_path(params.base_model), texts1, texts2, targets, params, offset=offset,
                          augment=knn_silver(gold, params, models_root) if params.k > 0 else None, out_dir=out_dir,
                          carry=carry)
    return model, {**fit, "gold_pairs": gold.height, **extra}  # (fit_pear counts the distilled pairs as gold)


# ---------------------------------------------------------------------------------------------------- Optuna


def study_path(wh: Warehouse, study: str) -> Path:
    return wh.models_root / "pear" / "studies" / f"{study}.journal"


def open_study(wh: Warehouse, study: str, seed: int = 0) -> Any:
    """The study (created, or loaded to resume) in its journal file under the warehouse."""
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    path = study_path(wh, study)
    own_dir(path.parent)
    check_own(path, in_place=True)  # optuna appends to the journal by name, through a link
    opened = optuna.create_study(study_name=study, storage=JournalStorage(JournalFileBackend(str(path))),
                                 direction="maximize", load_if_exists=True)
    # seeded by the trial count too: a resumed search does not replay the first run's suggestions
    opened.sampler = optuna.samplers.TPESampler(seed=seed + len(opened.trials))
    return opened


def trials_frame(study: Any) -> pl.DataFrame:
    """One row per trial of the study (the `meta/optuna_trials` rows)."""
    rows = [{"key": content_key("optuna_trial", study.study_name, t.number), "study": study.study_name,
             "trial": t.number, "state": t.state.name, "value": t.value, **{n: t.params.get(n) for n in SEARCHED},
             "seconds": None if t.duration is None else t.duration.total_seconds(), "started_at": t.datetime_start,
             "error": t.user_attrs.get("error")} for t in study.trials]
    schema = {"key": pl.String, "study": pl.String, "trial": pl.Int64, "state": pl.String, "value": pl.Float64,
              "lr": pl.Float64, "k": pl.Int64, "epochs": pl.Int64, "e_weak": pl.Int64, "max_grad_norm": pl.Float64,
              "seconds": pl.Float64, "started_at": pl.Datetime("us"), "error": pl.String}
    return pl.DataFrame(rows, schema=schema)


def best_or_none(study: Any) -> tuple[dict[str, Any] | None, str]:
    """(best params with their value, a one-line message); None when no trial has completed."""
    import optuna

    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not done:
        states = Counter(t.state.name for t in study.trials)
        seen = ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items())) or "no trials at all"
        return None, (f"Optuna study '{study.study_name}' has no completed trial ({seen}); "
                      "training with the configured params instead")
    best = study.best_trial
    return ({**best.params, "value": best.value, "trial": best.number},
            f"Optuna study '{study.study_name}': best of {len(done)} completed trial(s) is trial {best.number} "
            f"(dev Spearman {best.value:.2f})")


def run_search(wh: Warehouse, params: Params, gold: pl.DataFrame, dev: pl.DataFrame, study_name: str) -> dict[str, Any]:
    """`search.trials` more trials (up to `search.timeout` seconds) of the stored study over the paper's space, every
    trial in `meta/optuna_trials`, the best in `<study>.best.json`; failed trials are recorded (none done: no best)."""
    import optuna

    space = params.search
    assert space is not None
    study = open_study(wh, study_name, params.seed)
    train, dev = sampled(gold, space.max_train_pairs, params.seed), sampled(dev, space.max_dev_pairs, params.seed)

    def objective(trial: optuna.Trial) -> float:
        # the ranges' types say how to draw (lr log-uniform), in SEARCHED's order
        ranges = {name: getattr(space, name) for name in SEARCHED}
        hp = params.model_copy(update={name: (trial.suggest_float if isinstance(lo, float) else trial.suggest_int)(
            name, lo, hi, log=name == "lr") for name, (lo, hi) in ranges.items()})
        try:
            model = _fit(hp, train, wh.models_root)[0]
            value = None if dev.height < 2 else correlations(model.predict(
                dev["sentence1"].to_list(), dev["sentence2"].to_list(), symmetric=params.symmetric),
                dev["target"].to_numpy())["spearman"]
        except (ValueError, RuntimeError, NonFiniteLossError) as e:
            trial.set_user_attr("error", f"{type(e).__name__}: {e}"[:500])
            raise
        if value is None:
            trial.set_user_attr("error", "dev Spearman undefined (constant predictions)")
            raise optuna.TrialPruned("dev Spearman undefined")
        return value

    before = len(study.trials)
    if space.trials:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study.optimize(objective, n_trials=space.trials, timeout=space.timeout,
                       catch=(ValueError, RuntimeError, NonFiniteLossError))
    frame = trials_frame(study)
    if frame.height:
        wh.upsert(TRIALS_DATASET, TRIALS_TABLE, frame)
    best, message = best_or_none(study)
    (log.info if best is not None else log.warning)("%s", message)  # no completed trial: say so, go on
    # the journal relative to the models root: the record travels with the run's model.json
    out = {"study": study_name, "storage": str(study_path(wh, study_name).relative_to(wh.models_root)),
           "trials_total": len(study.trials),
           "trials_this_run": len(study.trials) - before, "completed": int((frame["state"] == "COMPLETE").sum()),
           "best": best, "message": message, "train_pairs": train.height, "dev_pairs": dev.height}
    atomic_json(study_path(wh, study_name).with_suffix(".best.json"), out)
    return out


def _hyper(stage: TrainingStage, params: Params, langs: list[str], gold: pl.DataFrame, dev: pl.DataFrame,
           out_dir: Path) -> tuple[Params, dict[str, Any] | None]:
    """The configured hyperparameters or the search's best (a run resuming its checkpoint: what its search chose)."""
    if params.search is None:
        return params, None
    saved = checkpoint_state(out_dir)
    if saved is not None:
        chosen, search = saved["extra"]["hyper"], saved["extra"]["search"]
    else:
        study = params.search.study or f"pear-{stage.pipe.name}"
        search = run_search(stage.wh, params, gold, dev, study if params.mode == "all" else f"{study}-{langs[0]}")
        chosen = search["best"] or {}
    return params.model_copy(update={k: chosen[k] for k in SEARCHED if k in chosen}), search


# ---------------------------------------------------------------------------------------------------- train


def train_langs(stage: TrainingStage, params: Params, name: str, langs: list[str],
                ranges: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Search (when configured), train and save `pear:<name>` on the pairs in `langs` (and `pear_fused:<name>`)."""
    wh, out_dir = stage.wh, run_dir(stage.wh, METHOD, name)
    gold, left = gold_pairs(wh, params.datasets, params.train_split, langs, ranges)
    out: dict[str, Any] = {"rows_in": gold.height + sum(left.values()), "failed": sum(left.values()), "models": [],
                           "completed": False}
    gold = sampled(gold, params.max_pairs, params.seed, left)
    if gold.height < 2:
        raise ConfigError(f"pear: fewer than 2 usable '{params.train_split}' pairs in {params.datasets} for "
                          f"language(s) {langs} (left out: {left}); ingest the datasets first")
    out["rows_used"] = gold.height
    dev = gold_pairs(wh, params.dev_datasets, params.dev_split, langs, ranges)[0]  # no dev_datasets: an empty frame
    hp, search = _hyper(stage, params, langs, gold, dev, out_dir)
    t0 = time.perf_counter()
    log.info("pear %s: %d gold pairs, %d dev pairs, %s", name, gold.height, dev.height, hp.recipe())
    distill, distilled = distill_pairs(wh, hp, langs, gold, dev) if hp.distill_datasets else (None, None)
    model, fit = _fit(hp, gold, wh.models_root, distill, out_dir, {"hyper": hp.recipe(), "search": search})
    train_seconds = time.perf_counter() - t0
    out["details"] = {**({"search": search["message"]} if search else {}), "silver_pairs": fit.get("silver_pairs"),
                      "params": hp.recipe(), **({"resumed_from": fit["resumed_from"]} if fit["resumed_from"] else {})}
    if not fit["completed"]:  # stopped by max_steps: the checkpoint is kept, the same run id resumes
        out["details"]["stopped_at_step"] = fit["steps"]
        return out
    # dev predictions serve the dev Spearman and the fusion's scaling (gold pairs when there is no dev)
    fit_on = dev if dev.height >= 2 else gold
    pred = model.predict(fit_on["sentence1"].to_list(), fit_on["sentence2"].to_list(), symmetric=hp.symmetric) \
        if fit_on is dev or hp.fused_with else None
    dev_rho = correlations(pred, dev["target"].to_numpy())["spearman"] if fit_on is dev else None
    data = {"pipeline": stage.pipe.name, "datasets": hp.datasets, "train_split": hp.train_split,
            "dev_datasets": hp.dev_datasets, "dev_split": hp.dev_split, "langs": langs, "mode": hp.mode,
            "score_ranges": {d: list(r) for d, r in ranges.items()}, "table_versions": stage.versions,
            "left_out": left, "dev_pairs": dev.height}
    metrics = {"dev_spearman": dev_rho, "gold_pairs": fit["gold_pairs"], "silver_pairs": fit["silver_pairs"],
               "train_rows": fit["train_rows"], "train_seconds": round(train_seconds, 1),
               "final_loss": fit["history"][-1]["loss"] if fit["history"] else None}
    save_run(model, out_dir, {"base_model": hp.base_model, "params": hp.recipe(), "seed": hp.seed,
                              "symmetric": hp.symmetric, "device": model.device, "biencoder": hp.biencoder,
                              "metrics": metrics, "history": fit["history"], "search": search, "data": data,
                              "base_target": fit.get("base_target"), "distill": distilled,
                              "residual": fit.get("residual")})
    out["models"].append(f"{METHOD}:{name}")
    out["completed"], out["details"] = True, {"dev_spearman": dev_rho, **out["details"]}
    if hp.fused_with is not None:  # `pear_fused:<name>`: this run's scores fused with the base's cosine
        try:
            cos = _cosines(hp.fused_with, fit_on, hp, wh.models_root)
            fusion = fit_fusion(pred, cos, hp.fused_with, hp.fused_weight)
            rho = correlations(fusion.combine(pred, cos), fit_on["target"].to_numpy())["spearman"]
            save_fused(run_dir(wh, FUSED_METHOD, name), f"{METHOD}:{name}", fusion,
                       {"data": data, "seed": hp.seed, "dev_spearman_pear": dev_rho,
                        "metrics": {"fit_pairs": fit_on.height, "fit_spearman": rho}})
            out["models"].append(f"{FUSED_METHOD}:{name}")
        except ValueError as e:  # PEAR itself is saved; say why the fusion is not
            log.warning("pear %s: no pear_fused model: %s", name, e)
            out["details"] = {"fused": str(e), **out["details"]}
    return out


def train(pipe: Pipeline, params: Params, run_id: str) -> dict[str, Any]:
    """Search (when configured) and train the PEAR cross-encoder(s); models under warehouse/models/pear/."""
    stage = TrainingStage(pipe, METHOD, run_id)
    if params.ood_split is not None:
        derive_split(stage.wh, pipe, params.ood_split, run_id)
        params = params.on_ood_split()
        ranges = {params.datasets[0]: SCORE_RANGE}
    else:  # each dataset's gold range: `score_range` from the config, else min and max over its ok pairs
        ranges = {ds: score_range(pipe, ds, lambda ds=ds: stage.wh.read(ds, "pairs", columns=["score", "status"]),
                                  f"pear: dataset '{ds}' has no score_range in the config and its ok pairs give no "
                                  f"range to normalise by; set datasets.{ds}.score_range")
                  for ds in dict.fromkeys(params.datasets + params.dev_datasets)}
    groups = [[lang] for lang in params.langs] if params.mode == "per_language" else [list(params.langs)]
    with stage.record(params, params.datasets + params.dev_datasets, ["pairs"]):
        names = [run_id if params.mode == "all" else f"{run_id}-{langs[0]}" for langs in groups]
        runs = {name: train_langs(stage, params, name, langs, ranges)
                for name, langs in zip(names, groups, strict=True)}
        models = [m for r in runs.values() for m in r["models"]]
        if params.mode == "per_language":  # the request record of the whole run (incremental reruns) lives here
            stage.out_dir.mkdir(parents=True, exist_ok=True)
            atomic_json(stage.out_dir / "languages.json", {"models": models})
        stage.count(*(sum(r[key] for r in runs.values()) for key in ("rows_in", "rows_used", "failed")))
        stage.rows_out = sum(r["rows_used"] for r in runs.values() if r["completed"])
        stage.completed = all(r["completed"] for r in runs.values())
    return stage.summary(model_dir=str(stage.out_dir if params.mode == "all" else stage.wh.models_root / METHOD),
                         models=models, runs={name: r["details"] for name, r in runs.items()}, model=", ".join(models))
