"""Translate task: the `translations` table of a dataset (provided translations, or MarianMT)."""

from __future__ import annotations

from functools import partial

from prefect import task

from amrsim.config import LoadedConfig, looks_like_path
from amrsim.stages.translate import translate_stage
from amrsim.translate.run import TranslatorSpec, translate_frame
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS
from tasks.ray_map import map_batches


@task(name="translate", **TASK_OPTIONS)
def translate(cfg: LoadedConfig, pipeline: str, dataset: str, run_id: str) -> dict[str, object]:
    tr = cfg.project.pipelines[pipeline].translate
    assert tr is not None
    specs = {m: TranslatorSpec(str(cfg.resolve_path(m)) if looks_like_path(m) else m, tr.batch_size, tr.num_beams,
                               tr.max_length, tr.device) for m in {*tr.models.values(), *tr.to_english.values()}}
    ray_cfg = cfg.project.pipelines[pipeline].ray
    run = partial(map_batches, partial(translate_frame, specs=specs), cfg=ray_cfg, run_dir=cfg.run_dir,
                  gpu_actors=True)
    return translate_stage(Warehouse(cfg.warehouse_root), pipeline, dataset, tr, run_id, run).summary()
