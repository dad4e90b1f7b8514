"""Every evaluation a pipeline's `evaluate:` section configures, for given encoders, then the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from amrsim.config import Pipeline
from amrsim.errors import ConfigError
from amrsim.stages.evaluate.aspects import aspects_eval
from amrsim.stages.evaluate.bitext import bitext_eval
from amrsim.stages.evaluate.report import ReportPaths, write_report
from amrsim.stages.evaluate.sts import sts_stage
from amrsim.stages.evaluate.transfer import transfer_eval
from amrsim.stages.ingest import ingest_stage
from amrsim.stages.translate import translator_spec
from amrsim.warehouse import Warehouse
from amrsim.warehouse.lineage import StageRun, new_run_id


@dataclass
class SuiteOutput:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # title -> result rows
    notes: list[str] = field(default_factory=list)  # rows left out, skipped evaluations
    report: ReportPaths | None = None


def bitext_files(pipe: Pipeline, patterns: list[str], key: str = "evaluate.bitext.files") -> list[Path]:
    """Configured bitext files (globs relative to pipelines.yaml), sorted; a pattern matching nothing is an error
    naming the config `key` that lists it."""
    files: list[Path] = []
    for pattern in patterns:
        path = pipe.resolve_path(pattern)
        found = sorted(path.parent.glob(path.name))
        if not found:
            raise ConfigError(f"{pipe.source}: {key}: '{pattern}' matches no file ({path})")
        files += found
    return files


def encode_options(pipe: Pipeline) -> dict[str, Any]:
    """batch_size and device of the pipeline's `encode:` section (64, auto without one)."""
    enc = pipe.spec.encode
    return {"batch_size": enc.batch_size if enc else 64, "device": enc.device if enc else "auto"}


def pipeline_sts(wh: Warehouse, pipe: Pipeline, run_id: str) -> tuple[StageRun, pl.DataFrame]:
    """The pipeline's `evaluate.sts` with its encode options; an encoder that parses (mse_amr) translates other
    languages into English with the pipeline's `translate.to_english` models."""
    assert pipe.spec.evaluate and pipe.spec.evaluate.sts
    tr = pipe.spec.translate
    to_english = {lang: translator_spec(pipe, m) for lang, m in tr.to_english.items()} if tr else {}
    return sts_stage(wh, pipe.name, pipe.spec.evaluate.sts, run_id, translate=to_english, **encode_options(pipe))


def run_suite(wh: Warehouse, pipe: Pipeline, encoders: list[str] | None = None, run_id: str | None = None,
              batch_size: int | None = None, device: str | None = None, sts: bool = True,
              report: bool | None = None) -> SuiteOutput:
    """`encoders` overrides each evaluation's own list; batch size and device default to the pipeline's encode
    options. With `sts`, the STS datasets are ingested (incrementally) and scored too; a pipeline run does STS in
    its own stage and passes sts=False."""
    ev = pipe.spec.evaluate
    out = SuiteOutput()
    if ev is None:
        return out
    run_id = run_id or new_run_id()
    options = encode_options(pipe)
    batch_size, device = batch_size or options["batch_size"], device or options["device"]
    if sts and ev.sts:
        for dataset in ev.sts.datasets:
            ingest_stage(pipe, dataset, run_id)
        _, rows = sts_stage(wh, pipe.name, ev.sts, run_id, encoders=encoders, batch_size=batch_size, device=device)
        out.tables["STS (x100)"] = rows
    if ev.bitext and ev.bitext.files:
        files = bitext_files(pipe, ev.bitext.files)
        out.tables["Bitext retrieval accuracy (x100)"] = pl.concat(
            [bitext_eval(wh, enc, f, run_id, pipe.name, batch_size, device)
             for enc in encoders or ev.bitext.encoders for f in files], how="vertical_relaxed")
    if ev.transfer:
        frames = []
        for name, task in ev.transfer.tasks.items():
            devs = {lang: pipe.resolve_path(p) for lang, p in task.dev.items()}
            tests = {lang: pipe.resolve_path(p) for lang, p in task.test.items()}
            for enc in encoders or ev.transfer.encoders:
                rows, bad = transfer_eval(wh, enc, name, pipe.resolve_path(task.train), devs, tests, run_id,
                                          task.kind, pipe.name, batch_size, device)
                frames.append(rows)
                out.notes += [f"{path}: {len(left)} row(s) left out, e.g. line {left[0].line}: {left[0].reason}"
                              for path, left in bad.items() if left]
        if frames:
            out.tables["Transfer accuracy (x100)"] = pl.concat(frames, how="vertical_relaxed")
    if ev.aspects:
        frames = []
        for dataset in ev.aspects.datasets:
            if not wh.exists(dataset, "amr_metrics"):
                out.notes.append(f"aspects: {dataset} has no amr_metrics table yet (run the metrics stage); skipped")
                continue
            frames += [aspects_eval(wh, enc, dataset, run_id, ev.aspects.split, pipe.name, batch_size, device)
                       for enc in encoders or ev.aspects.encoders]
        if frames:
            out.tables["AMR aspects: Spearman (x100)"] = pl.concat(frames, how="vertical_relaxed")
    if ev.report if report is None else report:
        out.report = write_report(wh)
    return out
