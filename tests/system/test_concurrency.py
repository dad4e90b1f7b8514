"""Concurrent writers on one warehouse: each table's lock makes check-then-commit atomic, so two runs never store a
key twice; a lock dies with its holder; a writer that cannot get a lock in time names who holds it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import polars as pl
import pytest

from amrsim.warehouse import Warehouse
from amrsim.warehouse.lock import TableBusy
from tests.helpers import ROOT, cli_env


def _rows(keys: list[str], run: str = "r") -> pl.DataFrame:
    return pl.DataFrame({"key": keys, "lang": ["en"] * len(keys), "text": [f"{run} {k}" for k in keys],
                         "status": ["ok"] * len(keys), "error": [None] * len(keys)},
                        schema_overrides={"error": pl.String})


def _in_threads(*calls) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(call):
        try:
            call()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def _assert_unique_keys(wh: Warehouse) -> None:
    for dataset, table in wh.tables():
        frame = wh.read(dataset, table)
        if "key" in frame.columns:
            dupes = frame.filter(pl.col("key").is_duplicated())["key"].unique().to_list()
            assert not dupes, f"{dataset}/{table}: keys stored more than once: {dupes[:5]}"


def test_two_writers_that_both_checked_a_key_absent_store_it_once(wh):
    """The metrics stage's pattern, with the race forced: both writers see the keys absent before either commits."""
    wh.append("d", "sentences", _rows(["old"]))
    both_checked = threading.Barrier(2, timeout=30)
    keys = ["a", "b", "c"]
    added: list[int] = []

    def writer(run: str) -> None:
        todo = [k for k in keys if k not in wh.existing_keys("d", "sentences", keys)]
        both_checked.wait()
        added.append(wh.append("d", "sentences", _rows(todo, run)))

    assert _in_threads(lambda: writer("one"), lambda: writer("two")) == []
    stored = wh.read("d", "sentences")
    assert sorted(stored["key"].to_list()) == ["a", "b", "c", "old"]
    assert sorted(added) == [0, 3]  # the second writer's rows were all there by the time it held the lock


@pytest.mark.parametrize("write", ["upsert", "sync", "first_append"])
def test_writers_racing_on_one_snapshot_leave_each_key_once(wh, monkeypatch, write):
    """Both writers open the table before either commits (a barrier inside `snapshot`, given up after a second when
    the lock keeps the other writer out)."""
    if write != "first_append":
        wh.upsert("d", "sentences", _rows(["old"]))
    opened = threading.Barrier(2, timeout=1)
    real_open = Warehouse.snapshot

    def open_then_wait(self, dataset, table, version=None):
        snapshot = real_open(self, dataset, table, version)
        try:
            opened.wait()
        except threading.BrokenBarrierError:
            pass
        return snapshot

    monkeypatch.setattr(Warehouse, "snapshot", open_then_wait)
    rows = _rows(["old", "x", "y"] if write == "sync" else ["x", "y"])
    call = {"upsert": lambda: wh.upsert("d", "sentences", rows), "sync": lambda: wh.sync("d", "sentences", rows),
            "first_append": lambda: wh.append("d", "sentences", rows)}[write]
    assert _in_threads(call, call) == []
    monkeypatch.setattr(Warehouse, "snapshot", real_open)
    keys = wh.read("d", "sentences")["key"].to_list()
    assert sorted(keys) == (["old", "x", "y"] if write != "first_append" else ["x", "y"])


_HOLDER = """
import sys, time
from amrsim.warehouse import Warehouse
with Warehouse(sys.argv[1]).lock("d", "sentences"):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
def test_a_busy_table_names_its_holder_and_a_killed_holder_frees_it(wh):
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(wh.root)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        impatient = Warehouse(wh.root, lock_timeout=0.3)
        with pytest.raises(TableBusy) as busy:
            impatient.append("d", "sentences", _rows(["a"]))
        message = str(busy.value)
        assert message.startswith("busy: another run (pid ")
        assert f"pid {proc.pid}," in message and "holds table 'd/sentences' since " in message
        assert "command `-c " in message and "\n" not in message
        assert not impatient.exists("d", "sentences"), "a writer that gave up committed nothing"
        proc.send_signal(signal.SIGKILL)  # the kernel drops a flock with its holder: no stale lock to clean up
        proc.wait(10)
        t0 = time.monotonic()
        assert impatient.append("d", "sentences", _rows(["a"])) == 1
        assert time.monotonic() - t0 < 30
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_writer_re_enters_its_own_lock(wh):
    with wh.lock("d", "sentences"):
        assert wh.upsert("d", "sentences", _rows(["a"])) == 1  # the same thread may commit while holding it


@pytest.mark.slow
def test_two_concurrent_runs_store_every_key_once_and_the_metrics_of_one_run(tmp_path):
    from functools import partial

    from amrsim.config import load_config
    from amrsim.metrics.engine import score_pairs
    from amrsim.stages import metrics_stage
    from amrsim.stages.ingest import ingest_stage
    from amrsim.synthetic import pipeline_yaml, write_pairs
    from tests.helpers import COMPARED

    n_pairs = 400
    write_pairs(tmp_path / "pairs.tsv", 0, n_pairs)
    (tmp_path / "pipelines.yaml").write_text(pipeline_yaml(tmp_path / "pairs.tsv", commit_rows=50))
    cmd = [sys.executable, "-m", "amrsim.cli", "run"]
    procs = []
    for i in range(2):  # each its own Prefect home: two temporary servers, as two users on one warehouse
        procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(tmp_path / f"user{i}", own_server=True), text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out[-3000:]

    wh = Warehouse(tmp_path / "wh")
    _assert_unique_keys(wh)
    lineage = wh.read("meta", "lineage").filter(pl.col("stage") == "metrics")
    assert lineage.height == 2 and sum(lineage["rows_computed"]) == n_pairs  # no key counted by both runs

    (tmp_path / "ref.yaml").write_text((tmp_path / "pipelines.yaml").read_text().replace("warehouse: wh",
                                                                                      "warehouse: wh_ref"))
    cfg = load_config(tmp_path / "ref.yaml")
    ref = Warehouse(cfg.warehouse_root)
    ingest_stage(cfg.section("load"), "synthetic", "ref")
    options = cfg.project.pipelines["load"].metrics.options()  # type: ignore[union-attr]
    metrics_stage(ref, "load", "synthetic", options, "ref", partial(score_pairs, options=options), n_pairs)
    final, expected = (w.read("synthetic", "amr_metrics").select(COMPARED).sort("key") for w in (wh, ref))
    assert final.height == n_pairs and final.equals(expected)


@pytest.mark.slow
def test_two_concurrent_sts_evaluations_store_each_result_once(tmp_path, write_tsv):
    rows = [[f"a man plays instrument {i}", f"someone plays a {'guitar' if i % 2 else 'flute'} {i}", f"{i % 5}"]
            for i in range(12)]
    path = write_tsv("pairs_test.tsv", ["sentence1", "sentence2", "score"], rows)
    config = tmp_path / "pipelines.yaml"
    config.write_text("warehouse: wh\npipelines: {demo: {}}\n")
    cmd = [sys.executable, "-m", "amrsim.cli", "evaluate", "sts", "--encoder", "muse", "--file", str(path),
           "--config", str(config)]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(tmp_path), text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for _ in range(2)]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out[-3000:]
    wh = Warehouse(tmp_path / "wh")
    _assert_unique_keys(wh)
    results = wh.read("eval", "results")
    assert sorted(results["metric"].to_list()) == ["pearson", "spearman"]
