"""Prefect deployments on loopback: a server, the documented `prefect deploy` sequence and `amrsim deploy`, parameter
validation at `prefect deployment run`, and a process worker running a few training steps on the bundled sample."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT

PREFECT = str(Path(sys.executable).parent / "prefect")
POOL = "amrsim-process"
CRON = "0 3 * * *"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 20) -> None:
    """Signal the process group (server or worker and their children); kill it if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except ProcessLookupError:
        pass


def _test_config(path: Path) -> Path:
    """The repo's demo pipeline cut to what S3BERT needs (English sample_sts, ud graphs, one metric aspect) and a
    tiny training recipe; `demo` has a schedule, `adhoc` (the same pipeline) has none."""
    raw = yaml.safe_load((ROOT / "pipelines.yaml").read_text(encoding="utf-8"))
    demo = raw["pipelines"]["demo"]
    sts = {k: v for k, v in demo["datasets"]["sample_sts"].items() if k != "translations"}
    s3bert = next(t for t in demo["train"] if t["method"] == "s3bert")
    pipe = {"description": "deployment test", "datasets": {"sample_sts": sts},
            "parse": {**demo["parse"], "datasets": ["sample_sts"], "langs": ["en"]},
            "metrics": {**demo["metrics"], "datasets": ["sample_sts"], "aspects": ["concepts"]},
            "train": [{"method": "s3bert", "params": {
                **s3bert["params"], "datasets": ["sample_sts"], "n_aspects": 1, "max_pairs": 16, "batch_size": 8,
                "dev_split": None, "negatives": False, "workers": 1, "device": "cpu"}}],
            "ray": {"enabled": False}}
    cfg = {"default_pipeline": "demo", "warehouse": str(path.parent / "wh"), "run_dir": str(path.parent / "run"),
           "pipelines": {"demo": {**pipe, "schedule": CRON}, "adhoc": pipe}}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


class Server:
    def __init__(self, tmp: Path, url: str):
        import httpx

        self.tmp, self.url = tmp, url
        self.http = httpx.Client(base_url=url, timeout=30)
        self.env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "PREFECT_API_URL": url,
                    "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_UI_ENABLED": "false",
                    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120", "PREFECT_WORKER_QUERY_SECONDS": "2",
                    "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(ROOT),
                    "COLUMNS": "200"}

    def run(self, *args: str, cwd: Path = ROOT, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, env=self.env, timeout=timeout)

    def deployment(self, name: str) -> dict:
        response = self.http.get(f"/deployments/name/{name}")
        assert response.status_code == 200, f"{name}: {response.status_code} {response.text[:500]}"
        return response.json()

    def flow_runs(self, deployment_id: str) -> list[dict]:
        return self.http.post("/flow_runs/filter", json={"deployments": {"id": {"any_": [deployment_id]}}}).json()

    def logs(self, flow_run_id: str, until: str | None = None, wait: float = 60) -> str:
        """The flow run's log, every record (the API hands at most 200 a call). With `until`: read again until it
        holds that text or `wait` s pass, since a run's process ships its last records after its final state."""
        deadline = time.monotonic() + wait
        while True:
            rows: list[dict] = []
            while True:
                page = self.http.post("/logs/filter", json={"logs": {"flow_run_id": {"any_": [flow_run_id]}},
                                                            "sort": "TIMESTAMP_ASC", "limit": 200,
                                                            "offset": len(rows)}).json()
                rows += page
                if len(page) < 200:
                    break
            text = "\n".join(r["message"] for r in rows)
            if until is None or until in text or time.monotonic() > deadline:
                return text
            time.sleep(1)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    try:
        port = _free_port()
    except OSError as e:
        pytest.skip(f"cannot bind a loopback port for a Prefect server: {e}")
    tmp = tmp_path_factory.mktemp("deployments")
    (tmp / "prefect").mkdir()
    srv = Server(tmp, f"http://127.0.0.1:{port}/api")
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port), "--no-ui",
                             "--no-services"], stdout=log, stderr=subprocess.STDOUT, env=srv.env, cwd=tmp,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, f"server exited: {(tmp / 'server.log').read_text()[-3000:]}"
            try:
                if srv.http.get("/health", timeout=2).status_code == 200:
                    break
            except Exception:  # not listening yet
                pass
            assert time.monotonic() < deadline, f"server not up in 180 s: {(tmp / 'server.log').read_text()[-3000:]}"
            time.sleep(0.5)
        yield srv
    finally:
        _stop(proc)
        log.close()
        srv.http.close()


