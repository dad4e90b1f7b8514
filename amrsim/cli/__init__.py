"""`amrsim` command line: run pipelines (as Prefect flows), inspect and query the warehouse, evaluate encoders. Each
command group lives in its own module; this one assembles them into `app`."""

from __future__ import annotations

import gc
import sys

import typer

from amrsim.cli import bench, deploy, evaluate, metrics, parse, query, results, run, score, train
from amrsim.errors import AmrsimError
from amrsim.secrets import install_log_redaction, redact

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Multilingual sentence similarity with AMR: pipelines over a Delta warehouse.")
# `--help` lists the commands in this order, then the groups
app.command("report")(evaluate.report_command)
app.command("train")(train.train_command)
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


def main() -> None:
    install_log_redaction()  # Prefect ships log records to its API database: mask tokens before any is made
    try:
        app()
    except AmrsimError as e:
        notes = "".join(f" ({note})" for note in getattr(e, "__notes__", ()))
        print(f"error: {redact(str(e) + notes)}", file=sys.stderr)
        sys.exit(e.exit_code)
    finally:
        # drop Arrow dataset scanners (DuckDB views) while Arrow can still join their threads: one left to the
        # interpreter's final teardown can abort the process after its output (apache/arrow#34314)
        gc.collect()
