"""Parse task: AMR graphs for a dataset's sentences, batches spread with the Ray helper."""

from __future__ import annotations

from functools import partial

from prefect import task

from amrsim.amr.backends import BACKENDS
from amrsim.amr.parsing import parse_frame
from amrsim.config import Pipeline
from amrsim.console import progress_bar
from amrsim.stages.parse import parse_stage
from amrsim.stages.translate import model_path
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS, spread, told


@task(name="parse", **TASK_OPTIONS)
def parse(pipe: Pipeline, dataset: str, run_id: str) -> dict[str, object]:
    p = pipe.spec.parse
    assert p is not None
    specs = p.parser_specs(pipe.resolve_path)
    parser_id = next(iter(specs.values())).id if specs else p.backend  # the `amr.parser` of its graphs
    per_batch = max([pipe.spec.ray.batch_size, *(s.batch for s in specs.values())])
    run = spread(pipe, partial(parse_frame, specs=specs, linearize=p.linearize), batch_size=per_batch,
                 gpu_actors=BACKENDS[p.backend].gpu)
    translate = pipe.spec.translate if dataset in pipe.spec.translate_datasets() else None  # English to pivot through

    def work() -> dict[str, object]:
        wh = Warehouse(pipe.warehouse_root)
        with progress_bar(wh.count(dataset, "sentences", status="ok"), f"parse {dataset}") as advance:
            return parse_stage(wh, pipe.name, dataset, p, parser_id, run_id, run, translate, partial(model_path, pipe),
                               on_progress=advance, on_plan=advance.plan).summary()

    return told(f"parse {dataset}", work)
