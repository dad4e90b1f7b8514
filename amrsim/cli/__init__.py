"""`amrsim` command line: run pipelines (as Prefect flows), inspect and query the warehouse, evaluate encoders. Each
command group lives in its own module; this one assembles them into `app`, and turns user errors (an AmrsimError, a
path that cannot be opened) into one `error:` line."""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import Annotated

import typer

from amrsim.cli import bench, deploy, evaluate, metrics, parse, query, results, run, score, train
from amrsim.cli.common import report_error
from amrsim.console import quiet_library_progress_bars
from amrsim.errors import AmrsimError
from amrsim.secrets import install_log_redaction

PROG = "amrsim"

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Multilingual sentence similarity with AMR: pipelines over a Delta warehouse.")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"{PROG} {version(PROG)}")
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool | None, typer.Option(
        "--version", callback=_print_version, is_eager=True, help="print the installed version and exit")] = None,
) -> None:
    # options of `amrsim` itself, before any command; the app's help text stays the one given to typer.Typer
    return None


# `--help` lists the commands in this order, then the groups
app.command("report")(evaluate.report_command)
app.command("train", cls=train.TrainCommand)(train.train_command)
app.command("explain")(train.explain_command)
app.command("deploy")(deploy.deploy_command)
app.command("score")(score.score_command)
app.command("run")(run.run)
app.command("status")(run.status)
app.command("query")(query.query)
app.command("parse")(parse.parse_command)
app.add_typer(bench.bench_app, name="bench")
app.add_typer(metrics.metrics_app, name="metrics")
app.add_typer(evaluate.evaluate_app, name="evaluate")
app.add_typer(results.results_app, name="results")


def path_error(e: OSError) -> str | None:
    """'PATH: reason' for an OSError about a file or directory (missing, unreadable, not a directory), else None."""
    if e.filename is None:
        return None
    paths = " -> ".join(str(p) for p in (e.filename, e.filename2) if p is not None)
    return f"{paths}: {e.strerror or type(e).__name__}"


def fail(message: str, exit_code: int) -> None:
    """End the command with one `error:` line on stderr (and with --json its document on stdout): `report_error`."""
    report_error(message, exit_code)
    sys.exit(exit_code)


def main() -> None:
    install_log_redaction()  # Prefect ships log records to its API database: mask tokens before any is made
    quiet_library_progress_bars()  # in a log, loading bars of transformers & co. would be screens of redraws
    try:
        app(prog_name=PROG)  # named, so usage lines and completion scripts say `amrsim` under `python -m` too
    except AmrsimError as e:
        notes = "".join(f" ({note})" for note in getattr(e, "__notes__", ()))
        fail(str(e) + notes, e.exit_code)
    except OSError as e:  # every command's paths: a file that is missing or cannot be read is the user's to fix
        if (message := path_error(e)) is None:
            raise
        fail(message, AmrsimError.exit_code)
    finally:
        # drop Arrow dataset scanners (DuckDB views) while Arrow can still join their threads: one left to the
        # interpreter's final teardown can abort the process after its output (apache/arrow#34314)
        gc.collect()


def entry() -> None:
    """The `amrsim` executable (and `python -m amrsim.cli`): `main()`, then the process ends without running C++
    static destructors. At that point pyarrow's global thread pool can deadlock joining its idle workers (seen
    with `amrsim query --json | jq`: about 1 run in 20 never exited; apache/arrow#34314 is the abort form of it).
    Python's own exit work (atexit handlers, logging) runs first; an unexpected exception ends the usual way."""
    try:
        main()
        code: object = 0
    except SystemExit as e:
        code = e.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    # what interpreter shutdown would do, which os._exit skips: wait for non-daemon threads, run atexit handlers
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) or stream: nothing more to deliver
            pass
    os._exit(code)
