"""`amrsim results export --format mteb`: the rows of `eval/results` that measure an MTEB task (STSBenchmark,
SICK-R, multilingual STS, Tatoeba) written as MTEB result files, `<model>/<revision>/<Task>.json`, so amrsim's
numbers sit next to published MTEB tables. Scores are MTEB's: fractions (amrsim stores x 100), STS's main score
cosine Spearman, Tatoeba's the weighted F1 of source -> English retrieval."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from amrsim.encoders import parse_name
from amrsim.errors import AmrsimError
from amrsim.evaluate.mteb_tasks import MTEB_SIZES, MTEB_TASKS, MTEB_VERSION, MtebTask
from amrsim.files import atomic_json
from amrsim.stages.evaluate.results import latest_results

# dataset name prefix -> MTEB task, first match wins (stsb_multi_* before stsb_*); `--task DATASET=TASK` overrides
DEFAULT_TASKS = (("stsb_multi", "STSBenchmarkMultilingualSTS"), ("stsb", "STSBenchmark"), ("sick", "SICK-R"),
                 ("sts17", "STS17"), ("sts22", "STS22"), ("tatoeba", "Tatoeba"))
NO_REVISION = "no_revision_available"  # MTEB's folder name for a model without a revision
PACKAGED_NAMES = {"minilm": "sentence-transformers/all-MiniLM-L6-v2", "muse": "amrsim/muse"}


@dataclass(frozen=True)
class Exported:
    path: Path
    model: str
    task: str
    datasets: tuple[str, ...]
    subsets: int


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
        name = next((task for prefix, task in DEFAULT_TASKS if dataset.lower().startswith(prefix)), None)
    return None if name in (None, "none") else MTEB_TASKS[name]


def subset_for(task: MtebTask, lang_pair: str) -> tuple[str, bool] | None:
    """(MTEB subset, reversed) for an amrsim language pair: `en-en` -> `default` for English-only tasks, `de-de`
    -> `de` for per-language subsets, `en-de` as is; Tatoeba's `eng-deu` -> (`deu-eng`, reversed). None if MTEB
    has no such subset."""
    l1, _, l2 = lang_pair.partition("-")
    if list(task.subsets) == ["default"]:
        return ("default", False) if {l1, l2} <= {"en", "eng", ""} else None
    for candidate, flipped in ((lang_pair, False), (l1 if l1 == l2 else "", False), (f"{l2}-{l1}", True)):
        if candidate in task.subsets:
            return candidate, flipped and task.kind == "bitext"
    return None


def model_folder(model: str) -> tuple[str, str]:
    """(MTEB model name, revision) of a result row's model: `<method>:<run id>` -> (`amrsim/<method>`, run id)."""
    if model in PACKAGED_NAMES:
        return PACKAGED_NAMES[model], NO_REVISION
    name = parse_name(model)
    if name.kind == "hf":
        return name.ident, NO_REVISION
    return f"amrsim/{name.method}", name.run


def _sts_scores(values: dict[str, float | None], cross_encoder: bool) -> dict[str, float] | None:
    spearman, pearson = values.get("spearman"), values.get("pearson")
    if spearman is None or pearson is None:
        return None  # undefined (constant predictions): MTEB has no way to say so
    out = {"pearson": pearson / 100, "spearman": spearman / 100}
    if not cross_encoder:  # a bi-encoder's similarity is the cosine: MTEB's cosine_* columns are the same numbers
        out |= {"cosine_pearson": pearson / 100, "cosine_spearman": spearman / 100}
    out["main_score"] = out["cosine_spearman" if not cross_encoder else "spearman"]
    return out


def _bitext_scores(values: dict[str, float | None], flipped: bool) -> dict[str, float] | None:
    direction = "tgt2src" if flipped else "src2tgt"  # MTEB retrieves English for the non-English side
    accuracy, f1 = values.get(f"accuracy_{direction}"), values.get(f"f1_{direction}")
    if accuracy is None or f1 is None:
        return None  # a row stored before amrsim computed F1: evaluate again to export it
    return {"accuracy": accuracy / 100, "f1": f1 / 100, "main_score": f1 / 100}


def mteb_documents(results: pl.DataFrame, overrides: dict[str, str] | None = None,
                   cross_encoders: set[str] = frozenset()) -> tuple[dict[tuple[str, str], tuple[dict, set[str]]],
                                                                    list[str]]:
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
        expected = MTEB_SIZES[task.name].get(split, {}).get(subset)
        n = sizes[(model, dataset, split, lang_pair, kind)]
        if expected is not None and n != expected:
            left_out.append(f"{what}: {n} items, MTEB's data has {expected}; not comparable")
            continue
        scores = (_sts_scores(values, model in cross_encoders) if kind == "sts" else
                  _bitext_scores(values, flipped))
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


def export_mteb(results: pl.DataFrame, out_dir: Path, overrides: dict[str, str] | None = None,
                cross_encoders: set[str] = frozenset(), models: list[str] | None = None) -> \
        tuple[list[Exported], list[str]]:
    """Write one MTEB result file per (model, task) under `out_dir`; returns what was written and what was left
    out, with the reason."""
    if models:
        results = results.filter(pl.col("model").is_in(models))
    docs, left_out = mteb_documents(results, overrides, cross_encoders)
    written = []
    for (model, task), (doc, sources) in sorted(docs.items()):
        name, revision = model_folder(model)
        folder = out_dir / re.sub(r"[/\s]", "__", name) / revision
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{task}.json"
        atomic_json(path, doc)
        written.append(Exported(path, model, task, tuple(sorted(sources)),
                                sum(len(v) for v in doc["scores"].values())))
    return written, left_out
