"""PEAR in the pipeline: gold pairs from the warehouse, optional Optuna search, then
`amrsim.methods.pear.train.fit_pear`.

Training pairs are the ok pairs of `datasets` (split `train_split`) whose two sentences are in `langs`; gold scores
are normalised to 0-1 by each dataset's `score_range` (config), else by the min and max of its ok pairs. Mode `all`
trains one model on every language; `per_language` one model per language, saved as `<run_id>-<lang>`.

kNN re-sampling embeds the training sentences with the bi-encoder (`biencoder`), takes each sentence's k nearest
neighbours in its own language (amrsim.augment.knn, gold pairs left out) and weak-labels them with the cross-encoder
after E_weak epochs (with E_weak = 0, nothing is trained yet: the bi-encoder cosine labels them).

With `search`, an Optuna study (TPE, maximising Spearman on the dev pairs) runs `trials` new trials over the paper's
space, stored in `<warehouse>/models/pear/studies/<study>.journal` so a later run adds to it; every trial is upserted
into the Delta table `meta/optuna_trials` and the best parameters go to `<study>.best.json`. The final model trains
on all pairs with the best trial's parameters, or with the configured ones when no trial has completed.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

from amrsim.config import LoadedConfig, Pipeline
from amrsim.errors import ConfigError
from amrsim.evaluate.ood import SPLITS
from amrsim.methods.pear.train import (
    FUSED_METHOD,
    BaseOffset,
    CrossEncoderScorer,
    Hyper,
    NonFiniteLossError,
    base_cosines,
    base_targets,
    fit_fusion,
    fit_pear,
    gold_scale_line,
    normalise_scores,
    on_gold_scale,
    save_fused,
    save_run,
    spearman,
)
from amrsim.methods.training import MethodParams, atomic_json, base_model_path
from amrsim.stages.train.common import run_dir, table_versions, train_summary, training_run
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key
from amrsim.warehouse.store import OK

# optuna and other amrsim modules are imported inside the functions: keeps this module cheap, free of cycles

if TYPE_CHECKING:
    from amrsim.methods.pear.train import CrossEncoder, Hyper

log = logging.getLogger(__name__)

TRIALS_DATASET, TRIALS_TABLE = "meta", "optuna_trials"
SAMPLED_OUT = "over max_pairs (sampled out)"


class SearchParams(BaseModel):
    """Optuna search over the paper's space (ranges configurable); each trial trains on a seeded sample of
    `max_train_pairs` and is scored by Spearman on `max_dev_pairs` dev pairs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trials: StrictInt = Field(default=20, ge=0)  # new trials per run; a resumed study keeps its earlier ones
    timeout: StrictFloat | None = Field(default=None, gt=0)  # seconds for this run's trials
    study: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")  # default pear-<pipeline>
    max_train_pairs: StrictInt | None = Field(default=None, ge=2)
    max_dev_pairs: StrictInt | None = Field(default=None, ge=2)
    lr: tuple[StrictFloat, StrictFloat] = (1e-6, 1e-4)  # log-uniform
    k: tuple[StrictInt, StrictInt] = (0, 3)
    epochs: tuple[StrictInt, StrictInt] = (1, 5)
    e_weak: tuple[StrictInt, StrictInt] = (0, 2)
    max_grad_norm: tuple[StrictFloat, StrictFloat] = (0.1, 1.0)

    @model_validator(mode="after")
    def _ranges(self) -> SearchParams:
        for name in ("lr", "k", "epochs", "e_weak", "max_grad_norm"):
            lo, hi = getattr(self, name)
            if lo > hi or lo < 0 or (name in ("lr", "max_grad_norm", "epochs") and lo <= 0):
                raise ValueError(f"search.{name}: [{lo}, {hi}] must be a non-empty range of positive values "
                                 f"(k and e_weak may start at 0)")
        return self


