"""The out-of-distribution protocol: leave-one-genre-out on STSb, STSb -> SICK-R and SICK-R -> STSb.

Each protocol split is a derived warehouse dataset `ood_<split>` built from the pipeline's source datasets
(`stsb_en_{train,dev,test}`, `sick_{train,dev,test}`), with pair splits `train`, `dev`, `test` (in-distribution:
the test pairs of the training distribution) and `ood` (the held-out test pairs). Rows keep ingest's content keys,
source file and line, so a rebuild from unchanged files writes nothing. Gold scores are scaled to 0-1 by each
source's `score_range`, so one table can hold STSb (0-5) and SICK (1-5) pairs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from amrsim.config import DatasetConfig, LoadedConfig, StsEvalConfig
from amrsim.encoders import base_model, find_trained
from amrsim.errors import ConfigError
from amrsim.warehouse.keys import config_hash
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.store import OK, Warehouse

# other amrsim modules are imported inside the functions: keeps this module cheap to import, free of cycles

GENRE_COLUMN = "genre"  # the STS benchmark's first column: main-captions, main-forum(s), main-news
GENRES = ("captions", "forums", "news")
SOURCES = {"stsb": ("stsb_en_train", "stsb_en_dev", "stsb_en_test"),
           "sick": ("sick_train", "sick_dev", "sick_test")}
IN_SPLIT, OUT_SPLIT = "test", "ood"  # the derived datasets' in- and out-of-distribution test splits
SCORE_RANGE = (0.0, 1.0)  # derived gold: every source's score scaled by its score_range
DEFAULT_BASE = "minilm"
PIPELINE = "ood"  # the pipeline in pipelines.yaml naming the source files


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


def source_config(cfg: LoadedConfig, pipeline: str, name: str) -> DatasetConfig:
    """A source dataset of the protocol as the pipeline configures it; its score_range is required."""
    pipe = cfg.project.pipelines[pipeline]
    if name not in pipe.datasets:
        raise ConfigError(f"{cfg.path}: pipeline '{pipeline}' has no dataset '{name}': the out-of-distribution "
                          f"protocol reads {', '.join(n for names in SOURCES.values() for n in names)}")
    ds = pipe.datasets[name]
    if ds.kind != "pairs" or ds.score_range is None:
        raise ConfigError(f"{cfg.path}: pipeline '{pipeline}', datasets.{name}: the out-of-distribution protocol "
                          f"needs kind pairs with a score_range (gold is scaled to 0-1 by it)")
    return ds


def _source_tables(cfg: LoadedConfig, pipeline: str, name: str, split: str,
                   genres: Iterable[str] | None) -> dict[str, pl.DataFrame]:
    """Pairs and sentences of one source file as ingest normalises them, under pair split `split`; with `genres`,
    only rows of those STSb genres, and a row whose genre is none of the three kept as a failed row."""
    from amrsim.ingest.normalise import normalise, source_columns, text_columns
    from amrsim.ingest.readers import ERROR, read_rows

    ds = source_config(cfg, pipeline, name).model_copy(update={"split": split})
    if ds.column("split"):
        ds = ds.model_copy(update={"columns": {k: v for k, v in ds.columns.items() if k != "split"}})
    path = cfg.resolve_path(ds.path)
    columns = source_columns(ds)
    if genres is not None and GENRE_COLUMN not in columns:
        columns = [*columns, GENRE_COLUMN]
    frame = read_rows(path, ds.resolved_format(), columns, ds.hf_split, text_columns(ds))
    if genres is not None:
        genre = pl.col(GENRE_COLUMN).map_elements(genre_of, return_dtype=pl.String)
        frame = frame.with_columns(genre.alias("__genre"))
        unknown = pl.col("__genre").is_null()
        reason = pl.format("genre '{}' is none of " + ", ".join(GENRES), pl.col(GENRE_COLUMN).fill_null(""))
        frame = (frame.filter(unknown | pl.col("__genre").is_in(list(genres)))
                 .with_columns(pl.when(unknown).then(pl.concat_str([pl.col(ERROR), reason], separator="; ",
                                                                  ignore_nulls=True))
                               .otherwise(pl.col(ERROR)).alias(ERROR))
                 .drop("__genre"))
    tables = normalise(ds, frame, Path(str(path)).name)
    lo, hi = ds.score_range  # type: ignore[misc]
    tables["pairs"] = tables["pairs"].with_columns((pl.col("score") - lo) / (hi - lo))
    return {t: tables[t] for t in ("sentences", "pairs")}


def split_tables(cfg: LoadedConfig, pipeline: str, split: OodSplit) -> dict[str, pl.DataFrame]:
    """The derived dataset's sentences and pairs (train, dev, test, ood), built from the source files."""
    train, dev, test = SOURCES[split.train_from]
    kept = [g for g in GENRES if g != split.held_out] if split.held_out else None
    parts = [_source_tables(cfg, pipeline, train, "train", kept), _source_tables(cfg, pipeline, dev, "dev", kept),
             _source_tables(cfg, pipeline, test, IN_SPLIT, kept),
             _source_tables(cfg, pipeline, SOURCES[split.test_from][2], OUT_SPLIT,
                            [split.held_out] if split.held_out else None)]
    return {t: pl.concat([p[t] for p in parts], how="vertical_relaxed").unique("key", keep="first",
                                                                                 maintain_order=True)
            for t in ("sentences", "pairs")}


