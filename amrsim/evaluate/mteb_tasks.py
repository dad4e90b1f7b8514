"""The MTEB tasks amrsim's results export to, as the `mteb` package declares them: dataset id and revision,
evaluation splits, main score, each subset's languages (ISO 639-3 + script) and its number of items.

The declarations are read from `mteb_tasks.json`, a snapshot of the installed mteb's task metadata written by
`python -m amrsim.evaluate.mteb_tasks` (mteb installed: `pip install -e '.[dev]'`). amrsim itself does not need mteb
to export; the test suite compares the snapshot with the installed mteb, so a change in mteb's tasks fails there."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["DATASET_PREFIXES", "MTEB_TASKS", "MTEB_VERSION", "SNAPSHOT", "TASK_NAMES", "MtebTask",
           "declarations_from_mteb", "subset_for", "task_of_dataset"]

SNAPSHOT = Path(__file__).with_name("mteb_tasks.json")
TASK_NAMES = ("STSBenchmark", "SICK-R", "STSBenchmarkMultilingualSTS", "STS17", "STS22", "Tatoeba")
KINDS = {"STS": "sts", "BitextMining": "bitext"}  # mteb task type -> the amrsim result task that feeds it
# warehouse dataset name prefix -> the MTEB task whose (public) data it holds; first match wins (stsb_multi before stsb)
DATASET_PREFIXES = (("stsb_multi", "STSBenchmarkMultilingualSTS"), ("stsb", "STSBenchmark"), ("sick", "SICK-R"),
                    ("sts17", "STS17"), ("sts22", "STS22"), ("tatoeba", "Tatoeba"))


@dataclass(frozen=True)
class MtebTask:
    name: str
    kind: str  # "sts" or "bitext"
    dataset: str  # the Hub dataset id MTEB evaluates on
    revision: str
    splits: tuple[str, ...]  # the splits MTEB's main score averages over
    main_score: str
    subsets: dict[str, list[str]]  # hf_subset -> languages
    sizes: dict[str, dict[str, int]]  # split -> hf_subset -> pairs (STS) or sentence pairs (bitext) in MTEB's data

    def missing(self, present: dict[str, set[str]]) -> dict[str, list[str]]:
        """split -> the subsets MTEB's main score needs that `present` (split -> subsets) lacks; {} when complete."""
        out = {split: sorted(set(self.subsets) - present.get(split, set())) for split in self.splits}
        return {split: subsets for split, subsets in out.items() if subsets}


def _sizes(stats: dict[str, Any], subsets: list[str]) -> dict[str, int]:
    per_subset = stats.get("hf_subset_descriptive_stats")
    if per_subset:
        return {s: int(per_subset[s]["num_samples"]) for s in subsets if s in per_subset}
    return {subsets[0]: int(stats["num_samples"])} if len(subsets) == 1 else {}


def declarations_from_mteb(names: tuple[str, ...] = TASK_NAMES) -> dict[str, Any]:
    """The snapshot's content, read from the installed mteb package (its task metadata, offline)."""
    import mteb

    tasks = {}
    for name in names:
        task = mteb.get_task(name)
        meta = task.metadata
        subsets = list(task.hf_subsets)
        stats = meta.descriptive_stats or {}
        tasks[name] = {"kind": KINDS[meta.type], "dataset": meta.dataset["path"], "revision": meta.dataset["revision"],
                       "splits": list(meta.eval_splits), "main_score": meta.main_score,
                       "subsets": {s: list(meta.hf_subsets_to_langscripts[s]) for s in subsets},
                       "sizes": {split: _sizes(stats[split], subsets) for split in meta.eval_splits if split in stats}}
    return {"mteb_version": mteb.__version__, "tasks": tasks}


@cache
def _snapshot() -> tuple[str, dict[str, MtebTask]]:
    data = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    tasks = {name: MtebTask(name, t["kind"], t["dataset"], t["revision"], tuple(t["splits"]), t["main_score"],
                            t["subsets"], t["sizes"]) for name, t in data["tasks"].items()}
    return data["mteb_version"], tasks


MTEB_VERSION, MTEB_TASKS = _snapshot()


def task_of_dataset(dataset: str) -> MtebTask | None:
    """The MTEB task whose data a warehouse dataset holds, by its name prefix (`stsb_en_test` -> STSBenchmark);
    None for other datasets. Its `dataset` is the public Hub id of that data."""
    name = next((task for prefix, task in DATASET_PREFIXES if dataset.lower().startswith(prefix)), None)
    return MTEB_TASKS[name] if name else None


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


if __name__ == "__main__":  # python -m amrsim.evaluate.mteb_tasks: write the snapshot from the installed mteb
    SNAPSHOT.write_text(json.dumps(declarations_from_mteb(), indent=1) + "\n", encoding="utf-8")
    sys.stderr.write(f"{SNAPSHOT}: written from mteb's task metadata\n")
