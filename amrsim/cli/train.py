"""`amrsim train` (a method's training flow) and `amrsim explain` (an S3BERT model's aspect similarities)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.logging import RichHandler
from typer.core import TyperCommand

from amrsim.cli.common import ConfigOpt, JsonOpt, emit_json, parse_overrides, warehouse_root
from amrsim.cli.flow import VerboseOpt, flow_runtime
from amrsim.console import console, frame_table, make_console, print_stage_notes, summary_table
from amrsim.errors import ConfigError

if TYPE_CHECKING:
    import click

# The config, the methods (torch) and the flows (Prefect) are imported inside the commands: `amrsim --help` does not
# need them.


def show_training_progress() -> None:
    """Training loops log their steps, losses and dev scores on the `amrsim` logger at INFO: show them on stderr
    (idempotent). Secrets are already masked in every record (install_log_redaction)."""
    logger = logging.getLogger("amrsim")
    if not any(getattr(h, "amrsim_progress", False) for h in logger.handlers):
        handler = RichHandler(console=make_console(stderr=True), markup=False, show_path=False,
                              log_time_format="%H:%M:%S")
        handler.amrsim_progress = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # Prefect's root console handler would print each record a second time


def _check_params(method: str, cfg: Any, pipeline: str, params: dict[str, Any] | None,
                  base: tuple[str, dict[str, Any]] | None = None) -> Any:
    """The method's params as the flow will merge them (pipeline entry, or `base` (where, params): a resumed run's
    record; then --param), validated here so a bad value is one line naming the key, not pydantic's multi-line
    report after the stages ran. Returns them (the method's Params)."""
    from pydantic import ValidationError

    from amrsim.methods import method_params

    where, entry = base or (f"{cfg.path}: pipeline '{pipeline}'",
                            next((t.params for t in cfg.project.pipelines[pipeline].train if t.method == method), {}))
    try:
        return method_params(method, {**entry, **(params or {})})
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(x) for x in err["loc"]) or "<params>"
        from_cli = bool(params and err["loc"] and err["loc"][0] in params)
        origin = "--param" if from_cli else where
        msg = "unknown parameter" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        shown = repr(err.get("input"))
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ConfigError(f"{origin}: train {method} param '{key}', value {shown}: {msg}") from None


def method_list(names: list[str]) -> str:
    """'a, b or c'."""
    return " or ".join(filter(None, [", ".join(names[:-1]), *names[-1:]]))


