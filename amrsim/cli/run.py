"""`amrsim run` (a pipeline as a Prefect flow) and `amrsim status` (tables and the last stage runs)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

from amrsim.cli.common import ConfigOpt, JsonOpt, emit_json, parse_overrides, print_scores, warehouse_root
from amrsim.cli.flow import VerboseOpt, flow_runtime
from amrsim.console import console, frame_table, print_stage_notes, summary_table

# The config, the warehouse, polars and the flows (Prefect) are imported inside the commands: `amrsim --help` and
# the other commands would otherwise wait seconds for them.


def run(pipeline: Annotated[str | None, typer.Argument(help="pipeline name (default: the config's default)")] = None,
        config: ConfigOpt = "pipelines.yaml",
        set_: Annotated[list[str] | None, typer.Option("--set", help="override key=value in the pipeline")] = None,
        replace: Annotated[list[str] | None, typer.Option(
            help="DATASET: let this run's definition take over a dataset name whose tables hold another source's "
                 "rows (another config sharing the warehouse, another file); its rows are replaced. Repeatable")
        ] = None,
        verbose: VerboseOpt = False,
        ) -> None:
    """Run a pipeline end to end (refresh-dataset -> train -> evaluate) as a Prefect flow."""
    from amrsim.config import load_config
    from amrsim.errors import ConfigError
    from amrsim.stages.ingest import check_pipeline
    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.sources import release

    t0 = time.perf_counter()
    overrides = parse_overrides(set_)
    cfg = load_config(config, overrides=overrides, pipeline=pipeline)
    name, spec = cfg.pipeline(pipeline)
    for dataset in replace or []:
        if dataset not in spec.datasets:
            raise ConfigError(f"--replace '{dataset}': pipeline '{name}' has no such dataset; its datasets: "
                              f"{', '.join(spec.datasets) or 'none'}")
    # headers, column mappings and dataset sources: seconds, before Prefect's and Ray's start-up
    check_pipeline(cfg.section(name), replace=replace or ())
    for dataset in replace or []:
        release(Warehouse(cfg.warehouse_root), dataset)
    with flow_runtime(cfg.run_dir, f"amrsim run {name}", verbose) as ready:
        _run_flow(name, cfg, overrides, ready, t0)


def _run_flow(name: str, cfg: Any, overrides: dict[str, Any], ready: Callable[[], None], t0: float) -> None:
    from amrsim.secrets import seal
    from amrsim.stages import results_table
    from flows.demo import demo  # Prefect is imported only here: the library stays Prefect-free

    ready()
    # Prefect stores a flow run's parameters: a --set value holding a secret goes as a placeholder, the value stays
    # in this process (amrsim.secrets.seal), where the flow finds it
    out = demo(name, str(cfg.path), seal(overrides) or None)
    results = results_table(out["results"])
    if results.height:
        console.print(frame_table(results, f"STS (x100) - pipeline '{name}'"))
    for title, rows in (out.get("tables") or {}).items():
        print_scores(rows, f"{title} - pipeline '{name}'")
    for note in out.get("notes") or []:
        console.print(note)
    console.print(summary_table(out["stages"], f"Run {out['run_id']} summary"))
    print_stage_notes(out["stages"])  # failed rows: counted in the table, the first reason here
    if out.get("report"):
        console.print(f"report: {out['report']}")
    computed = sum(int(s["computed"]) for s in out["stages"])
    console.print(f"{computed} rows computed; warehouse: {cfg.warehouse_root}; "
                  f"{time.perf_counter() - t0:.1f}s. Query it: amrsim query \"SELECT * FROM eval.results\"")


def status(config: ConfigOpt = "pipelines.yaml", json_: JsonOpt = False) -> None:
    """Tables with versions, row counts and failed rows, and the last stage runs."""
    import polars as pl

    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.lineage import last_runs
    from amrsim.warehouse.store import BrokenTable

    wh = Warehouse(warehouse_root(config))
    rows, broken = [], []
    for dataset, table in wh.tables():
        try:  # one damaged table is reported by name; the others are still listed
            rows.append({"table": f"{dataset}.{table}", "version": wh.version(dataset, table),
                         "rows": wh.count(dataset, table), "failed": wh.count(dataset, table, status="failed"),
                         "status": "ok"})
        except BrokenTable as e:
            rows.append({"table": f"{dataset}.{table}", "version": None, "rows": None, "failed": None,
                         "status": "broken"})
            broken.append(str(e))
    runs = None
    if rows:
        try:
            runs = last_runs(wh, 12)
        except BrokenTable:
            pass  # listed with the tables
    if runs is not None and runs.height:
        runs = runs.select("started_at", "run_id", "stage", "dataset", "table", "rows_computed", "rows_failed",
                           pl.col("seconds").round(2), "status")
    if json_:
        emit_json({"warehouse": wh.root, "tables": rows, "broken": broken,
                   "runs": runs.to_dicts() if runs is not None and runs.height else []})
        return
    if not rows:
        console.print(f"warehouse {wh.root} is empty: run `amrsim run` first")
        return
    console.print(frame_table(pl.DataFrame(rows), f"Warehouse {wh.root}"))
    for error in broken:
        console.print(f"broken: {error}", markup=False, highlight=False, soft_wrap=True)
    if runs is not None and runs.height:
        # lineage stores '' for a run that changed no table (a rerun with nothing new); a training run writes its
        # model directory, models/<method>/<run id>, not a table
        written = (pl.when(pl.col("table") != "").then(pl.col("table"))
                   .when(pl.col("stage").str.starts_with("train:"))
                   .then(pl.concat_str(pl.col("stage").str.strip_prefix("train:"), pl.lit("/"), pl.col("run_id")))
                   .otherwise(pl.lit("(unchanged)")))
        console.print(frame_table(runs.with_columns(pl.col("started_at").dt.strftime("%Y-%m-%d %H:%M:%S"),
                                                    written.alias("table")), "Last stage runs"))
