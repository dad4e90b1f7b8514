"""The transfer evaluation from files (SentEval-style classifiers on frozen embeddings), embeddings cached in the
warehouse, results reused while the model and the files are unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from amrsim.encoders import model_id
from amrsim.evaluate import Score
from amrsim.evaluate.transfer import TASKS, BadRow, TransferTask, run_transfer
from amrsim.files import file_digest
from amrsim.stages.evaluate.common import dataset_name, embed_texts, evaluated
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key


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
