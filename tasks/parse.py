"""Parse task: AMR graphs for a dataset's sentences, batches spread with the Ray helper."""

from __future__ import annotations

from functools import partial

from prefect import task

from amrsim.amr.parsing import ParserSpec, batch_size_for, parse_frame
from amrsim.config import LoadedConfig
from amrsim.stages.parse import parse_stage
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS
from tasks.ray_map import map_batches


def parser_specs(cfg: LoadedConfig, pipeline: str) -> dict[str, ParserSpec]:
    p = cfg.project.pipelines[pipeline].parse
    assert p is not None
    model_dir = str(cfg.resolve_path(p.model_dir)) if p.model_dir else None
    return {lang: ParserSpec(p.backend, lang, model_dir, p.batch_size, p.num_beams, p.device)
            for lang in p.direct_langs()}


@task(name="parse", **TASK_OPTIONS)
def parse(cfg: LoadedConfig, pipeline: str, dataset: str, run_id: str) -> dict[str, object]:
    p = cfg.project.pipelines[pipeline].parse
    assert p is not None
    specs = parser_specs(cfg, pipeline)
    parser_id = next(iter(specs.values())).id if specs else p.backend
    ray_cfg = cfg.project.pipelines[pipeline].ray
    per_batch = max([ray_cfg.batch_size, *(batch_size_for(s) for s in specs.values())])
    run = partial(map_batches, partial(parse_frame, specs=specs, linearize=p.linearize), cfg=ray_cfg,
                  run_dir=cfg.run_dir, batch_size=per_batch,
                  gpu_actors=p.backend == "amrlib")
    pipe = cfg.project.pipelines[pipeline]
    translate = pipe.translate if dataset in pipe.translate_datasets() else None  # its English output to pivot through
    return parse_stage(Warehouse(cfg.warehouse_root), pipeline, dataset, p, parser_id, run_id, run,
                       translate).summary()
