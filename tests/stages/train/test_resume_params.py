"""`amrsim train METHOD --resume` keeps the params the interrupted run was started with (request.json records them
when a run starts): a resume without --param ends with the weights of an uninterrupted run made with those params;
a --param repeating a kept value is fine, one that differs is one line naming the key and both values, exit 2;
max_steps, device and workers belong to the command. The flow is replaced by what it does past Prefect (the
pipeline entry, then the CLI's params, into `train_method`)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import types

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from amrsim.errors import ConfigError
from amrsim.stages.train import train_method
from amrsim.stages.train.common import REQUEST, started_params, unfinished_runs
from tests.helpers import one_line_error, run_cli
from tests.stages.train.test_s3bert import project  # noqa: F401 - the toy warehouse with metrics, tiny model

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def cli(monkeypatch):
    """`amrsim ARGS` in this process, its flow run without Prefect; returns the stages the flow returned."""
    from amrsim.cli import app

    def flow(method, pipeline, config, overrides, run_id, refresh=True, params=None, reuse=True):
        from amrsim.config import load_config

        pipe = load_config(config, overrides=overrides, pipeline=pipeline).section(pipeline)
        base = next((t.params for t in pipe.spec.train if t.method == method), {})
        return [train_method(pipe, method, {**base, **(params or {})}, run_id, reuse)]

    @contextlib.contextmanager
    def no_server(run_dir, label, verbose, stop_note=None):
        yield lambda: None

    monkeypatch.setitem(sys.modules, "flows.train", types.SimpleNamespace(train=flow))
    monkeypatch.setattr("amrsim.cli.train.flow_runtime", no_server)
    logger = logging.getLogger("amrsim")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate

    def run(cfg, *args: str):
        result = CliRunner().invoke(app, ["train", "s3bert", "--pipeline", "toy", "--config", str(cfg.path),
                                          "--no-refresh", "--json", *args])
        if result.exception is not None:
            raise result.exception
        return json.loads(result.stdout)["stages"][0]

    yield run
    logger.handlers[:], logger.propagate = handlers, propagate
    logger.setLevel(level)


def weights(wh, run_id):
    return load_file(wh.models_root / "s3bert" / run_id / "model.safetensors")


@pytest.mark.slow
def test_resume_without_params_keeps_the_runs_params_and_ends_as_the_uninterrupted_run(project, cli):  # noqa: F811
    cfg, wh, _ = project()
    chosen = ["--param", "lr=2e-3", "--param", "seed=3", "--param", "consistency_weight=0.5"]  # not the pipeline's
    whole = cli(cfg, "--run-id", "whole", *chosen)
    assert whole["status"] == "ok" and whole["resumed_from"] is None
    cut = cli(cfg, "--run-id", "cut", *chosen, "--param", "max_steps=2")
    assert cut["status"] == "partial" and cut["steps"] == 2 and unfinished_runs(wh, "s3bert") == ["cut"]
    recorded = started_params(wh, "s3bert", "cut")
    assert (recorded["lr"], recorded["seed"], recorded["consistency_weight"]) == (2e-3, 3, 0.5)
    assert recorded["max_steps"] == 2 and recorded["datasets"] == ["toy_pairs"]  # every param, defaults included

    # the pipeline's lr=1e-3 and seed 0 would make another run: --resume takes the run's own
    resumed = cli(cfg, "--resume")
    assert resumed["status"] == "ok" and resumed["model"] == "s3bert:cut" and resumed["resumed_from"] == 2
    assert resumed["steps"] == resumed["total_steps"] == whole["total_steps"]
    a, b = weights(wh, "whole"), weights(wh, "cut")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    meta = json.loads((wh.models_root / "s3bert" / "cut" / "model.json").read_text(encoding="utf-8"))
    assert meta["params"]["lr"] == 2e-3 and meta["seed"] == 3
    # the finished run's request.json still names its params (those it finished with: max_steps the command's)
    saved = json.loads((wh.models_root / "s3bert" / "cut" / REQUEST).read_text(encoding="utf-8"))
    assert saved["params"]["lr"] == 2e-3 and saved["params"]["max_steps"] is None and saved["key"]


@pytest.mark.slow
def test_resume_accepts_the_runs_values_and_refuses_another_in_one_line(project, cli, tmp_path):  # noqa: F811
    cfg, wh, _ = project()
    cli(cfg, "--run-id", "cut", "--param", "lr=2e-5", "--param", "max_steps=2")
    with pytest.raises(ConfigError) as err:
        cli(cfg, "--resume", "--param", "lr=1e-4")
    assert str(err.value) == ("--resume: run 'cut' was started with lr=2e-05; --param lr=1e-4 differs (resume keeps "
                              "a run's params; start a new run id to change them)")
    with pytest.raises(ConfigError, match=r"^--run-id: run 'cut' was started with langs=\[\"en\"\]; --param "
                                          r"langs=\[de\] differs"):
        cli(cfg, "--run-id", "cut", "--param", "langs=[de]")  # the same run id resumes too
    assert unfinished_runs(wh, "s3bert") == ["cut"]  # nothing trained

    # the exit code and the line a user sees
    line = one_line_error(run_cli(tmp_path, "train", "s3bert", "--pipeline", "toy", "--config", str(cfg.path),
                                  "--resume", "--param", "lr=1e-4"))
    assert line.startswith("error: --resume: run 'cut' was started with lr=2e-05; --param lr=1e-4 differs")

    # the same values written otherwise, and the per-command max_steps: resumed, stopped again at step 3
    again = cli(cfg, "--resume", "--param", "lr=0.00002", "--param", "seed=0", "--param", "max_steps=3")
    assert again["status"] == "partial" and again["resumed_from"] == 2 and again["steps"] == 3


def test_a_run_that_fails_before_its_first_checkpoint_leaves_no_record(project, monkeypatch):  # noqa: F811
    from amrsim.stages.train import s3bert as s3bert_stage

    cfg, wh, params = project()

    def fails(*args, **kwargs):
        raise ConfigError("s3bert: no usable pairs")

    monkeypatch.setattr(s3bert_stage, "train", fails)
    with pytest.raises(ConfigError):
        train_method(cfg.section("toy"), "s3bert", params, "failed")
    assert not (wh.models_root / "s3bert" / "failed").exists()