def derive_split(wh: Warehouse, cfg: LoadedConfig, pipeline: str, name: str, run_id: str) -> StageRun:
    """Sync `ood_<split>`'s sentences and pairs with the source files (ingest's staged sync: one commit per table,
    only changed keys written), with a lineage row."""
    from amrsim.ingest.staging import Stage, sync_staged

    split = split_named(name)
    sources = split_sources(name)
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="derive:ood", dataset=split.dataset,
                   config_hash=config_hash({"split": split.name, "sources": [
                       source_config(cfg, pipeline, s).model_dump(mode="json") for s in sources]}))
    with record_stage(wh, run):
        from amrsim.warehouse.keys import file_stat_digest

        run.input_versions = {s: file_stat_digest(cfg.resolve_path(source_config(cfg, pipeline, s).path))
                              for s in sources}  # type: ignore[misc]
        tables = split_tables(cfg, pipeline, split)
        pairs = tables["pairs"]
        run.rows_in = pairs.height
        run.rows_failed = int((pairs["status"] != OK).sum())
        wh.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".derive-{split.dataset}-", dir=wh.root) as tmp:
            stage = Stage(Path(tmp))
            stage.add(tables)
            for table in ("sentences", "pairs"):
                added, removed = sync_staged(wh, split.dataset, table, stage)
                if added or removed:
                    run.outputs.append(table)
                if table == "pairs":
                    run.rows_computed = added
        run.rows_out = pairs.height
    return run


# ---------------------------------------------------------------------------------------------------- scoring


def recorded_base(model: str, models_root: Path | str | None = None) -> str | None:
    """The bi-encoder a trained model started from, as its model.json records it (`base_model`, DuEAM's
    `learner_name`, meaning's `base_encoder`), when that is an
    encoder name; None for packaged or hf: encoders (they are bases) and for models that record none."""
    if model.startswith("hf:") or ":" not in model:
        return None

    try:
        meta = find_trained(model, models_root).meta
    except ValueError:
        return None
    base = base_model(meta)
    return base if isinstance(base, str) and (base in ("minilm", "muse") or base.startswith("hf:")) else None


def base_for(model: str, models_root: Path | str | None = None) -> str | None:
    """What a model is compared with: its recorded base, else minilm; None for a base encoder itself."""
    if model.startswith("hf:") or ":" not in model:
        return None
    return recorded_base(model, models_root) or DEFAULT_BASE


def trained_on(model: str, models_root: Path | str | None = None) -> list[str] | None:
    """The datasets a trained model's model.json says it trained on (`data.datasets`), None when unknown."""
    if model.startswith("hf:") or ":" not in model:
        return None

    try:
        data = find_trained(model, models_root).meta.get("data") or {}
    except ValueError:
        return None
    found = data.get("datasets") if isinstance(data, dict) else None
    return [str(d) for d in found] if isinstance(found, list) else None


def ood_table(results: pl.DataFrame, bases: Mapping[str, str | None], metric: str = "spearman") -> pl.DataFrame:
    """One row per (protocol split, model) from STS result rows of the derived datasets: in-distribution (`test`)
    and out-of-distribution (`ood`) scores, the base's, the differences, and `below_base` naming where the model
    scores under its base ("in", "ood", "in, ood"; "" when not below; null without a base to compare with)."""
    rows = results.filter((pl.col("task") == "sts") & (pl.col("metric") == metric)
                          & pl.col("dataset").is_in(list(DATASETS)) & pl.col("split").is_in([IN_SPLIT, OUT_SPLIT]))
    value: dict[tuple[str, str, str], float | None] = {}
    for r in rows.iter_rows(named=True):
        value[(r["dataset"], r["model"], r["split"])] = r["value"]
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


def evaluate_ood(wh: Warehouse, cfg: LoadedConfig, pipeline: str, encoders: Mapping[str, Sequence[str]],
                 run_id: str, batch_size: int = 64, device: str = "auto") -> tuple[pl.DataFrame, list[str]]:
    """Derive each split's dataset (incrementally), score its `test` and `ood` pairs with the split's encoders
    (results reused when unchanged) and return (result rows, notes)."""
    from amrsim.stages.evaluate import sts_stage

    frames, notes = [], []
    for name, names in encoders.items():
        split = split_named(name)
        derive_split(wh, cfg, pipeline, name, run_id)
        sts = StsEvalConfig(encoders=list(dict.fromkeys(names)), datasets=[split.dataset],
                            splits=[IN_SPLIT, OUT_SPLIT], lang_pairs=["en-en"])
        _, rows = sts_stage(wh, pipeline, sts, run_id, batch_size=batch_size, device=device)
        frames.append(rows)
        for model in names:
            seen = trained_on(model, wh.models_root)
            if seen is not None and split.dataset not in seen:
                notes.append(f"{name}: {model} trained on {', '.join(seen)}, not on {split.dataset}: its 'ood' score "
                             f"is not out-of-distribution (train with --param ood_split={name})")
    rows = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    return rows, notes
