"""`amrsim run` (a pipeline as a Prefect flow) and `amrsim status` (tables and the last stage runs)."""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from typing import Annotated, Any

import typer

from amrsim.cli.common import ConfigOpt, parse_overrides, prefect_env, print_scores, warehouse_root
from amrsim.console import console, frame_table, summary_table
from amrsim.errors import AmrsimError, RunFailed

# The config, the warehouse, polars and the flows (Prefect) are imported inside the commands: `amrsim --help` and
# the other commands would otherwise wait seconds for them.


def _say_stopping(signum: int) -> None:
    print(f"\namrsim run: {signal.Signals(signum).name} received, stopping the run (again to force)",
          file=sys.stderr, flush=True)


def _say_stopped(signum: int, stopped: int) -> None:
    print(f"amrsim run: stopped by {signal.Signals(signum).name} ({stopped} child processes ended); tables keep "
          f"their last whole commit, and a rerun computes only what is missing", file=sys.stderr, flush=True)


def run(pipeline: Annotated[str | None, typer.Argument(help="pipeline name (default: the config's default)")] = None,
        config: ConfigOpt = "pipelines.yaml",
        set_: Annotated[list[str] | None, typer.Option("--set", help="override key=value in the pipeline")] = None,
        verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Prefect's logs on the terminal instead of "
                                                                      "<run_dir>/logs/prefect.log")] = False,
        ) -> None:
    """Run a pipeline end to end (refresh-dataset -> train -> evaluate) as a Prefect flow."""
    from amrsim.config import load_config
    from amrsim.procs import SignalStop

    t0 = time.perf_counter()
    overrides = parse_overrides(set_)
    cfg = load_config(config, overrides=overrides, pipeline=pipeline)
    name, _ = cfg.pipeline(pipeline)
    prefect_env(cfg.run_dir)
    log_path = cfg.run_dir / "logs" / "prefect.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    from flows.runtime import TemporaryServer, drain_prefect_logs, log_prefect_to_file

    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_SETTINGS_PATH", str(log_prefect_to_file(log_path)))
    # Ctrl-C / SIGTERM: this process, its server and its workers end within seconds (exit 130 / 143)
    with SignalStop(announce=_say_stopping, before_exit=_say_stopped), log_path.open("ab") as log:
        log.write(f"\n=== amrsim run {name} (pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')})\n".encode())
        log.flush()
        server = None
        if not os.environ.get("PREFECT_API_URL"):  # a configured server is used as is
            timeout = float(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])
            server = TemporaryServer(log, timeout)
            server.start()  # it boots while Prefect and the flows are imported here
        try:
            _run_flow(name, cfg, overrides, server, t0)
        except Exception as e:
            if verbose:
                raise
            log.write("".join(traceback.format_exception(e)).encode())  # the terminal gets one line
            log.flush()
            if isinstance(e, AmrsimError):
                e.add_note(f"Prefect's log: {log_path}")
                raise
            raise RunFailed(f"{type(e).__name__}: {e} (traceback in {log_path}; --verbose shows it here)") from e
        finally:
            if server is not None:
                drain_prefect_logs()
                server.stop()


def _run_flow(name: str, cfg: Any, overrides: dict[str, Any], server: Any, t0: float) -> None:
    from amrsim.stages import results_table
    from flows.demo import demo  # Prefect is imported only here: the library stays Prefect-free

    if server is not None:
        server.wait_ready()
    out = demo(name, str(cfg.path), overrides or None)
    results = results_table(out["results"])
    if results.height:
        console.print(frame_table(results, f"STS (x100) - pipeline '{name}'"))
    for title, rows in (out.get("tables") or {}).items():
        print_scores(rows, f"{title} - pipeline '{name}'")
    for note in out.get("notes") or []:
        console.print(note)
    console.print(summary_table(out["stages"], f"Run {out['run_id']} summary"))
    if out.get("report"):
        console.print(f"report: {out['report']}")
    computed = sum(int(s["computed"]) for s in out["stages"])
    console.print(f"{computed} rows computed; warehouse: {cfg.warehouse_root}; "
                  f"{time.perf_counter() - t0:.1f}s. Query it: amrsim query \"SELECT * FROM eval.results\"")


def status(config: ConfigOpt = "pipelines.yaml") -> None:
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
    if not rows:
        console.print(f"warehouse {wh.root} is empty: run `amrsim run` first")
        return
    console.print(frame_table(pl.DataFrame(rows), f"Warehouse {wh.root}"))
    for error in broken:
        console.print(f"broken: {error}", markup=False, highlight=False, soft_wrap=True)
    try:
        runs = last_runs(wh, 12)
    except BrokenTable:
        return  # listed above
    if runs.height:
        view = runs.select("started_at", "run_id", "stage", "dataset", "table", "rows_computed", "rows_failed",
                           pl.col("seconds").round(2), "status")
        console.print(frame_table(view.with_columns(pl.col("started_at").dt.strftime("%Y-%m-%d %H:%M:%S")),
                                  "Last stage runs"))


