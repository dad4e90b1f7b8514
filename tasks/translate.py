"""Translate task: the `translations` table of a dataset (provided translations, or MarianMT)."""

from __future__ import annotations

from functools import partial

from prefect import task

from amrsim.config import Pipeline
from amrsim.console import progress_bar
from amrsim.stages.translate import model_path, translate_stage, translator_spec
from amrsim.translate.run import translate_frame
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS, spread, told


@task(name="translate", **TASK_OPTIONS)
def translate(pipe: Pipeline, dataset: str, run_id: str) -> dict[str, object]:
    tr = pipe.spec.translate
    assert tr is not None
    specs = {m: translator_spec(pipe, m) for m in {*tr.models.values(), *tr.to_english.values()}}
    run = spread(pipe, partial(translate_frame, specs=specs), gpu_actors=True)

    def work() -> dict[str, object]:
        wh = Warehouse(pipe.warehouse_root)
        # a sentence is translated into each target language: the ok sentences times the targets bound the work
        bound = wh.count(dataset, "sentences", status="ok") * (len(tr.targets) + bool(tr.to_english))
        with progress_bar(bound, f"translate {dataset}") as advance:
            return translate_stage(wh, pipe.name, dataset, tr, run_id, run, partial(model_path, pipe),
                                   on_progress=advance, on_plan=advance.plan).summary()

    return told(f"translate {dataset}", work)