class Params(MethodParams):
    datasets: list[str] = []  # pairs datasets with gold scores (required unless ood_split)
    # train on one split of the out-of-distribution protocol (amrsim.evaluate.ood, e.g. loo-forums): its derived
    # dataset's train pairs, dev pairs as dev; replaces datasets, train_split, dev_datasets and dev_split
    ood_split: str | None = None
    # also save `pear_fused:<run id>`: weight x z(this cross-encoder) + (1 - weight) x z(cosine of this bi-encoder,
    # e.g. minilm), z-scored on the dev pairs (else the training pairs); a model of its own, not PEAR
    fused_with: str | None = None
    # the cross-encoder's share; at 0.3 the fusion scored at or above the base on 4 of 5 held-out splits (pear.md)
    fused_weight: StrictFloat = Field(default=0.3, ge=0, le=1)
    # a residual cross-encoder: its score is σ(network + logit of this bi-encoder's cosine on the gold scale), the
    # head zeroed, so training starts from the bi-encoder's scores and learns a correction (needs it to score)
    residual_on: str | None = None
    # knowledge-preserving training: each gold pair's target mixes in this bi-encoder's cosine (e.g. minilm, PEAR's
    # base), put on the gold scale by a line fitted on the training pairs; base_target_weight is the cosine's share
    base_target: str | None = None
    base_target_weight: StrictFloat = Field(default=0.5, ge=0, lt=1)
    # knowledge-preserving pairs from other text: `distill_pairs` pairs of sentences from these datasets (their
    # sentences, no gold needed), half a sentence and its nearest neighbour by `biencoder`, half a sentence and a
    # random one, each targeted at that bi-encoder's cosine put on the gold scale (a line fitted on the training
    # pairs), trained with the gold pairs: the base's judgement on genres the gold does not cover
    distill_datasets: list[str] = []
    distill_pairs: StrictInt = Field(default=0, ge=0)
    # and this many pairs of a sentence of those datasets and an edited copy of it (English: negated, subject and
    # object swapped, or a modifier dropped; amrsim.augment.edits), targeted the same way: the base's judgement where
    # the words overlap but the meaning differs
    distill_edits: StrictInt = Field(default=0, ge=0)
    train_split: str = "train"
    dev_datasets: list[str] = []  # dev pairs: reported Spearman, the Optuna objective
    dev_split: str = "dev"
    langs: list[str] = ["en"]  # pairs whose two sentences are in these languages
    mode: Literal["all", "per_language"] = "all"
    base_model: str = "minilm"  # the packaged all-MiniLM-L6-v2 transformer, or hf:<hub id or path>
    lr: StrictFloat = Field(default=5e-5, gt=0)
    epochs: StrictInt = Field(default=3, ge=1)  # E
    e_weak: StrictInt = Field(default=0, ge=0)  # E_weak
    k: StrictInt = Field(default=0, ge=0)  # kNN neighbours per sentence; 0: no re-sampling
    max_grad_norm: StrictFloat = Field(default=1.0, gt=0)
    batch_size: StrictInt = Field(default=32, ge=1)
    max_length: StrictInt = Field(default=128, ge=8)
    both_orders: bool = False  # train every pair in both sentence orders (twice the steps)
    symmetric: bool = True  # a pair's score is the mean over both sentence orders (dev, search, saved model)
    biencoder: str = "minilm"  # neighbours for re-sampling (amrsim.encoders name)
    max_silver: StrictInt | None = Field(default=None, ge=1)  # a seeded sample of the kNN pairs
    max_pairs: StrictInt | None = Field(default=None, ge=2)  # a seeded sample of the training pairs
    search: SearchParams | None = None
    seed: StrictInt = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"

    @model_validator(mode="after")
    def _search_needs_dev(self) -> Params:
        if self.ood_split is not None:
            from amrsim.evaluate.ood import SPLITS

            if self.ood_split not in SPLITS:
                raise ValueError(f"ood_split '{self.ood_split}' is not a split of the out-of-distribution protocol; "
                                 f"one of {', '.join(SPLITS)}")
            if self.datasets or self.dev_datasets:
                raise ValueError("ood_split replaces datasets and dev_datasets: give one or the other")
        elif not self.datasets:
            raise ValueError("datasets: give at least one pairs dataset (or ood_split)")
        if self.search is not None and not self.dev_datasets and self.ood_split is None:
            raise ValueError("search needs dev_datasets: the Optuna objective is Spearman on the dev pairs")
        if bool(self.distill_pairs or self.distill_edits) != bool(self.distill_datasets):
            raise ValueError("distill_pairs (or distill_edits) and distill_datasets go together: how many pairs, "
                             "from which datasets")
        return self

    def dataset_refs(self) -> list[tuple[str, str]]:
        if self.ood_split is not None:  # the configured source files its derived dataset is built from
            from amrsim.evaluate.ood import split_sources

            return [("ood_split", d) for d in split_sources(self.ood_split)] + self._distill_refs()
        return ([("datasets", d) for d in self.datasets] + [("dev_datasets", d) for d in self.dev_datasets]
                + self._distill_refs())

    def _distill_refs(self) -> list[tuple[str, str]]:
        return [("distill_datasets", d) for d in self.distill_datasets]

    def on_ood_split(self) -> Params:
        """These params with datasets and splits pointing at the protocol split's derived dataset."""
        if self.ood_split is None:
            return self

        dataset = SPLITS[self.ood_split].dataset
        return self.model_copy(update={"datasets": [dataset], "train_split": "train", "dev_datasets": [dataset],
                                       "dev_split": "dev"})

    def hyper(self) -> Hyper:
        return Hyper(lr=self.lr, epochs=self.epochs, e_weak=self.e_weak, k=self.k,
                     max_grad_norm=self.max_grad_norm, batch_size=self.batch_size,
                     both_orders=self.both_orders)


