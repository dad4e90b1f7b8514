"""`amrsim deploy`: the process work pool and the deployments of infra/prefect.yaml, one set per pipeline, against the
Prefect server of PREFECT_API_URL. Prefect is imported inside the command only: the library stays Prefect-free."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from amrsim.cli.common import ConfigOpt
from amrsim.console import console, frame_table
from amrsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]  # the checkout: flows/ and infra/ beside amrsim/
PREFECT_FILE = ROOT / "infra" / "prefect.yaml"
OFF_CRON = "0 0 1 1 *"  # the inactive schedule of a pipeline without `schedule:` (infra/prefect.yaml needs a cron)


def deploy_context(config: str = "pipelines.yaml", pipeline: str | None = None) -> dict[str, Any]:
    """What infra/prefect.yaml's `amrsim` step gives its deployments: project root, absolute config path, pipeline
    (default: the config's default) and its refresh schedule (`cron`, `active` only when the pipeline sets one)."""
    from amrsim.config import load_config

    cfg = load_config(config)
    name = cfg.pipeline_name(pipeline)  # named, else default_pipeline, else the only pipeline
    if name not in cfg.project.pipelines:
        raise ConfigError(f"{cfg.path}: no pipeline '{name}'; defined: {sorted(cfg.project.pipelines)}")
    cron = cfg.project.pipelines[name].schedule
    if cron:
        from prefect.client.schemas.schedules import CronSchedule

        try:
            CronSchedule(cron=cron)
        except ValueError as e:
            raise ConfigError(f"{cfg.path}: pipeline '{name}', key 'schedule', value '{cron}': not a valid cron "
                              f"expression ({str(e).splitlines()[-1].strip()})") from None
    return {"root": str(ROOT), "config": str(cfg.path), "pipeline": name, "cron": cron or OFF_CRON,
            "active": bool(cron)}


def _load_prefect_file(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import yaml

    if not path.is_file():
        raise ConfigError(f"{path}: not found (amrsim deploy runs from a checkout of the project)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (UnicodeDecodeError, yaml.YAMLError) as e:  # not text, or not YAML: one line, not a traceback
        raise ConfigError(f"{path}: not a YAML file of deployments ({str(e).splitlines()[0]})") from None
    deployments = (raw.get("deployments") if isinstance(raw, dict) else None) or []
    if not deployments:
        raise ConfigError(f"{path}: no deployments")
    return deployments, raw.get("pull") or []


async def _ensure_pool(client: Any, name: str) -> str:
    """Create the process work pool unless it exists; an existing pool of another type is an error."""
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    try:
        pool = await client.read_work_pool(name)
    except ObjectNotFound:
        await client.create_work_pool(WorkPoolCreate(name=name, type="process",
                                                     base_job_template=ProcessWorker.get_default_base_job_template()))
        return "created"
    if pool.type != "process":
        raise ConfigError(f"work pool '{name}' exists with type '{pool.type}'; amrsim deployments need a process "
                          f"pool (--pool another name)")
    return "exists"


def _cron_schedules(spec: dict[str, Any]) -> list[dict[str, Any]]:
    schedules = spec.get("schedules") or []
    if any(not s.get("cron") for s in schedules):
        raise ConfigError(f"deployment {spec.get('entrypoint')}: amrsim deploy applies cron schedules only "
                          f"(the pipeline's `schedule:`); use `prefect deploy` for interval or rrule schedules")
    return schedules


async def _deploy(specs: list[tuple[dict[str, Any], list[dict[str, Any]]]], pool: str
                  ) -> tuple[str, list[dict[str, Any]]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import load_flow_from_entrypoint
    from prefect.utilities.callables import parameter_schema

    flows: dict[str, Any] = {}
    done = []
    async with get_client() as client:
        pool_state = await _ensure_pool(client, pool)
        for spec, pull in specs:
            entrypoint = spec["entrypoint"]
            if entrypoint not in flows:
                path, _, fn = entrypoint.rpartition(":")
                flows[entrypoint] = load_flow_from_entrypoint(f"{ROOT / path}:{fn}")
            flow = flows[entrypoint]
            schedules = [DeploymentScheduleCreate(schedule=CronSchedule(cron=s["cron"], timezone=s.get("timezone")))
                         for s in _cron_schedules(spec) if s.get("active", True) not in (False, "false", "False")]
            work_pool = spec.get("work_pool") or {}
            flow_id = await client.create_flow_from_name(flow.name)
            deployment_id = await client.create_deployment(
                flow_id=flow_id, name=spec["name"], schedules=schedules, parameters=spec.get("parameters") or {},
                description=spec.get("description") or flow.description, work_pool_name=pool,
                work_queue_name=work_pool.get("work_queue_name"), tags=spec.get("tags") or [],
                entrypoint=entrypoint, pull_steps=pull, job_variables=work_pool.get("job_variables") or {},
                parameter_openapi_schema=parameter_schema(flow).model_dump(exclude_unset=True),
                enforce_parameter_schema=spec.get("enforce_parameter_schema", True))
            done.append({"deployment": f"{flow.name}/{spec['name']}", "id": str(deployment_id),
                         "schedule": ", ".join(f"{s.schedule.cron} ({s.schedule.timezone or 'UTC'})" for s in schedules)
                         or "-"})
    return pool_state, done


def deploy_command(
        config: ConfigOpt = "pipelines.yaml",
        pipeline: Annotated[list[str] | None, typer.Option(
            "--pipeline", "-p", help="deploy only this pipeline (repeatable; default: every pipeline)")] = None,
        pool: Annotated[str | None, typer.Option(help="process work pool (default: infra/prefect.yaml's)")] = None,
        prefect_file: Annotated[Path, typer.Option(help="deployment definitions")] = PREFECT_FILE,
) -> None:
    """Create the process work pool if absent and deploy refresh-dataset, train and evaluate for each pipeline
    (named <flow>/<pipeline>); a pipeline's `schedule:` cron schedules its refresh-dataset deployment."""
    from prefect.settings import get_current_settings
    from prefect.utilities.templating import apply_values

    from amrsim.config import load_config

    api_url = get_current_settings().api.url
    if not api_url:
        raise ConfigError("PREFECT_API_URL is not set: deployments need a running server (`prefect server start`, "
                          "then `prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`)")
    cfg = load_config(config)
    names = pipeline or list(cfg.project.pipelines)
    unknown = [n for n in names if n not in cfg.project.pipelines]
    if unknown:
        raise ConfigError(f"{cfg.path}: no pipeline {unknown[0]!r}; defined: {sorted(cfg.project.pipelines)}")
    deployments, pull = _load_prefect_file(prefect_file)
    pools = {(d.get("work_pool") or {}).get("name") for d in deployments}
    pool = pool or next(iter(pools - {None}), None)
    if not pool:
        raise ConfigError(f"{prefect_file}: deployments name no work_pool; pass --pool")
    specs = []
    for name in names:
        context = {"amrsim": deploy_context(str(cfg.path), name)}
        specs += [(apply_values(d, context), apply_values(pull, context)) for d in deployments]
    import httpx
    from prefect.exceptions import PrefectException

    try:
        pool_state, done = asyncio.run(_deploy(specs, pool))
    except (httpx.HTTPError, PrefectException) as e:  # an unreachable server, a rejected deployment
        raise ConfigError(f"deploying to {api_url} failed: {type(e).__name__}: {e}") from None

    import polars as pl

    console.print(f"work pool '{pool}' (process): {pool_state}; server {api_url}")
    console.print(frame_table(pl.DataFrame(done).drop("id"), f"{len(done)} deployments from {prefect_file.name}"))
    first = names[0]
    console.print("next:\n"
                  f"  prefect worker start --pool {pool}          # runs the flows; scheduled refreshes too\n"
                  f"  prefect deployment run 'train/{first}' --param method=s3bert\n"
                  f"  prefect deployment run 'refresh-dataset/{first}'\n"
                  f"  prefect deployment run 'evaluate/{first}'")
