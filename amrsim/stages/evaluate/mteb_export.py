"""`amrsim results export --format mteb`: the rows of `eval/results` that measure an MTEB task (STSBenchmark,
SICK-R, multilingual STS, STS17, STS22, Tatoeba) written as an MTEB result cache, `<out>/results/<model>/<revision>/`
with `<Task>.json` and `model_meta.json`, so `mteb.ResultCache(<out>).load_results()` reads amrsim's numbers next to
published ones. Scores are MTEB's: fractions (amrsim stores x 100), STS's main score `cosine_spearman` (a
cross-encoder's own score stands in for the cosine), Tatoeba's the F1 of retrieving English for the other side.

A task is exported only when it has every split and subset MTEB's main score averages over: mteb's task score is the
mean over those, so a file with some of them would carry a number that is not the leaderboard's. Incomplete tasks
are reported (and written only when asked, `include_incomplete`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from amrsim.encoders import base_model, find_trained, parse_name
from amrsim.encoders.facts import PACKAGED_FACTS, base_facts
from amrsim.errors import AmrsimError
from amrsim.evaluate.mteb_tasks import MTEB_TASKS, MTEB_VERSION, MtebTask, subset_for, task_of_dataset
from amrsim.files import atomic_json
from amrsim.stages.evaluate.card import table_versions
from amrsim.stages.evaluate.results import latest_results

NO_REVISION = "no_revision_available"  # MTEB's folder name for a model without a revision


@dataclass(frozen=True)
class Exported:
    path: Path
    model: str
    task: str
    datasets: tuple[str, ...]
    subsets: int
    missing: dict[str, list[str]]  # split -> subsets MTEB's main score needs that amrsim has no result for

    @property
    def complete(self) -> bool:
        return not self.missing


def parse_task_overrides(items: list[str] | None) -> dict[str, str]:
    """`DATASET=TASK` pairs -> {dataset: task}; an unknown MTEB task name is an error naming the known ones."""
    out: dict[str, str] = {}
    for item in items or []:
        dataset, sep, task = item.partition("=")
        if not sep or not dataset or not task:
            raise AmrsimError(f"--task '{item}': expected DATASET=TASK (e.g. stsb_en_test=STSBenchmark)")
        if task not in MTEB_TASKS and task != "none":
            raise AmrsimError(f"--task '{item}': MTEB task '{task}' unknown; known: {', '.join(MTEB_TASKS)}, none")
        out[dataset] = task
    return out


def task_for(dataset: str, overrides: dict[str, str]) -> MtebTask | None:
    """The MTEB task a warehouse dataset measures: named by `overrides` (`none` = not an MTEB task), else by the
    dataset's name prefix, else None."""
    name = overrides.get(dataset)
    if name is None:
        return task_of_dataset(dataset)
    return None if name == "none" else MTEB_TASKS[name]


def model_folder(model: str) -> tuple[str, str]:
    """(MTEB model name, revision) of a result row's model: `<method>:<run id>` -> (`amrsim/<method>`, run id)."""
    if model in PACKAGED_FACTS:  # muse is not on the Hub: amrsim/muse
        return PACKAGED_FACTS[model].hub_id or f"amrsim/{model}", NO_REVISION
    name = parse_name(model)
    if name.kind == "hf":
        return name.ident, NO_REVISION
    return f"amrsim/{name.method}", name.run


def mteb_languages(languages: tuple[str, ...] | None) -> list[str] | None:
    """ISO 639-1 codes -> MTEB's ISO 639-3 + script (`en` -> `eng-Latn`)."""
    if not languages:
        return None
    import langcodes

    out = []
    for code in languages:
        lang = langcodes.Language.get(code)
        out.append(f"{lang.to_alpha3()}-{lang.maximize().script}")
    return out