# ---------------------------------------------------------------------------------------------------- data


def score_ranges(cfg: LoadedConfig, pipeline: str, wh: Warehouse,
                 datasets: list[str]) -> dict[str, tuple[float, float]]:
    """Each dataset's gold range: `score_range` from the config, else min and max over its ok pairs."""
    pipe = cfg.project.pipelines[pipeline]
    out: dict[str, tuple[float, float]] = {}
    for ds in datasets:
        given = pipe.datasets[ds].score_range if ds in pipe.datasets else None
        if given is not None:
            out[ds] = (float(given[0]), float(given[1]))
            continue
        scores = wh.read(ds, "pairs", columns=["score", "status"]).filter(
            (pl.col("status") == OK) & pl.col("score").is_not_null())["score"]
        if scores.len() < 2 or scores.min() == scores.max():
            raise ConfigError(f"pear: dataset '{ds}' has no score_range in the config and its ok pairs give no range "
                              f"to normalise by; set datasets.{ds}.score_range")
        out[ds] = (float(scores.min()), float(scores.max()))  # type: ignore[arg-type]
    return out


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
    frame = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()
    return frame, left


def distill_pairs(wh: Warehouse, params: Params, langs: list[str], gold: pl.DataFrame, dev: pl.DataFrame,
                  models_root: Path | None = None) -> tuple[pl.DataFrame, dict[str, Any]]:
    """`params.distill_pairs` knowledge-preserving pairs (sentence1, sentence2, target) from the `sentences` of
    `params.distill_datasets` in `langs`, none of them a sentence of the gold or dev pairs (seeded): half are a
    sentence and its nearest neighbour by `params.biencoder`, half a sentence and a random other one, so targets
    span the scale; then `params.distill_edits` pairs of an English sentence (not one of those anchors) and an edited
    copy of it (amrsim.augment.edits). Each target is the bi-encoder's cosine on the gold scale (`gold_scale_line`,
    fitted on `gold`). Also returns what model.json records of them."""
    from amrsim.augment.knn import knn  # (it normalises the vectors itself)
    from amrsim.evaluate.sts import cosine
    from amrsim.methods.loaders import load_encoder

    if params.distill_edits and "en" not in langs:
        raise ConfigError(f"pear: distill_edits edits English sentences; langs {langs} has no 'en' "
                          "(set distill_edits: 0)")
    seen = set(gold["sentence1_key"].to_list() + gold["sentence2_key"].to_list())
    if dev.height:
        seen |= set(dev["sentence1_key"].to_list() + dev["sentence2_key"].to_list())
    versions = table_versions(wh, params.distill_datasets, ["sentences"])
    parts = [wh.read(d, "sentences", version=versions.get(f"{d}.sentences"))
             .filter((pl.col("status") == OK) & pl.col("lang").is_in(langs)).select("key", "text", "lang")
             for d in params.distill_datasets]
    pool = (pl.concat(parts).unique("key").filter(~pl.col("key").is_in(list(seen))).sort("key")
            .filter(pl.col("text").str.strip_chars() != ""))
    half = params.distill_pairs // 2
    # neighbours among four times the anchors (close, not equal); twice the edits' sentences, as not every one edits
    pool = _sample(pool, 4 * max(half, 1) + 2 * params.distill_edits, params.seed)
    if pool.height < 4:
        raise ConfigError(f"pear: distill_datasets {params.distill_datasets} hold {pool.height} usable sentences in "
                          f"{langs} (not in the gold or dev pairs); ingest them first")
    texts = pool["text"].to_list()
    encoder = load_encoder(params.biencoder, device=params.device, models_root=models_root)
    vectors = np.asarray(encoder.encode(texts), np.float32)
    rng = np.random.default_rng(params.seed)
    anchors = rng.choice(pool.height, size=min(half, pool.height), replace=False)
    first, second = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    if half:
        _, nearest = knn(vectors, 1)
        others = (anchors + rng.integers(1, pool.height, size=len(anchors))) % pool.height  # never the anchor
        pair1, pair2 = np.concatenate([anchors, anchors]), np.concatenate([nearest[anchors, 0], others])
        keep = pair2 >= 0
        first.append(pair1[keep])
        second.append(pair2[keep])
    first_idx, second_idx = np.concatenate(first), np.concatenate(second)
    s1, s2 = [texts[i] for i in first_idx], [texts[j] for j in second_idx]
    cos = cosine(vectors[first_idx], vectors[second_idx]) if len(first_idx) else np.zeros(0, np.float32)
    edited: dict[str, int] = {}
    if params.distill_edits:
        rows, s2e, edited = _edited_pairs(pool, set(anchors.tolist()), params)
        # the sentences are the pool's, already encoded: only their edited copies are new
        cos = np.concatenate([cos, cosine(vectors[rows], np.asarray(encoder.encode(s2e), np.float32))])
        s1, s2 = s1 + [texts[i] for i in rows], s2 + s2e
    gold_cos = base_cosines(params.biencoder, gold["sentence1"].to_list(), gold["sentence2"].to_list(),
                            device=params.device, models_root=models_root)
    line = gold_scale_line(gold["target"].to_numpy(), gold_cos)
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


