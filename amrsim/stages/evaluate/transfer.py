"""The transfer evaluation from files (SentEval-style classifiers on frozen embeddings), embeddings cached in the
warehouse, results reused while the model and the files are unchanged."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from amrsim.encoders import model_id
from amrsim.evaluate import Score
from amrsim.evaluate.transfer import (
    C_GRID,
    TASKS,
    BadRow,
    TransferResult,
    TransferTask,
    check_labels,
    evaluate_transfer,
    task_features,
    transfer_scores,
)
from amrsim.files import file_digest
from amrsim.ingest.transfer import load_task_file
from amrsim.stages.evaluate.common import dataset_name, embed_texts, evaluated
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key


@dataclass
class TransferRun:
    result: TransferResult
    scores: list[Score]
    bad_rows: dict[str, list[BadRow]]  # file path -> its rows left out


def run_transfer(task: TransferTask, encode: Callable[[list[str]], np.ndarray], model: str, train: str | Path,
                 devs: Mapping[str, str | Path], tests: Mapping[str, str | Path], dataset: str | None = None,
                 seed: int = 0, c_grid: Sequence[float] = C_GRID, blas_threads: int | None = 1) -> TransferRun:
    """Files to Scores: load and check every file (a dev/test label unseen in training fails naming that file),
    encode, evaluate; the rows left out are returned per file for the caller to report."""
    train_data = load_task_file(task, train, "en")
    loaded = {"dev": {lang: load_task_file(task, p, lang) for lang, p in devs.items()},
              "test": {lang: load_task_file(task, p, lang) for lang, p in tests.items()}}
    paths = {"dev": devs, "test": tests}
    for split, parts in loaded.items():
        for lang, data in parts.items():
            check_labels(data.labels, train_data.labels, paths[split][lang])
    feats = {split: {lang: (task_features(task, encode, d), d.labels) for lang, d in parts.items()}
             for split, parts in loaded.items()}
    result = evaluate_transfer(task.name, (task_features(task, encode, train_data), train_data.labels),
                               feats["dev"], feats["test"], seed=seed, c_grid=c_grid, blas_threads=blas_threads)
    bad = {str(train): train_data.bad_rows}
    for split, parts in loaded.items():
        bad.update({str(paths[split][lang]): d.bad_rows for lang, d in parts.items()})
    return TransferRun(result, transfer_scores(model, dataset or task.name, result), bad)


def transfer_eval(wh: Warehouse, encoder: str, task_name: str, train: Path, devs: dict[str, Path],
                  tests: dict[str, Path], run_id: str, kind: str | None = None, pipeline: str = "cli",
                  batch_size: int = 64, device: str = "auto") -> tuple[pl.DataFrame, dict[str, list[BadRow]]]:
    """A SentEval-style transfer task from files; returns the result rows and the rows each file left out."""
    if task_name in TASKS:
        task = TASKS[task_name]
    elif kind in ("single", "pair"):
        task = TransferTask(task_name, kind)  # type: ignore[arg-type]
    else:
        raise ValueError(f"transfer task '{task_name}' is not built in ({', '.join(TASKS)}): give its kind "
                         "(single or pair)")
    dataset = dataset_name(task_name, "transfer_")
    files = {"train": train, **{f"dev_{k}": v for k, v in devs.items()}, **{f"test_{k}": v for k, v in tests.items()}}
    parts = [model_id(encoder, wh.models_root), task.name, task.kind,
             sorted((k, file_digest(v)) for k, v in files.items())]
    bad: dict[str, list[BadRow]] = {}

    def compute() -> list[Score]:
        def encode(texts: list[str]) -> np.ndarray:
            return embed_texts(wh, dataset, encoder, "mul", texts, batch_size, device)

        out = run_transfer(task, encode, encoder, train, devs, tests, dataset=task.name)
        bad.update(out.bad_rows)
        return out.scores

    results = [("transfer", task.name, "test", lang, "accuracy") for lang in tests]
    results += [("transfer", task.name, "dev", "all", m) for m in ("dev_accuracy", "C")]
    rows = evaluated(wh, encoder, results, parts, compute, "evaluate:transfer", pipeline, run_id,
                     content_key("transfer", task.name), {k: str(v) for k, v in files.items()})
    return rows, bad