def model_facts(model: str, models_root: Path | None = None) -> dict[str, Any]:
    """What amrsim knows of a result model for its `model_meta.json`: a packaged or Hub encoder's Hub facts; a
    trained run's date, base model (`adapted_from`, license) and the MTEB tasks whose data it trained or selected
    on (`training_datasets`, MTEB's mark of a model that is not zero-shot there)."""
    name = parse_name(model)
    if not name.trained:
        facts = base_facts(model)
        return {"license": facts.license, "languages": mteb_languages(facts.languages),
                "reference": f"https://huggingface.co/{facts.hub_id}" if facts.hub_id else None}
    try:
        run = find_trained(model, models_root)
    except (OSError, ValueError):
        return {}
    base = base_facts(base_model(run.meta))
    trained_on = {task.name for table in table_versions(run.meta) if (task := task_for(table.partition(".")[0], {}))}
    return {"release_date": str(run.meta.get("created_at") or "")[:10] or None, "adapted_from": base.hub_id,
            "license": base.license, "languages": mteb_languages(base.languages),  # the base's: what it reads
            "training_datasets": sorted(trained_on) or None}


def _sts_scores(values: dict[str, float | None]) -> dict[str, float] | None:
    spearman, pearson = values.get("spearman"), values.get("pearson")
    if spearman is None or pearson is None:
        return None  # undefined (constant predictions): MTEB has no way to say so
    # `pearson`/`spearman` are MTEB's "the model's own similarity"; MTEB's main score reads `cosine_*`: for a
    # bi-encoder amrsim's similarity is the cosine, for a cross-encoder its score is the only similarity there is
    out = {"pearson": pearson / 100, "spearman": spearman / 100, "cosine_pearson": pearson / 100,
           "cosine_spearman": spearman / 100}
    return {**out, "main_score": out["cosine_spearman"]}


def _bitext_scores(values: dict[str, float | None], flipped: bool) -> dict[str, float] | None:
    direction = "tgt2src" if flipped else "src2tgt"  # MTEB retrieves English for the non-English side
    accuracy, f1 = values.get(f"accuracy_{direction}"), values.get(f"f1_{direction}")
    if accuracy is None or f1 is None:
        return None  # a row stored before amrsim computed F1: evaluate again to export it
    return {"accuracy": accuracy / 100, "f1": f1 / 100, "main_score": f1 / 100}


def mteb_documents(results: pl.DataFrame, overrides: dict[str, str] | None = None) -> \
        tuple[dict[tuple[str, str], tuple[dict, set[str]]], list[str]]:
    """(model, MTEB task) -> (TaskResult document, amrsim datasets it came from), from the latest result rows; and
    why results that map to an MTEB task were left out (another number of items than MTEB's data, no F1)."""
    overrides = overrides or {}
    latest = latest_results(results).filter(pl.col("task").is_in(["sts", "bitext"]))
    grouped: dict[tuple[str, str, str, str, str], dict[str, float | None]] = {}
    stored: dict[tuple[str, str, str, str, str], datetime] = {}
    sizes: dict[tuple[str, str, str, str, str], int] = {}
    for row in latest.iter_rows(named=True):
        group = (row["model"], row["dataset"], row["split"], row["lang_pair"], row["task"])
        grouped.setdefault(group, {})[row["metric"]] = row["value"]
        sizes[group] = row["n"]
        if row["created_at"] is not None:
            stored[group] = max(stored.get(group, row["created_at"]), row["created_at"])
    docs: dict[tuple[str, str], tuple[dict, set[str]]] = {}
    left_out: list[str] = []
    seen: dict[tuple[str, str, str, str], str] = {}
    for (model, dataset, split, lang_pair, kind), values in sorted(grouped.items()):
        task = task_for(dataset, overrides)
        if task is None or task.kind != kind or split not in task.splits:
            continue
        found = subset_for(task, lang_pair)
        if found is None:
            continue
        subset, flipped = found
        what = f"{model} {dataset} {split} {lang_pair} -> {task.name} {subset}"
        expected = task.sizes.get(split, {}).get(subset)
        n = sizes[(model, dataset, split, lang_pair, kind)]
        if expected is not None and n != expected:
            left_out.append(f"{what}: {n} items, MTEB's data has {expected}; not comparable")
            continue
        scores = _sts_scores(values) if kind == "sts" else _bitext_scores(values, flipped)
        if scores is None:
            left_out.append(f"{what}: " + ("no F1 stored (evaluate again)" if kind == "bitext" else
                                           "undefined correlation"))
            continue
        slot = (model, task.name, split, subset)
        if slot in seen and seen[slot] != dataset:
            raise AmrsimError(f"datasets '{seen[slot]}' and '{dataset}' both give {task.name} {split} subset "
                              f"'{subset}' for {model}: name the one to export with --task DATASET={task.name} "
                              f"and --task OTHER=none")
        seen[slot] = dataset
        doc, sources = docs.setdefault((model, task.name), ({
            "dataset_revision": task.revision, "task_name": task.name, "mteb_version": MTEB_VERSION,
            "scores": {}, "evaluation_time": None, "kg_co2_emissions": None, "date": None}, set()))
        doc["scores"].setdefault(split, []).append(
            {**scores, "hf_subset": subset, "languages": task.subsets[subset], "mteb_version": MTEB_VERSION})
        sources.add(dataset)
        stamp = stored.get((model, dataset, split, lang_pair, kind))
        if stamp is not None:  # when the newest number in the file was computed
            doc["date"] = max(doc["date"] or stamp.isoformat(), stamp.isoformat())
    return docs, left_out