def _sample(frame: pl.DataFrame, cap: int | None, seed: int) -> pl.DataFrame:
    return frame.sample(cap, seed=seed, shuffle=True) if cap is not None and frame.height > cap else frame


class KnnSilver:
    """kNN silver pairs of a set of gold pairs: bi-encoder vectors and neighbour lists computed once per (language,
    k); weak labels from the cross-encoder handed in (or the bi-encoder cosine when none)."""

    def __init__(self, gold: pl.DataFrame, biencoder: str, device: str, max_silver: int | None, seed: int):
        self.biencoder, self.device, self.max_silver, self.seed = biencoder, device, max_silver, seed
        sides = pl.concat([gold.select(key="sentence1_key", text="sentence1", lang="lang1"),
                           gold.select(key="sentence2_key", text="sentence2", lang="lang2")])
        self.sentences = sides.unique("key", keep="first").sort("key")
        self.labelled = set(zip(gold["sentence1_key"].to_list(), gold["sentence2_key"].to_list(), strict=True))
        self._vectors: dict[str, tuple[list[str], list[str], np.ndarray]] = {}

    def _lang(self, lang: str) -> tuple[list[str], list[str], np.ndarray]:
        if lang not in self._vectors:
            from amrsim.methods.loaders import load_encoder

            rows = self.sentences.filter(pl.col("lang") == lang)
            encoder = load_encoder(self.biencoder, device=self.device)
            texts = rows["text"].to_list()
            self._vectors[lang] = (rows["key"].to_list(), texts, np.asarray(encoder.encode(texts), np.float32))
        return self._vectors[lang]

    def __call__(self, model: CrossEncoder | None, k: int) -> tuple[list[str], list[str], np.ndarray]:
        from amrsim.augment.knn import CosineScorer, augment_pairs

        t1: list[str] = []
        t2: list[str] = []
        labels: list[float] = []
        for lang in sorted(set(self.sentences["lang"].to_list())):
            keys, texts, vectors = self._lang(lang)
            if len(keys) < 2:
                continue
            scorer = CosineScorer(self.biencoder) if model is None else CrossEncoderScorer(model, texts, "pear")
            silver = augment_pairs(keys, vectors, min(k, len(keys) - 1), labelled=self.labelled, scorer=scorer)
            silver = _sample(silver.filter(pl.col("status") == OK), self.max_silver, self.seed)
            index = {key: i for i, key in enumerate(keys)}
            t1 += [texts[index[a]] for a in silver["sentence1_key"]]
            t2 += [texts[index[b]] for b in silver["sentence2_key"]]
            labels += silver["weak_label"].to_list()
        return t1, t2, np.clip(np.asarray(labels, dtype=np.float32), 0.0, 1.0)