class TrainCommand(TyperCommand):
    """`amrsim train`: its METHOD help lists the registered methods (`amrsim.methods.METHODS`), read when the help is
    shown, so the methods are not imported when `amrsim` starts."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from amrsim.methods import METHODS

        for param in self.params:
            if param.name == "method":
                param.help = method_list(list(METHODS))  # type: ignore[attr-defined]
        super().format_help(ctx, formatter)


def train_command(
    method: Annotated[str, typer.Argument(help="the training method (the list: amrsim train --help)")],
    pipeline: Annotated[str | None, typer.Option(
        help="pipeline whose data and params to use (default: the CPU recipe, the pipeline named like the method)")
    ] = None,
    config: ConfigOpt = "pipelines.yaml",
    param: Annotated[list[str] | None, typer.Option("--param", help="override a method param, key=value "
                                                                   "(e.g. --param max_steps=20)")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="override key=value in the pipeline")] = None,
    run_id: Annotated[str | None, typer.Option(help="train under this run id (resumes its checkpoint if any)")] = None,
    resume: Annotated[bool, typer.Option(help="resume the run --run-id names (default: the newest interrupted run "
                                              "of this method)")] = False,
    refresh: Annotated[bool, typer.Option(help="bring the pipeline's tables up to date first")] = True,
    retrain: Annotated[bool, typer.Option(help="train even if a finished run had the same request (method, params, "
                                               "input table versions); by default that run is reused")] = False,
    verbose: VerboseOpt = False,
    json_: JsonOpt = False,
) -> None:
    """Train a method as a Prefect flow; the model is then `<method>:latest` for `amrsim evaluate`."""
    from amrsim.config import load_config
    from amrsim.methods import METHODS
    from amrsim.stages.train.common import is_unfinished, unfinished_runs
    from amrsim.warehouse import Warehouse

    if method not in METHODS:
        raise ConfigError(f"unknown training method '{method}'; available: {', '.join(sorted(METHODS))}")
    t0 = time.perf_counter()
    overrides = parse_overrides(set_)
    if pipeline is None and method in load_config(config).project.pipelines:
        pipeline = method  # the method's own recipe pipeline: --set applies to it
    cfg = load_config(config, overrides=overrides, pipeline=pipeline)
    name, _ = cfg.pipeline(pipeline)
    if run_id:
        from amrsim.stages.train.common import check_run_name

        check_run_name(method, run_id)  # before the refresh stages run, not after
    if resume:  # exactly the run named (else the newest interrupted one), never another finished run
        runs = unfinished_runs(Warehouse(cfg.warehouse_root), method)
        where = cfg.warehouse_root / "models" / method
        if run_id and run_id not in runs:
            raise ConfigError(f"--resume: {method} run '{run_id}' has no interrupted checkpoint under {where} "
                              f"(interrupted runs: {', '.join(runs) or 'none'})")
        if not runs:
            raise ConfigError(f"--resume: no interrupted {method} run under {where}")
        run_id = run_id or runs[0]
        console.print(f"resuming {method} run {run_id}")
    params = parse_overrides(param) or None
    if run_id and is_unfinished(Warehouse(cfg.warehouse_root), method, run_id):  # a resume keeps the run's params
        params = resumed_params(Warehouse(cfg.warehouse_root), cfg, name, method, run_id, params, param or [],
                                "--resume" if resume else "--run-id")
    else:
        _check_params(method, cfg, name, params)  # before the refresh stages, Ray and Prefect start
    show_training_progress()
    started = time.time()
    with flow_runtime(cfg.run_dir, f"amrsim train {method}", verbose,
                      stop_note=lambda: resume_note(Warehouse(cfg.warehouse_root), method, run_id, started)) as ready:
        from amrsim.secrets import seal
        from flows.train import train  # Prefect only here: the library stays Prefect-free

        ready()
        out = train(method, name, str(cfg.path), seal(overrides) or None, run_id, refresh=refresh,
                    params=seal(params), reuse=not retrain)  # secrets stay out of Prefect's database (seal)
    if json_:
        emit_json({"method": method, "pipeline": name, "stages": out,
                   "models": [{"model": s["model"], "status": s.get("status"), "model_dir": s.get("model_dir"),
                               "seconds": s.get("seconds")} for s in out if s.get("model")],
                   "seconds": round(time.perf_counter() - t0, 1)})
        return
    console.print(summary_table(out, f"train {method} - pipeline '{name}'"))
    print_stage_notes(out)
    for stage in out:
        if stage.get("model"):
            status = stage.get("status")
            what = {"ok": f"trained in {stage['seconds']}s",
                    "ok (reused)": "the same request already trained it (reused; --retrain to train again)"}.get(
                status, f"stopped early in {stage['seconds']}s (checkpoint kept; --resume)")
            console.print(f"{stage['model']}: {what} -> {stage.get('model_dir', '')}")
    console.print(f"{time.perf_counter() - t0:.1f}s")


def resumed_params(wh: Any, cfg: Any, pipeline: str, method: str, run_id: str, given: dict[str, Any] | None,
                   items: list[str], flag: str) -> dict[str, Any] | None:
    """The params to resume run `run_id` with: those it was started with (its request.json), the per-command ones
    (max_steps, device, workers) from this command as for any run. A --param may repeat a kept value; one that
    differs is a one-line error naming the key, the run's value and the given one. A run with no record (started
    before amrsim kept them) resumes with this command's params, as before."""
    from amrsim.stages.train.common import COMMAND_PARAMS, REQUEST, run_dir, started_params

    stored = started_params(wh, method, run_id)
    if stored is None:
        _check_params(method, cfg, pipeline, given)
        return given
    kept = {k: v for k, v in stored.items() if k not in COMMAND_PARAMS}
    record = f"{run_dir(wh, method, run_id) / REQUEST} (the params run '{run_id}' was started with)"
    entry = next((t.params for t in cfg.project.pipelines[pipeline].train if t.method == method), {})
    own = {k: v for k, v in entry.items() if k in COMMAND_PARAMS}  # what this command's pipeline entry says
    checked = _check_params(method, cfg, pipeline, given, base=(record, {**kept, **own}))
    run = _check_params(method, cfg, pipeline, None, base=(record, kept)).model_dump(mode="json")
    now = checked.model_dump(mode="json")
    raw = {item.partition("=")[0].strip(): item.strip() for item in items}
    for key in given or {}:
        if key not in COMMAND_PARAMS and now.get(key) != run.get(key):
            raise ConfigError(f"{flag}: run '{run_id}' was started with {key}={_shown(stored.get(key))}; --param "
                              f"{raw.get(key, key)} differs (resume keeps a run's params; start a new run id to "
                              "change them)")
    console.print(f"{method} run {run_id}: resuming with the params it was started with")
    return {**kept, **(given or {})}