def missing_parts(task: MtebTask, doc: dict) -> dict[str, list[str]]:
    """split -> the subsets of `task` MTEB's main score averages over that `doc` (a TaskResult document) lacks."""
    return task.missing({split: {e["hf_subset"] for e in entries} for split, entries in doc["scores"].items()})


def describe_missing(missing: dict[str, list[str]], shown: int = 4) -> str:
    parts = []
    for split, subsets in sorted(missing.items()):
        more = f" and {len(subsets) - shown} more" if len(subsets) > shown else ""
        parts.append(f"{split}: {', '.join(subsets[:shown])}{more}")
    return "; ".join(parts)


def model_meta(model: str, cross_encoder: bool, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """`model_meta.json` of an exported model, the fields of mteb's `ModelMeta` (`ResultCache` finds a model's
    results through it). `facts` adds what amrsim knows of the model (release_date, license, languages,
    adapted_from, training_datasets, embed_dim, max_tokens); unknown fields stay null, as mteb has them."""
    name, revision = model_folder(model)
    meta: dict[str, Any] = {
        "name": name, "revision": revision, "release_date": None, "languages": None, "n_parameters": None,
        "memory_usage_mb": None, "max_tokens": None, "embed_dim": None, "license": None, "open_weights": True,
        "public_training_code": None, "public_training_data": None, "framework": ["Sentence Transformers", "PyTorch"],
        "reference": None, "similarity_fn_name": None if cross_encoder else "cosine", "use_instructions": False,
        "training_datasets": None, "adapted_from": None, "superseded_by": None, "modalities": ["text"],
        "model_type": ["cross-encoder" if cross_encoder else "dense"], "loader": None, "loader_kwargs": {},
        "citation": None, "contacts": None, "experiment_kwargs": None}
    return {**meta, **{k: v for k, v in (facts or {}).items() if k in meta and v is not None}}


def export_mteb(results: pl.DataFrame, out_dir: Path, overrides: dict[str, str] | None = None,
                cross_encoders: set[str] = frozenset(), models: list[str] | None = None,
                include_incomplete: bool = False,
                facts: Callable[[str], dict[str, Any]] | None = None) -> tuple[list[Exported], list[str]]:
    """Write an MTEB result cache under `out_dir`: `results/<model>/<revision>/<Task>.json` per (model, task) with
    every split and subset the task's main score needs (all tasks with `include_incomplete`), and the folder's
    `model_meta.json` (`facts(model)` adds what is known of the model). Returns what was written and what was left
    out or is incomplete, with the reason."""
    if models:
        results = results.filter(pl.col("model").is_in(models))
    docs, left_out = mteb_documents(results, overrides)
    written = []
    for (model, task), (doc, sources) in sorted(docs.items()):
        missing = missing_parts(MTEB_TASKS[task], doc)
        if missing:
            left_out.append(f"{model} {task}: incomplete, MTEB's main score also averages over "
                            f"{describe_missing(missing)}" + ("; written anyway (--include-incomplete)"
                                                              if include_incomplete else
                                                              "; not written (--include-incomplete writes it)"))
            if not include_incomplete:
                continue
        name, revision = model_folder(model)
        folder = out_dir / "results" / re.sub(r"[/\s]", "__", name) / revision
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{task}.json"
        atomic_json(path, doc)
        atomic_json(folder / "model_meta.json", model_meta(model, model in cross_encoders,
                                                          facts(model) if facts else None))
        written.append(Exported(path, model, task, tuple(sorted(sources)),
                                sum(len(v) for v in doc["scores"].values()), missing))
    return written, left_out