@pytest.fixture(scope="module")
def deployed(server):
    """The documented sequence (work pool, `prefect deploy --all` from the project root: the default pipeline of
    ./pipelines.yaml), a snapshot of train/demo, then `amrsim deploy` with the test config (both its pipelines)."""
    pool = server.run(PREFECT, "work-pool", "create", POOL, "--type", "process")
    assert pool.returncode == 0, pool.stdout + pool.stderr
    raw = server.run(PREFECT, "--no-prompt", "deploy", "--all", "--prefect-file", "infra/prefect.yaml")
    assert raw.returncode == 0, raw.stdout[-3000:] + raw.stderr[-3000:]
    default = yaml.safe_load((ROOT / "pipelines.yaml").read_text(encoding="utf-8"))["default_pipeline"]
    snapshot = {f: server.deployment(f"{f}/{default}") for f in ("refresh-dataset", "train", "evaluate")}
    config = _test_config(server.tmp / "pipelines.yaml")
    amrsim = server.run(sys.executable, "-m", "amrsim.cli", "deploy", "--config", str(config), cwd=server.tmp)
    assert amrsim.returncode == 0, amrsim.stdout[-3000:] + amrsim.stderr[-3000:]
    return {"raw": snapshot, "default": default, "config": config, "amrsim": amrsim}


