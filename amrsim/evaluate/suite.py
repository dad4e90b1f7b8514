"""Every evaluation a pipeline's `evaluate:` section configures, for given encoders, then the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from amrsim.config import LoadedConfig
from amrsim.errors import ConfigError
from amrsim.stages.evaluate import aspects_eval, bitext_eval, sts_stage, transfer_eval, write_report
from amrsim.stages.ingest import ingest_dataset
from amrsim.warehouse.lineage import new_run_id
from amrsim.warehouse.store import Warehouse


@dataclass
class SuiteOutput:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # title -> result rows
    notes: list[str] = field(default_factory=list)  # rows left out, skipped evaluations
    report: Any = None  # ReportPaths when written


def bitext_files(cfg: LoadedConfig, patterns: list[str]) -> list[Path]:
    """Configured bitext files (globs relative to pipelines.yaml), sorted; a pattern matching nothing is an error."""
    files: list[Path] = []
    for pattern in patterns:
        found = sorted(cfg.resolve_path(pattern).parent.glob(cfg.resolve_path(pattern).name))
        if not found:
            raise ConfigError(f"{cfg.path}: evaluate.bitext.files: '{pattern}' matches no file "
                              f"({cfg.resolve_path(pattern)})")
        files += found
    return files


def run_suite(wh: Warehouse, cfg: LoadedConfig, pipeline: str, encoders: list[str] | None = None,
              run_id: str | None = None, batch_size: int = 64, device: str = "auto", sts: bool = True,
              report: bool | None = None) -> SuiteOutput:
    """`encoders` overrides each evaluation's own list. With `sts`, the STS datasets are ingested (incrementally)
    and scored too; a pipeline run does STS in its own stage and passes sts=False."""
    pipe = cfg.project.pipelines[pipeline]
    ev = pipe.evaluate
    out = SuiteOutput()
    if ev is None:
        return out
    run_id = run_id or new_run_id()
    if sts and ev.sts:
        for dataset in ev.sts.datasets:
            ingest_dataset(wh, cfg, pipeline, dataset, run_id)
        _, rows = sts_stage(wh, pipeline, ev.sts, run_id, encoders=encoders, batch_size=batch_size, device=device)
        out.tables["STS (x100)"] = rows
    if ev.bitext and ev.bitext.files:
        files = bitext_files(cfg, ev.bitext.files)
        out.tables["Bitext retrieval accuracy (x100)"] = pl.concat(
            [bitext_eval(wh, enc, f, run_id, pipeline, batch_size, device)
             for enc in encoders or ev.bitext.encoders for f in files], how="vertical_relaxed")
    if ev.transfer:
        frames = []
        for name, task in ev.transfer.tasks.items():
            for enc in encoders or ev.transfer.encoders:
                rows, bad = transfer_eval(
                    wh, enc, name, cfg.resolve_path(task.train),
                    {lang: cfg.resolve_path(p) for lang, p in task.dev.items()},
                    {lang: cfg.resolve_path(p) for lang, p in task.test.items()}, run_id, task.kind, pipeline,
                    batch_size, device)
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
            frames += [aspects_eval(wh, enc, dataset, run_id, ev.aspects.split, pipeline, batch_size, device)
                       for enc in encoders or ev.aspects.encoders]
        if frames:
            out.tables["AMR aspects: Spearman (x100)"] = pl.concat(frames, how="vertical_relaxed")
    if ev.report if report is None else report:
        out.report = write_report(wh)
    return out
