"""Crash recovery: a refresh flow SIGKILLed mid-stage leaves only whole commits, and its rerun computes exactly the
missing keys and ends with the tables of an uninterrupted run; a stage that raises mid-way keeps its earlier chunks;
a training process SIGKILLed mid-epoch resumes from its last checkpoint to the same model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import polars as pl
import pytest

from amrsim.config import load_config
from amrsim.metrics.engine import score_pairs
from amrsim.stages import metrics_stage
from amrsim.stages.ingest import ingest_stage
from amrsim.synthetic import pipeline_yaml, write_pairs
from amrsim.warehouse import Warehouse
from tests.helpers import COMPARED, cli_env

N_PAIRS, CHUNK = 1200, 100


def _commits(table: Path) -> int:
    log = table / "_delta_log"
    return len(list(log.glob("*.json"))) if log.is_dir() else 0


@pytest.mark.slow
def test_refresh_killed_mid_metrics_leaves_whole_commits_and_the_rerun_computes_only_the_rest(tmp_path):
    write_pairs(tmp_path / "pairs.tsv", 0, N_PAIRS)
    (tmp_path / "pipelines.yaml").write_text(pipeline_yaml(tmp_path / "pairs.tsv", commit_rows=CHUNK))
    metrics_table = tmp_path / "wh" / "synthetic" / "amr_metrics"
    cmd = [sys.executable, "-m", "amrsim.cli", "run"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while _commits(metrics_table) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"the flow ended before it could be killed: {proc.stderr.read()[-2000:]!r}"
        os.killpg(proc.pid, signal.SIGKILL)  # the flow and everything it started, mid-stage
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stderr.close()

    wh = Warehouse(tmp_path / "wh")
    killed = wh.read("synthetic", "amr_metrics")
    # only whole chunks are visible (files of the chunk in flight, if any, are referenced by no commit)
    assert 0 < killed.height < N_PAIRS and killed.height % CHUNK == 0
    assert killed["key"].n_unique() == killed.height and set(killed["status"]) == {"ok"}
    assert wh.read("synthetic", "pairs").height == N_PAIRS  # ingest had finished

    rerun = subprocess.run(cmd, cwd=tmp_path, env=cli_env(tmp_path), capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    lineage = wh.read("meta", "lineage").filter(pl.col("stage") == "metrics")
    assert lineage.height == 1  # the killed run never finished its stage, so it recorded none
    assert lineage["rows_in"][0] == N_PAIRS and lineage["rows_computed"][0] == N_PAIRS - killed.height

    # an uninterrupted run of the same stages in a fresh warehouse
    cfg = load_config(_ref_config(tmp_path))
    ref = Warehouse(cfg.warehouse_root)
    ingest_stage(cfg.section("load"), "synthetic", "ref")
    options = cfg.project.pipelines["load"].metrics.options()  # type: ignore[union-attr]
    metrics_stage(ref, "load", "synthetic", options, "ref", partial(score_pairs, options=options), N_PAIRS)
    final, expected = (w.read("synthetic", "amr_metrics").select(COMPARED).sort("key") for w in (wh, ref))
    assert final.height == N_PAIRS
    assert final.equals(expected)


def _ref_config(tmp_path: Path) -> Path:
    text = (tmp_path / "pipelines.yaml").read_text().replace("warehouse: wh", "warehouse: wh_ref")
    path = tmp_path / "ref.yaml"
    path.write_text(text)
    return path