def _fit(params: Params, gold: pl.DataFrame, hp: Hyper, seed: int, models_root: Path | None = None,
         distill: pl.DataFrame | None = None) -> tuple[CrossEncoder, dict[str, Any]]:
    """The cross-encoder on `gold` (kNN silver from its sentences), and `distill`'s pairs (`distill_pairs`) trained
    as gold pairs where given."""
    silver = KnnSilver(gold, params.biencoder, params.device, params.max_silver, seed) if hp.k > 0 else None
    targets, line = gold["target"].to_numpy(), None
    if params.base_target is not None:
        cos = base_cosines(params.base_target, gold["sentence1"].to_list(), gold["sentence2"].to_list(),
                           device=params.device, models_root=models_root)
        targets, line = base_targets(targets, cos, params.base_target_weight)
    texts1, texts2 = gold["sentence1"].to_list(), gold["sentence2"].to_list()
    if distill is not None and distill.height:
        texts1, texts2 = texts1 + distill["sentence1"].to_list(), texts2 + distill["sentence2"].to_list()
        targets = np.concatenate([np.asarray(targets, np.float32), distill["target"].to_numpy().astype(np.float32)])
    offset = None
    if params.residual_on is not None:
        cos = base_cosines(params.residual_on, gold["sentence1"].to_list(), gold["sentence2"].to_list(),
                           device=params.device, models_root=models_root)
        offset = BaseOffset(params.residual_on, **gold_scale_line(gold["target"].to_numpy(), cos),
                            device=params.device, models_root=None if models_root is None else str(models_root))
    model, fit = fit_pear(base_model_path(params.base_model), texts1, texts2, targets, hp, augment=silver, seed=seed,
                          device=params.device, max_length=params.max_length, offset=offset)
    fit["gold_pairs"] = gold.height  # (fit_pear counts the distilled pairs with them)
    if offset is not None:
        fit["residual"] = offset.record()
    if line is not None:
        fit["base_target"] = {"model": params.base_target, "weight": params.base_target_weight, **line}
    return model, fit


def dev_spearman(model: CrossEncoder, dev: pl.DataFrame, batch_size: int = 64,
                 symmetric: bool = False) -> float | None:
    if dev.height < 2:
        return None
    pred = model.predict(dev["sentence1"].to_list(), dev["sentence2"].to_list(), batch_size, symmetric=symmetric)
    return spearman(pred, dev["target"].to_numpy())


