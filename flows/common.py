"""Flow helpers: load and validate the config before any task runs; the type of the `overrides` and `params`
parameters, whose schema keeps secrets out of a deployment run's parameters; amrsim's log records in the flow run's
log; the run's summary table as an artifact; the state of a run that ends without a finished model."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Annotated, Any, TypeVar, Union

from prefect.artifacts import create_table_artifact
from prefect.context import FlowRunContext, TaskRunContext
from prefect.logging.handlers import APILogHandler
from prefect.states import Completed, State
from pydantic import WithJsonSchema
from typing_extensions import TypeAliasType

from amrsim.config import LoadedConfig, load_config
from amrsim.console import log, summary_rows
from amrsim.secrets import SECRET_NAME, TOKEN_PATTERNS, unseal

T = TypeVar("T")
UNFINISHED = "Unfinished"  # a Completed state's name: a training run left no finished model (docs/operations.md)

# Prefect stores a flow run's parameters in its database. A deployment enforces its parameter schema, so the server
# refuses `prefect deployment run ... --param overrides=...` holding a URL password, a token-shaped string or a key
# named like a credential before the run (and its parameters) exist; `amrsim run --set` passes such values sealed
# (amrsim.secrets.seal). Only the JSON schema says so: in-process validation accepts any value, `unseal` refuses.
_NO_SECRET_TEXT = {"type": "string", "not": {"pattern": "|".join(p.pattern for p in TOKEN_PATTERNS)}}
_NO_SECRET_KEY = {"type": "string", "not": {"pattern": "(?i)" + SECRET_NAME.pattern}}
_Text = Annotated[str, WithJsonSchema(_NO_SECRET_TEXT)]
_Key = Annotated[str, WithJsonSchema(_NO_SECRET_KEY)]
_Scalar = Annotated[Any, WithJsonSchema({"type": ["number", "boolean", "null"]})]
ConfigValue = TypeAliasType(  # type: ignore[misc]
    "ConfigValue", Union[_Text, list["ConfigValue"], dict[_Key, "ConfigValue"], _Scalar])  # noqa: UP007
Overrides = dict[_Key, ConfigValue] | None  # `--set` keys and values; `params`: a method's params


def load(config: str, pipeline: str | None, overrides: dict[str, Any] | None) -> tuple[LoadedConfig, str]:
    from amrsim.secrets import install_log_redaction

    install_log_redaction()  # a deployment's flow run starts here, not in the CLI: mask secrets in its logs too
    route_logs_to_prefect()
    cfg = load_config(config, overrides=unseal(overrides), pipeline=pipeline)
    name, _ = cfg.pipeline(pipeline)  # checks input files exist
    return cfg, name


class RunLogHandler(APILogHandler):
    """Prefect's API log handler for records emitted inside a flow or task run (in its thread); others (a thread of
    a library, a command without a flow) are not sent, and not warned about."""

    def emit(self, record: logging.LogRecord) -> None:
        if FlowRunContext.get() is not None or TaskRunContext.get() is not None:
            super().emit(record)


def route_logs_to_prefect() -> None:
    """amrsim's log records (stage lines and progress on `amrsim.console`; training steps and dev scores, failed
    rows and other warnings on the `amrsim` loggers) at INFO and above into the log of the run that emits them;
    idempotent. Attached here, at each flow's start, rather than through PREFECT_LOGGING_EXTRA_LOGGERS: Prefect reads
    that setting once, when it is imported, so it would have to be in the environment of every process that runs a
    flow (the CLI, the process a user's worker starts), and it leaves the loggers' level at WARNING."""
    for name in ("amrsim", log.name):  # amrsim.console does not propagate (it repeats what a console shows)
        logger = logging.getLogger(name)
        if not any(isinstance(h, RunLogHandler) for h in logger.handlers):
            logger.addHandler(RunLogHandler())
    amrsim = logging.getLogger("amrsim")
    if amrsim.getEffectiveLevel() > logging.INFO:
        amrsim.setLevel(logging.INFO)


def publish_summary(flow: str, pipeline: str, run_id: str, stages: Sequence[dict[str, Any]]) -> None:
    """The run's summary table (the one `amrsim run` prints) as a table artifact of the flow run, keyed
    `<flow>-<pipeline>-summary` so the Artifacts page keeps each flow and pipeline's history; none without stages."""
    if not stages:
        return
    key = re.sub(r"[^a-z0-9-]+", "-", f"{flow}-{pipeline}-summary".lower())
    create_table_artifact(summary_rows(stages), key=key, description=f"Run {run_id} summary - pipeline '{pipeline}'")


def ended(result: T, stages: Sequence[dict[str, Any]]) -> T | State:
    """`result`; or, where a training run stopped before its model was finished (`max_steps`), a Completed state
    named "Unfinished" that holds it, with a message naming the run and how to resume it. Completed, not Failed:
    the run did what it was asked (stop at max_steps, checkpointed), and a caller still gets its result."""
    unfinished = [s for s in stages if s.get("model") and not str(s.get("status", "")).startswith("ok")]
    if not unfinished:
        return result
    message = "; ".join(_unfinished(s) for s in unfinished)
    log.warning("%s", message)
    return Completed(data=result, name=UNFINISHED, message=message)


def _unfinished(summary: dict[str, Any]) -> str:
    method, _, run_id = str(summary["model"]).partition(":")
    steps = f" at step {summary['steps']} of {summary['total_steps']}" if summary.get("total_steps") else ""
    return (f"{summary['model']} stopped{steps} before its model was finished: {method}:latest is unchanged; its "
            f"checkpoint is kept, and a train run with run_id={run_id} resumes it")