@pytest.mark.slow
def test_prefect_deploy_from_infra_yaml(server, deployed):
    snapshot, default = deployed["raw"], deployed["default"]
    from amrsim.config import load_config

    cron = load_config(ROOT / "pipelines.yaml").project.pipelines[default].schedule
    for flow, dep in snapshot.items():
        assert dep["work_pool_name"] == POOL and dep["enforce_parameter_schema"] is True, flow
        assert dep["pull_steps"] == [{"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]
        assert dep["parameters"]["pipeline"] == default
        assert dep["parameters"]["config"] == str(ROOT / "pipelines.yaml")
    schedules = snapshot["refresh-dataset"]["schedules"]
    assert len(schedules) == 1 and schedules[0]["active"] is bool(cron)
    assert not snapshot["train"]["schedules"] and not snapshot["evaluate"]["schedules"]
    enum = snapshot["train"]["parameter_openapi_schema"]["properties"]["method"]["anyOf"][0]["enum"]
    from amrsim.methods import METHODS

    assert enum == list(METHODS)
    assert server.http.get(f"/work_pools/{POOL}").json()["type"] == "process"


@pytest.mark.slow
def test_amrsim_deploy_one_set_per_pipeline_with_its_schedule(server, deployed):
    out = " ".join(deployed["amrsim"].stdout.split())
    assert f"work pool '{POOL}' (process): exists" in out  # created by the documented sequence above
    assert f"prefect worker start --pool {POOL}" in out
    assert "prefect deployment run 'train/demo' --param method=s3bert" in out
    config = str(deployed["config"])
    for pipeline in ("demo", "adhoc"):
        for flow in ("refresh-dataset", "train", "evaluate"):
            dep = server.deployment(f"{flow}/{pipeline}")
            assert dep["parameters"]["pipeline"] == pipeline and dep["parameters"]["config"] == config
            assert dep["pull_steps"][0]["prefect.deployments.steps.set_working_directory"]["directory"] == str(ROOT)
            assert dep["entrypoint"].startswith(f"flows/{flow.replace('-', '_')}.py:")
            if flow != "refresh-dataset":
                assert not dep["schedules"], (flow, pipeline)
    # the redeploy of refresh-dataset/demo replaced prefect deploy's schedule with the test config's cron
    scheduled = server.deployment("refresh-dataset/demo")["schedules"]
    assert [(s["schedule"]["cron"], s["active"]) for s in scheduled] == [(CRON, True)]
    assert server.deployment("refresh-dataset/adhoc")["schedules"] == []


@pytest.mark.slow
@pytest.mark.parametrize("param, value, expected", [
    ("method", "nope", "Validation failed for field 'method'. Failure reason: 'nope' is not one of"),
    ("refresh", "maybe", "Validation failed for field 'refresh'. Failure reason: 'maybe' is not of type 'boolean'"),
    ("params", "3", "Validation failed for field 'params'"),
    # Prefect stores a run's parameters: a secret is refused before the run exists (docs/operations.md#security)
    ("overrides", '{"ray.address": "ray://bob:pw12345678@head:10001"}', "Validation failed for field"),
    ("params", '{"anchor": "hf_abcdefghijklmnopqrstuvwxyz0123"}', "Validation failed for field 'params.anchor'"),
])
def test_run_with_a_bad_parameter_fails_at_validation(server, deployed, param, value, expected):
    proc = server.run(PREFECT, "deployment", "run", "train/demo", "--param", f"{param}={value}")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0 and expected in out, out[-2000:]
    assert server.flow_runs(server.deployment("train/demo")["id"]) == []  # rejected before any run exists


@pytest.mark.slow
def test_worker_runs_a_train_deployment(server, deployed):
    log = (server.tmp / "worker.log").open("w")
    worker = subprocess.Popen([PREFECT, "worker", "start", "--pool", POOL, "--type", "process"], stdout=log,
                              stderr=subprocess.STDOUT, env=server.env, cwd=server.tmp, start_new_session=True)
    try:
        proc = server.run(PREFECT, "deployment", "run", "train/demo", "--param", "method=s3bert",
                          "--param", 'params={"max_steps": 1}')
        assert proc.returncode == 0, proc.stdout + proc.stderr
        run_id = re.search(r"UUID: ([0-9a-f-]{36})", proc.stdout).group(1)
        deadline = time.monotonic() + 400
        while True:
            state = server.http.get(f"/flow_runs/{run_id}").json()["state"]
            if state["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                break
            assert time.monotonic() < deadline, f"flow run still {state['name']} after 400 s"
            time.sleep(2)
        assert state["type"] == "COMPLETED", (f"{state['name']}: {state.get('message')}\n{server.logs(run_id)[-4000:]}"
                                              f"\n{(server.tmp / 'worker.log').read_text()[-3000:]}")
        # the run's process ships its last log records after its final state: read them while the worker (and so
        # the process) still runs, as a user's worker would; stopping it first can cut them off
        logs = server.logs(run_id, until="stopped at step 1 of 2")
    finally:
        _stop(worker, signal.SIGINT)  # a Prefect 3.8 worker did not exit on SIGTERM here; SIGINT stops it
        log.close()
    run = server.http.get(f"/flow_runs/{run_id}").json()
    assert run["parameters"]["method"] == "s3bert" and run["parameters"]["params"] == {"max_steps": 1}
    models = list((server.tmp / "wh" / "models" / "s3bert").iterdir())  # the test config's warehouse, not ./
    assert len(models) == 1, models
    # max_steps reached the method: stopped after 1 of 2 steps, checkpointed, no finished model
    state = json.loads((models[0] / "checkpoint" / "state.json").read_text(encoding="utf-8"))
    assert state["step"] == 1 and not (models[0] / "model.json").exists()
    assert "Running 1 deployment pull step" in logs
    # the run is not shown as a finished model (docs/operations.md: What a run shows in Prefect), and its log holds
    # amrsim's own lines, not only Prefect's
    assert run["state"]["name"] == "Unfinished", run["state"]
    assert "stopped at step 1 of 2 before its model was finished" in run["state"]["message"]
    assert "train s3bert" in logs and "stopped at step 1 of 2" in logs, logs[-3000:]


@pytest.mark.slow
def test_deploy_context_reads_the_pipeline_schedule(write_config):
    from amrsim.cli.deploy import ROOT as root
    from amrsim.cli.deploy import deploy_context
    from amrsim.errors import ConfigError

    body = """
        default_pipeline: a
        pipelines:
          a: {schedule: "30 2 * * 1"}
          b: {}
    """
    path = write_config(body)
    assert deploy_context(str(path)) == {"root": str(root), "config": str(path), "pipeline": "a",
                                         "cron": "30 2 * * 1", "active": True}
    off = deploy_context(str(path), "b")
    assert off["pipeline"] == "b" and off["active"] is False and off["cron"]  # a valid cron, inactive
    with pytest.raises(ConfigError, match="no pipeline 'c'"):
        deploy_context(str(path), "c")
    bad = write_config(body.replace("30 2 * * 1", "every night"), "bad.yaml")
    with pytest.raises(ConfigError, match=r"pipeline 'a', key 'schedule', value 'every night': not a valid cron"):
        deploy_context(str(bad))


@pytest.mark.slow
def test_train_flow_names_an_unknown_method():
    from prefect.exceptions import ParameterTypeError

    from amrsim.errors import ConfigError
    from flows.train import train

    available = "dueam, meaning, mse_amr, pear, s3bert"
    with pytest.raises(ParameterTypeError, match=rf"method: .*unknown training method 'nope'; available: {available}"):
        train.validate_parameters({"method": "nope"})  # what a direct call `train(method="nope")` raises
    with pytest.raises(ParameterTypeError, match="refresh"):
        train.validate_parameters({"method": "s3bert", "refresh": "maybe"})
    with pytest.raises(ConfigError, match="unknown training method 'nope'"):
        train.fn(method="nope", config="missing.yaml")  # checked before the config is read or anything runs
    assert train.validate_parameters({"method": "s3bert"})["method"] == "s3bert"


@pytest.mark.slow
def test_amrsim_deploy_needs_a_server(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {
        "PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "amrsim.cli", "deploy"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2 and "PREFECT_API_URL is not set" in proc.stderr, proc.stderr[-2000:]