def save_fused_run(wh: Warehouse, pear_name: str, params: Params, pairs: pl.DataFrame, pear_pred: np.ndarray,
                   meta: dict[str, Any]) -> str:
    """Fit the fusion of a PEAR run with `params.fused_with` on `pairs` (PEAR's predictions given) and save it as
    `pear_fused:<same run id>`; its dev Spearman goes to model.json `metrics`."""
    assert params.fused_with is not None
    cos = base_cosines(params.fused_with, pairs["sentence1"].to_list(), pairs["sentence2"].to_list(),
                       device=params.device, models_root=wh.models_root)
    fusion = fit_fusion(pear_pred, cos, params.fused_with, params.fused_weight)
    run = pear_name.partition(":")[2]
    rho = spearman(fusion.combine(pear_pred, cos), pairs["target"].to_numpy())
    save_fused(run_dir(wh, FUSED_METHOD, run), pear_name, fusion,
               {**meta, "metrics": {"fit_pairs": pairs.height, "fit_spearman": rho}})
    return f"{FUSED_METHOD}:{run}"


# ---------------------------------------------------------------------------------------------------- Optuna


def study_path(wh: Warehouse, study: str) -> Path:
    return wh.models_root / "pear" / "studies" / f"{study}.journal"


def open_study(wh: Warehouse, study: str, seed: int = 0) -> Any:
    """The study (created, or loaded to resume) in its journal file under the warehouse."""
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    path = study_path(wh, study)
    path.parent.mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(str(path)))
    existing = optuna.study.get_all_study_names(storage)
    previous = len(optuna.load_study(study_name=study, storage=storage).trials) if study in existing else 0
    # seeded by the trial count too: a resumed search does not replay the first run's suggestions
    sampler = optuna.samplers.TPESampler(seed=seed + previous)
    return optuna.create_study(study_name=study, storage=storage, direction="maximize", sampler=sampler,
                               load_if_exists=True)


def suggest(trial: Any, space: SearchParams, base: Hyper) -> Hyper:
    """One point of the paper's space: lr log-uniform, k, E, E_weak integers, max grad norm uniform."""
    return replace(base, lr=trial.suggest_float("lr", *space.lr, log=True), k=trial.suggest_int("k", *space.k),
                   epochs=trial.suggest_int("epochs", *space.epochs),
                   e_weak=trial.suggest_int("e_weak", *space.e_weak),
                   max_grad_norm=trial.suggest_float("max_grad_norm", *space.max_grad_norm))


def trials_frame(study: Any) -> pl.DataFrame:
    """One row per trial of the study (the `meta/optuna_trials` rows)."""
    rows = []
    for t in study.trials:
        seconds = ((t.datetime_complete - t.datetime_start).total_seconds()
                   if t.datetime_complete and t.datetime_start else None)
        rows.append({"key": content_key("optuna_trial", study.study_name, t.number), "study": study.study_name,
                     "trial": t.number, "state": t.state.name, "value": t.value,
                     "lr": t.params.get("lr"), "k": t.params.get("k"), "epochs": t.params.get("epochs"),
                     "e_weak": t.params.get("e_weak"), "max_grad_norm": t.params.get("max_grad_norm"),
                     "seconds": seconds, "started_at": t.datetime_start, "error": t.user_attrs.get("error")})
    schema = {"key": pl.String, "study": pl.String, "trial": pl.Int64, "state": pl.String, "value": pl.Float64,
              "lr": pl.Float64, "k": pl.Int64, "epochs": pl.Int64, "e_weak": pl.Int64, "max_grad_norm": pl.Float64,
              "seconds": pl.Float64, "started_at": pl.Datetime("us"), "error": pl.String}
    return pl.DataFrame(rows, schema=schema)