def _shown(value: Any) -> str:
    """A param's value as it would be written after --param key= (YAML flow style)."""
    import json

    return value if isinstance(value, str) and value.strip() == value and value else json.dumps(value)


def resume_note(wh: Any, method: str, run_id: str | None, since: float) -> str | None:
    """After a stop: how to continue the training this command started, when it left a checkpoint (a run
    interrupted before its first checkpoint, or one from before this command, is not this command's)."""
    from amrsim.stages.train.common import run_dir, unfinished_runs

    ours = [r for r in unfinished_runs(wh, method) if run_dir(wh, method, r).stat().st_mtime >= since]
    if run_id is not None:
        return (f"{method} run {run_id} keeps its checkpoint: the same command continues it" if run_id in ours
                else None)
    return (f"{method} run {ours[0]} keeps its checkpoint: the same command with --resume --run-id {ours[0]} "
            f"continues it (without them it trains a new run)") if ours else None


def explain_command(
    sentence1: Annotated[str, typer.Argument(help="first sentence")],
    sentence2: Annotated[str, typer.Argument(help="second sentence")],
    model: Annotated[str, typer.Option(help="a trained S3BERT model")] = "s3bert:latest",
    config: ConfigOpt = "pipelines.yaml",
) -> None:
    """Overall similarity of two sentences and the similarity of each AMR aspect's sub-embedding (S3BERT)."""
    import polars as pl

    from amrsim.encoders import find_trained
    from amrsim.methods.loaders import load_encoder
    from amrsim.methods.portable import method_config
    from amrsim.methods.s3bert import RESIDUAL, contributions, explain, layout_from_meta

    for name, text in (("SENTENCE1", sentence1), ("SENTENCE2", sentence2)):
        if not text.strip():  # two empty texts embed identically: every aspect would read 1.00
            raise ConfigError(f"{name} is empty: give two sentences to compare")
    root = warehouse_root(config) / "models"
    try:
        trained = find_trained(model, root)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    layout = layout_from_meta(method_config(trained.path, "s3bert", trained.meta))
    if not layout:
        raise ConfigError(f"{trained.path}: '{model}' has no aspect layout (not an S3BERT model)")
    encoder = load_encoder(model, models_root=root)
    sims = explain(encoder, sentence1, sentence2, layout)
    emb = encoder.encode([sentence1, sentence2])
    parts = contributions(emb[0], emb[1], layout)
    rows = [{"aspect": "overall", "similarity": sims["overall"], "adds to overall": sims["overall"]}]
    rows += [{"aspect": name, "similarity": sims[name], "adds to overall": parts[name]} for name in layout
             if name != RESIDUAL]
    rows.append({"aspect": RESIDUAL, "similarity": sims[RESIDUAL], "adds to overall": parts[RESIDUAL]})
    frame = pl.DataFrame(rows).with_columns(pl.col("similarity", "adds to overall").round(4))
    console.print(frame_table(frame, f"{model} ({trained.run_id})"))
    console.print("similarity: cosine of the two sub-embeddings; adds to overall: a_k.b_k/(|a||b|), these sum to "
                  "the overall cosine")
