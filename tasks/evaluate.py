"""Evaluation tasks: STS on the pipeline's pair datasets, the other configured evaluations, and the report."""

from __future__ import annotations

import polars as pl
from prefect import task

from amrsim.config import LoadedConfig, looks_like_path
from amrsim.evaluate.suite import run_suite
from amrsim.stages.evaluate import sts_stage
from amrsim.stages.evaluate import write_report as render_report
from amrsim.translate.run import TranslatorSpec
from amrsim.warehouse import Warehouse
from tasks.common import TASK_OPTIONS


def _encode_options(cfg: LoadedConfig, pipeline: str) -> dict[str, object]:
    enc = cfg.project.pipelines[pipeline].encode
    return {"batch_size": enc.batch_size if enc else 64, "device": enc.device if enc else "auto"}


def _to_english(cfg: LoadedConfig, pipeline: str) -> dict[str, TranslatorSpec]:
    """The pipeline's X -> English models (translate.to_english), for encoders that parse at encode time."""
    tr = cfg.project.pipelines[pipeline].translate
    if tr is None:
        return {}
    return {lang: TranslatorSpec(str(cfg.resolve_path(m)) if looks_like_path(m) else m, tr.batch_size, tr.num_beams,
                                 tr.max_length, tr.device, configured=m) for lang, m in tr.to_english.items()}


@task(name="evaluate-sts", **TASK_OPTIONS)
def evaluate_sts(cfg: LoadedConfig, pipeline: str, run_id: str) -> tuple[dict[str, object], pl.DataFrame]:
    pipe = cfg.project.pipelines[pipeline]
    assert pipe.evaluate and pipe.evaluate.sts
    run, results = sts_stage(Warehouse(cfg.warehouse_root), pipeline, pipe.evaluate.sts, run_id,
                             translate=_to_english(cfg, pipeline),
                             **_encode_options(cfg, pipeline))  # type: ignore[arg-type]
    return run.summary(), results


@task(name="evaluate-suite", **TASK_OPTIONS)
def evaluate_others(cfg: LoadedConfig, pipeline: str, run_id: str) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """bitext, transfer and aspects as configured (STS runs in its own task)."""
    out = run_suite(Warehouse(cfg.warehouse_root), cfg, pipeline, run_id=run_id, sts=False, report=False,
                    **_encode_options(cfg, pipeline))  # type: ignore[arg-type]
    return out.tables, out.notes


@task(name="report", **TASK_OPTIONS)
def write_report(cfg: LoadedConfig) -> str:
    return str(render_report(Warehouse(cfg.warehouse_root)).html)
