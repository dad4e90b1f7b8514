"""`amrsim results {export,migrate}`: `eval/results` leaving amrsim (MTEB result files) and older tables brought to
the current results schema."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from amrsim.cli.common import ConfigOpt, JsonOpt, emit_json, warehouse_root
from amrsim.console import console, make_console
from amrsim.errors import AmrsimError

errors = make_console(stderr=True)
results_app = typer.Typer(no_args_is_help=True, help="Export or migrate warehouse/eval/results.")


@results_app.command("export")
def export_command(
        out: Annotated[Path, typer.Option(help="an MTEB result cache to write into: <out>/results/<model>/<revision>/ "
                                               "gets <Task>.json and model_meta.json; mteb.ResultCache(<out>) reads "
                                               "it")],
        format_: Annotated[str, typer.Option("--format", help="mteb")] = "mteb",
        task: Annotated[list[str] | None, typer.Option(help="DATASET=TASK: the MTEB task (or none) a warehouse "
                                                             "dataset measures; repeatable")] = None,
        model: Annotated[list[str] | None, typer.Option(help="only these result models (repeatable)")] = None,
        include_incomplete: Annotated[bool, typer.Option(
            help="also write tasks that lack some of the splits or subsets MTEB's main score averages over (their "
                 "file's average is not the leaderboard's score)")] = False,
        config: ConfigOpt = "pipelines.yaml", json_: JsonOpt = False) -> None:
    """Write the results that measure an MTEB task (STSBenchmark, SICK-R, STSBenchmarkMultilingualSTS, STS17,
    STS22, Tatoeba) as an MTEB result cache. What was written goes to stdout; what was left out or is incomplete,
    and why, to stderr."""
    from amrsim.stages.evaluate import export_mteb, is_cross_encoder, model_facts, parse_task_overrides
    from amrsim.stages.evaluate.results import EVAL, RESULTS
    from amrsim.warehouse import Warehouse

    if format_ != "mteb":
        raise AmrsimError(f"--format '{format_}': only mteb is supported")
    overrides = parse_task_overrides(task)
    wh = Warehouse(warehouse_root(config))
    results = wh.read(EVAL, RESULTS)
    cross = {m for m in set(results["model"].to_list()) if is_cross_encoder(m, wh.models_root)}
    written, left_out = export_mteb(results, out, overrides, cross, model, include_incomplete,
                                    lambda name: model_facts(name, wh.models_root))
    if json_:
        emit_json({"written": [{"path": w.path, "model": w.model, "task": w.task, "datasets": w.datasets,
                                "subsets": w.subsets, "complete": w.complete, "missing": w.missing} for w in written],
                   "left_out": left_out})
        return
    for item in written:
        console.print(f"{item.path}  ({item.model}, {item.subsets} subsets from {', '.join(item.datasets)}"
                      + (", incomplete)" if not item.complete else ")"))
    for reason in left_out:
        errors.print(f"left out: {reason}", soft_wrap=True)
    if not written:
        errors.print("nothing exported: no STS or Tatoeba result covers a whole MTEB task (name a dataset's task with "
                     "--task DATASET=TASK; --include-incomplete writes partial tasks)")


@results_app.command("migrate")
def migrate_command(config: ConfigOpt = "pipelines.yaml") -> None:
    """Bring an eval/results table written by an older amrsim to the current schema: rows asked for as
    `<method>:latest` are renamed to the run that was newest when they were stored (`model_requested` keeps the
    name asked for)."""
    from amrsim.stages.evaluate import migrate_results
    from amrsim.warehouse import Warehouse

    renamed, unresolved = migrate_results(Warehouse(warehouse_root(config)))
    console.print(f"results: {renamed} rows renamed to their run, {unresolved} left as :latest (no run of that "
                  "method old enough)")
