"""One training per run directory: a second training of the same run id, in another thread or process, fails at
once with one line naming the run and its holder, and the first one's model is whole. `--resume` and a run id
with a checkpoint resume exactly that run, never another finished run of the same request."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from typer.testing import CliRunner

from amrsim.encoders import find_trained
from amrsim.errors import ConfigError
from amrsim.methods.loaders import load_encoder
from amrsim.stages.train import s3bert as s3bert_stage
from amrsim.stages.train import train_method
from amrsim.stages.train.common import is_unfinished, unfinished_runs
from amrsim.warehouse.lock import RunBusy, run_lock, run_lock_path
from tests.helpers import ROOT
from tests.stages.train.test_s3bert import project  # noqa: F401 - the toy warehouse with metrics, tiny model

pytestmark = pytest.mark.usefixtures("one_thread")


def test_two_trainings_of_one_run_id_one_trains_the_other_fails_naming_the_holder(project, monkeypatch):  # noqa: F811
    cfg, wh, params = project()
    params = {**params, "epochs": 1}
    first_training, second_done = threading.Event(), threading.Event()
    real_train = s3bert_stage.train

    def train_after_the_other_tried(*args, **kwargs):  # the first holds the run while the second one tries
        first_training.set()
        assert second_done.wait(60)
        return real_train(*args, **kwargs)

    monkeypatch.setattr(s3bert_stage, "train", train_after_the_other_tried)
    results: dict[str, object] = {}

    def first() -> None:
        results["first"] = train_method(cfg.section("toy"), "s3bert", params, "same", reuse=False)

    def second() -> None:
        assert first_training.wait(60)
        try:
            results["second"] = train_method(cfg.section("toy"), "s3bert", params, "same", reuse=False)
        except RunBusy as e:
            results["second"] = e
        finally:
            second_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert results["first"]["status"] == "ok" and results["first"]["model"] == "s3bert:same"
    busy = results["second"]
    assert isinstance(busy, RunBusy)
    message = str(busy)
    assert "\n" not in message and "run 's3bert:same'" in message and "pid" in message
    assert str(run_lock_path(wh.models_root, "s3bert", "same")) in message
    # the run directory is the first training's, whole: it loads and encodes
    assert find_trained("s3bert:same", wh.models_root).meta["run_id"] == "same"
    assert load_encoder("s3bert:same", models_root=wh.models_root).encode(["the red cat runs"]).shape == (1, 64)
    with run_lock(wh.models_root, "s3bert", "same"):  # released when the training ended
        pass


HOLDER = """
import sys, time
from pathlib import Path
from amrsim.warehouse.lock import run_lock
with run_lock(Path(sys.argv[1]), "s3bert", "held"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_run_held_by_another_process_is_refused_before_anything_trains(project, monkeypatch):  # noqa: F811
    cfg, wh, params = project()
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(wh.models_root)], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        monkeypatch.setattr(s3bert_stage, "train", lambda *a, **k: pytest.fail("training must not start"))
        with pytest.raises(RunBusy) as busy:
            train_method(cfg.section("toy"), "s3bert", params, "held")
        assert f"pid {child.pid}" in str(busy.value) and "run 's3bert:held'" in str(busy.value)
        assert not (wh.models_root / "s3bert" / "held").exists()
    finally:
        child.kill()
        child.wait()
    with run_lock(wh.models_root, "s3bert", "held"):  # the kernel dropped the killed holder's lock
        pass


def test_an_interrupted_run_id_is_resumed_not_replaced_by_a_finished_run(project):  # noqa: F811
    cfg, wh, params = project()
    params = {**params, "max_steps": None}
    done = train_method(cfg.section("toy"), "s3bert", params, "finished")
    assert done["status"] == "ok"
    stopped = train_method(cfg.section("toy"), "s3bert", {**params, "max_steps": 2}, "stopped")
    assert stopped["status"] == "partial" and unfinished_runs(wh, "s3bert") == ["stopped"]
    # the same request as "finished": reused under any other run id, but "stopped" has a checkpoint to resume
    assert train_method(cfg.section("toy"), "s3bert", params, "other")["status"] == "ok (reused)"
    resumed = train_method(cfg.section("toy"), "s3bert", params, "stopped")
    assert resumed["status"] == "ok" and resumed["model"] == "s3bert:stopped" and resumed["resumed_from"] == 2
    assert (wh.models_root / "s3bert" / "stopped" / "model.json").is_file() and not unfinished_runs(wh, "s3bert")
    # a finished run id asked again is reused as itself
    assert train_method(cfg.section("toy"), "s3bert", params, "stopped")["model"] == "s3bert:stopped"


def test_an_early_stopped_run_with_a_model_json_counts_as_interrupted(tmp_path, project):  # noqa: F811
    _, wh, _ = project()
    run = wh.models_root / "mse_amr" / "cut"
    (run / "checkpoint").mkdir(parents=True)
    (run / "model.json").write_text(json.dumps({"metrics": {"completed": False}}), encoding="utf-8")
    assert is_unfinished(wh, "mse_amr", "cut") and unfinished_runs(wh, "mse_amr") == ["cut"]
    (run / "model.json").write_text(json.dumps({"metrics": {"completed": True}}), encoding="utf-8")
    assert not is_unfinished(wh, "mse_amr", "cut") and unfinished_runs(wh, "mse_amr") == []


def test_cli_resume_of_a_run_that_is_not_interrupted_is_one_line(project):  # noqa: F811
    from amrsim.cli import app

    cfg, wh, params = project()
    (wh.models_root / "s3bert" / "stopped" / "checkpoint").mkdir(parents=True)
    result = CliRunner().invoke(app, ["train", "s3bert", "--pipeline", "toy", "--config", str(cfg.path),
                                      "--run-id", "nope", "--resume"])
    assert isinstance(result.exception, ConfigError), result.output
    message = str(result.exception)
    assert "\n" not in message and "'nope'" in message and "interrupted runs: stopped" in message