def best_or_none(study: Any) -> tuple[dict[str, Any] | None, str]:
    """(best params with their value, a one-line message); None when no trial has completed."""
    import optuna

    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not done:
        states: dict[str, int] = {}
        for t in study.trials:
            states[t.state.name] = states.get(t.state.name, 0) + 1
        seen = ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items())) or "no trials at all"
        return None, (f"Optuna study '{study.study_name}' has no completed trial ({seen}); "
                      "training with the configured params instead")
    best = study.best_trial
    return ({**best.params, "value": best.value, "trial": best.number},
            f"Optuna study '{study.study_name}': best of {len(done)} completed trial(s) is trial {best.number} "
            f"(dev Spearman {best.value:.2f})")


def run_search(wh: Warehouse, params: Params, gold: pl.DataFrame, dev: pl.DataFrame, study_name: str,
               seed: int = 0) -> dict[str, Any]:
    """Run `search.trials` more trials (up to `search.timeout` seconds) in the stored study; record every trial in
    `meta/optuna_trials` and the best in `<study>.best.json`. Never raises for failed trials: a study with no
    completed trial says so in `message` and returns `best: None`."""
    import optuna


    space = params.search
    assert space is not None
    study = open_study(wh, study_name, seed)
    train = _sample(gold, space.max_train_pairs, seed)
    dev = _sample(dev, space.max_dev_pairs, seed)
    base = params.hyper()

    def objective(trial: optuna.Trial) -> float:
        hp = suggest(trial, space, base)
        try:
            model, _ = _fit(params, train, hp, seed, wh.models_root)
            value = dev_spearman(model, dev, symmetric=params.symmetric)
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
    out = {"study": study_name, "storage": str(study_path(wh, study_name)), "trials_total": len(study.trials),
           "trials_this_run": len(study.trials) - before, "completed": int((frame["state"] == "COMPLETE").sum()),
           "best": best, "message": message, "train_pairs": train.height, "dev_pairs": dev.height}
    atomic_json(study_path(wh, study_name).with_suffix(".best.json"), out)
    return out


# ---------------------------------------------------------------------------------------------------- train


