"""The out-of-distribution protocol: leave-one-genre-out on STSb, STSb -> SICK-R and SICK-R -> STSb.

Each protocol split is a derived dataset `ood_<split>` built from a pipeline's source datasets
(`stsb_en_{train,dev,test}`, `sick_{train,dev,test}`) with pair splits `train`, `dev`, `test` (in-distribution: the
test pairs of the training distribution) and `ood` (the held-out test pairs), gold scaled to 0-1. This module
defines the splits and compares a model with its base; `amrsim.stages.evaluate.ood` builds and scores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from amrsim.errors import ConfigError

__all__ = ["DATASETS", "GENRES", "IN_SPLIT", "OUT_SPLIT", "SCORE_RANGE", "SOURCES", "SPLITS", "OodSplit", "genre_of",
           "ood_table", "split_named", "split_sources"]

GENRES = ("captions", "forums", "news")
SOURCES = {"stsb": ("stsb_en_train", "stsb_en_dev", "stsb_en_test"),
           "sick": ("sick_train", "sick_dev", "sick_test")}
IN_SPLIT, OUT_SPLIT = "test", "ood"  # the derived datasets' in- and out-of-distribution test splits
SCORE_RANGE = (0.0, 1.0)  # derived gold: every source's score scaled by its score_range


@dataclass(frozen=True)
class OodSplit:
    """One split of the protocol: train (and dev, in-distribution test) from `train_from`, `ood` from `test_from`;
    with `held_out` the STSb genre left out of train/dev/test and alone in `ood`."""

    name: str
    train_from: str  # stsb | sick
    test_from: str
    held_out: str | None = None

    @property
    def dataset(self) -> str:
        return "ood_" + self.name.replace("-", "_")

    @property
    def description(self) -> str:
        if self.held_out:
            rest = "+".join(g for g in GENRES if g != self.held_out)
            return f"STSb {rest} -> STSb {self.held_out}"
        return {"stsb": "STSb", "sick": "SICK-R"}[self.train_from] + " -> " + \
            {"stsb": "STSb", "sick": "SICK-R"}[self.test_from]


SPLITS: dict[str, OodSplit] = {s.name: s for s in [
    *(OodSplit(f"loo-{g}", "stsb", "stsb", g) for g in GENRES),
    OodSplit("stsb-to-sick", "stsb", "sick"),
    OodSplit("sick-to-stsb", "sick", "stsb"),
]}
DATASETS = {s.dataset: s for s in SPLITS.values()}


def genre_of(raw: str | None) -> str | None:
    """`main-captions` -> captions, `main-forum` / `main-forums` -> forums (STSb train spells it without the s),
    `main-news` -> news; None for anything else."""
    name = (raw or "").strip().lower().removeprefix("main-")
    name = {"forum": "forums", "caption": "captions"}.get(name, name)
    return name if name in GENRES else None


def split_named(name: str) -> OodSplit:
    if name not in SPLITS:
        raise ConfigError(f"unknown out-of-distribution split '{name}'; the protocol has {', '.join(SPLITS)}")
    return SPLITS[name]


def split_sources(name: str) -> list[str]:
    """The source datasets (pipeline dataset names) a split's derived dataset is built from."""
    split = split_named(name)
    return sorted({*SOURCES[split.train_from], SOURCES[split.test_from][2]})


def ood_table(results: pl.DataFrame, bases: Mapping[str, str | None], metric: str = "spearman") -> pl.DataFrame:
    """One row per (protocol split, model) from STS result rows of the derived datasets: in-distribution (`test`)
    and out-of-distribution (`ood`) scores, the base's, the differences, and `below_base` naming where the model
    scores under its base ("in", "ood", "in, ood"; "" when not below; null without a base to compare with)."""
    rows = results.filter((pl.col("task") == "sts") & (pl.col("metric") == metric)
                          & pl.col("dataset").is_in(list(DATASETS)) & pl.col("split").is_in([IN_SPLIT, OUT_SPLIT]))
    value = {(r["dataset"], r["model"], r["split"]): r["value"] for r in rows.iter_rows(named=True)}
    out = []
    order = list(DATASETS)
    for dataset, model in sorted({(d, m) for d, m, _ in value}, key=lambda dm: (order.index(dm[0]), dm[1])):
        base = bases.get(model)
        own = {s: value.get((dataset, model, s)) for s in (IN_SPLIT, OUT_SPLIT)}
        theirs = {s: value.get((dataset, base, s)) if base else None for s in (IN_SPLIT, OUT_SPLIT)}
        delta = {s: own[s] - theirs[s] if own[s] is not None and theirs[s] is not None else None  # type: ignore[operator]
                 for s in (IN_SPLIT, OUT_SPLIT)}
        compared = [s for s in (IN_SPLIT, OUT_SPLIT) if delta[s] is not None]
        below = ", ".join("in" if s == IN_SPLIT else "ood" for s in compared if delta[s] < 0)  # type: ignore[operator]
        out.append({"split": DATASETS[dataset].name, "train -> ood": DATASETS[dataset].description, "model": model,
                    "in": own[IN_SPLIT], "ood": own[OUT_SPLIT], "base": base, "base in": theirs[IN_SPLIT],
                    "base ood": theirs[OUT_SPLIT], "delta in": delta[IN_SPLIT], "delta ood": delta[OUT_SPLIT],
                    "below_base": below if compared else None})
    schema = {"split": pl.String, "train -> ood": pl.String, "model": pl.String, "in": pl.Float64, "ood": pl.Float64,
              "base": pl.String, "base in": pl.Float64, "base ood": pl.Float64, "delta in": pl.Float64,
              "delta ood": pl.Float64, "below_base": pl.String}
    return pl.DataFrame(out, schema=schema)