def train(pipe: Pipeline, params: Params, run_id: str) -> dict[str, Any]:
    cfg, pipeline = pipe.loaded, pipe.name  # TEMPORARY: until this stage reads `pipe` only
    """Search (when configured) and train the PEAR cross-encoder(s); models under warehouse/models/pear/."""

    started = time.perf_counter()
    wh = Warehouse(cfg.warehouse_root)
    if params.ood_split is not None:
        from amrsim.evaluate.ood import SCORE_RANGE, derive_split

        derive_split(wh, cfg, pipeline, params.ood_split, run_id)
        params = params.on_ood_split()
        ranges = {params.datasets[0]: SCORE_RANGE}
    else:
        ranges = score_ranges(cfg, pipeline, wh, list(dict.fromkeys(params.datasets + params.dev_datasets)))
    groups = [[lang] for lang in params.langs] if params.mode == "per_language" else [list(params.langs)]
    with training_run(wh, pipeline, "pear", run_id, params) as run:
        versions = table_versions(wh, params.datasets + params.dev_datasets, ["pairs"])
        run.input_versions = versions
        models, rows_in, rows_used, failed, details = [], 0, 0, 0, {}
        for langs in groups:
            name = run_id if params.mode == "all" else f"{run_id}-{langs[0]}"
            out_dir = run_dir(wh, "pear", name)
            gold, left = gold_pairs(wh, params.datasets, params.train_split, langs, ranges)
            rows_in += gold.height + sum(left.values())
            failed += sum(left.values())
            if params.max_pairs is not None and gold.height > params.max_pairs:
                left[SAMPLED_OUT] = gold.height - params.max_pairs
                gold = _sample(gold, params.max_pairs, params.seed)
            if gold.height < 2:
                raise ConfigError(f"pear: fewer than 2 usable '{params.train_split}' pairs in {params.datasets} for "
                                  f"language(s) {langs} (left out: {left}); ingest the datasets first")
            dev = (gold_pairs(wh, params.dev_datasets, params.dev_split, langs, ranges)[0]
                   if params.dev_datasets else pl.DataFrame())
            hp, search = params.hyper(), None
            if params.search is not None:
                study = params.search.study or f"pear-{pipeline}"
                search = run_search(wh, params, gold, dev, study if params.mode == "all" else f"{study}-{langs[0]}",
                                    params.seed)
                if search["best"] is not None:
                    b = search["best"]
                    hp = replace(hp, lr=b["lr"], k=b["k"], epochs=b["epochs"], e_weak=b["e_weak"],
                                 max_grad_norm=b["max_grad_norm"])
            t0 = time.perf_counter()
            log.info("pear %s: %d gold pairs, %d dev pairs, %s", name, gold.height, dev.height, hp)
            distill, distilled = (distill_pairs(wh, params, langs, gold, dev, wh.models_root)
                                  if params.distill_datasets else (None, None))
            model, fit = _fit(params, gold, hp, params.seed, wh.models_root, distill)
            train_seconds = time.perf_counter() - t0
            # dev predictions serve the dev Spearman and the fusion's scaling (gold pairs when there is no dev)
            fit_on = dev if dev.height >= 2 else gold if params.fused_with else None
            fit_pred = None if fit_on is None else model.predict(
                fit_on["sentence1"].to_list(), fit_on["sentence2"].to_list(), symmetric=params.symmetric)
            dev_rho = spearman(fit_pred, dev["target"].to_numpy()) if dev.height >= 2 else None
            data = {"pipeline": pipeline, "datasets": params.datasets, "train_split": params.train_split,
                    "dev_datasets": params.dev_datasets, "dev_split": params.dev_split, "langs": langs,
                    "mode": params.mode, "score_ranges": {d: list(r) for d, r in ranges.items()},
                    "table_versions": versions, "left_out": left, "dev_pairs": dev.height}
            metrics = {"dev_spearman": dev_rho, "gold_pairs": fit["gold_pairs"], "silver_pairs": fit["silver_pairs"],
                       "train_rows": fit["train_rows"], "train_seconds": round(train_seconds, 1),
                       "final_loss": fit["history"][-1]["loss"] if fit["history"] else None}
            save_run(model, out_dir, {"base_model": params.base_model, "params": asdict(hp), "seed": params.seed,
                                      "symmetric": params.symmetric,
                                      "device": model.device, "biencoder": params.biencoder, "metrics": metrics,
                                      "history": fit["history"], "search": search, "data": data,
                                      "base_target": fit.get("base_target"), "distill": distilled,
                                      "residual": fit.get("residual")})
            models.append(f"pear:{name}")
            if params.fused_with is not None and fit_on is not None and fit_pred is not None:
                try:
                    models.append(save_fused_run(wh, f"pear:{name}", params, fit_on, fit_pred,
                                                 {"data": data, "seed": params.seed, "dev_spearman_pear": dev_rho}))
                except ValueError as e:  # PEAR itself is saved; say why the fusion is not
                    log.warning("pear %s: no pear_fused model: %s", name, e)
                    details.setdefault(name, {})["fused"] = str(e)
            rows_used += gold.height
            details[name] = {**details.get(name, {}), "dev_spearman": dev_rho,
                             **({"search": search["message"]} if search else {}),
                             "silver_pairs": fit["silver_pairs"], "params": asdict(hp)}
        if params.mode == "per_language":  # the request record of the whole run (incremental reruns) lives here
            index = run_dir(wh, "pear", run_id)
            index.mkdir(parents=True, exist_ok=True)
            (index / "languages.json").write_text(json.dumps({"models": models}, indent=2) + "\n", encoding="utf-8")
        run.rows_in, run.rows_computed, run.rows_failed, run.rows_out = rows_in, rows_used, failed, rows_used
    summary = train_summary("pear", run_id, rows_in, rows_used, failed, started, True,
                            model_dir=str(run_dir(wh, "pear", run_id) if params.mode == "all"
                                          else wh.models_root / "pear"), models=models, runs=details)
    summary["model"] = ", ".join(models)
    return summary
