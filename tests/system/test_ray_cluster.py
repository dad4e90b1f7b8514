"""Ray cluster mode: an address where no cluster answers fails fast as a ConfigError; on a two-node cluster started
with `ray start` (head + worker, one CPU each) the parse and metrics stages write the same tables as in-process runs,
with the code shipped to the workers; a worker SIGKILLed mid-batch is retried without losing or repeating a batch."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

import polars as pl
import pytest

from amrsim.config import RayConfig
from amrsim.errors import ConfigError
from tasks.ray_map import map_batches
from tests.helpers import ROOT

ray = pytest.importorskip("ray")
# the batch functions below travel by value: the cluster's workers get amrsim and tasks, not this test package
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

RAY_CLI = Path(sys.executable).with_name("ray")
SENTENCES = [("1", "4.0", "The boy runs.", "A boy is running.", "Le garçon court.", "Un garçon court."),
             ("2", "1.0", "The cat sleeps.", "The dog barks.", "Le chat dort.", "Le chien aboie."),
             ("3", "3.5", "The girl wants to go.", "The girl does not want to go.", "", ""),
             ("4", "2.0", "A man eats an apple.", "The woman reads a book.", "", "")]


def _free_port() -> int:
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    except OSError as e:
        pytest.skip(f"cannot bind a loopback port: {e}")


def _ray_start(args: list[str], log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """`ray start --block` in a session of its own, so the finalizer can kill the node's whole process group."""
    cmd = [str(RAY_CLI)] if RAY_CLI.exists() else [sys.executable, "-m", "ray.scripts.scripts"]
    return subprocess.Popen([*cmd, "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                             "--disable-usage-stats", *args], cwd=cwd, env=env, start_new_session=True,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)


def _kill_leftovers(marker: str) -> None:
    """SIGKILL what is left of our nodes (raylet workers and the like): processes whose command line names our
    temp dir, which no other process on the machine does."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


@pytest.fixture(scope="module")
def cluster():
    """A head and a worker node on loopback, the test process connected as the driver; `address` is the GCS."""
    port = _free_port()
    # short, local temp dir: Ray's unix socket paths must fit in 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="amrsim-rc-", dir="/tmp" if Path("/tmp").is_dir() else None))
    # no PYTHONPATH and another cwd: the workers import this project only through the shipped runtime_env
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env |= {"RAY_AUTH_MODE": "disabled"}  # a ~/.ray/auth_token would otherwise turn token authentication on
    nodes: list[subprocess.Popen] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("RAY_ADDRESS", raising=False)
        mp.setenv("RAY_AUTH_MODE", "disabled")
        try:
            if ray.is_initialized():
                ray.shutdown()
            nodes.append(_ray_start(["--head", "--port", str(port), "--include-dashboard", "false",
                                     "--dashboard-port", str(_free_port()), "--temp-dir", str(tmp / "h")],
                                    tmp / "head.log", tmp, env))
            deadline = time.monotonic() + 90
            while True:
                assert nodes[0].poll() is None, (tmp / "head.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the head's GCS did not open its port in 90 s"
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.3)
            nodes.append(_ray_start(["--address", f"127.0.0.1:{port}", "--temp-dir", str(tmp / "w")],
                                    tmp / "worker.log", tmp, env))
            address = f"127.0.0.1:{port}"
            from tasks.ray_map import ensure_ray

            ensure_ray(RayConfig(address=address), tmp)
            while len([n for n in ray.nodes() if n["Alive"]]) < 2:
                assert nodes[1].poll() is None, (tmp / "worker.log").read_text()[-3000:]
                assert time.monotonic() < deadline, f"the worker node did not join in 90 s: {ray.nodes()}"
                time.sleep(0.3)
            yield address
        finally:
            ray.shutdown()
            for node in nodes:
                try:
                    os.killpg(node.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                node.wait(30)
            _kill_leftovers(str(tmp))
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def no_driver():
    """The fail-fast tests go through ensure_ray, which keeps an existing connection: start without one."""
    if ray.is_initialized():
        ray.shutdown()


def _double(batch: pl.DataFrame) -> pl.DataFrame:
    return batch.with_columns(y=pl.col("x") * 2)


def _fails_fast(cfg: RayConfig, tmp_path: Path, within: float = 15.0) -> ConfigError:
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as info:
        map_batches(_double, pl.DataFrame({"x": [1, 2, 3]}), cfg, tmp_path, batch_size=2)
    assert time.monotonic() - t0 < within, f"took {time.monotonic() - t0:.1f} s"
    assert not ray.is_initialized()
    return info.value


def test_a_dead_address_fails_fast_as_a_config_error_that_prefect_does_not_retry(no_driver, tmp_path, monkeypatch):
    from tasks.common import retry_unless_bad_input

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    port = _free_port()  # closed again: nothing listens there
    err = _fails_fast(RayConfig(address=f"127.0.0.1:{port}"), tmp_path)
    assert f"ray.address '127.0.0.1:{port}'" in str(err) and "no Ray cluster answers" in str(err)
    # the same through RAY_ADDRESS, with no ray.address in the config
    monkeypatch.setenv("RAY_ADDRESS", f"localhost:{port}")
    assert f"'localhost:{port}'" in str(_fails_fast(RayConfig(), tmp_path))
    # "auto" takes RAY_ADDRESS first, as Ray does
    err = _fails_fast(RayConfig(address="auto"), tmp_path)
    assert "ray.address 'auto'" in str(err) and f"localhost:{port}" in str(err)
    # ray://: the Ray Client is either not installed here (ConfigError saying so) or finds nothing at the port
    monkeypatch.delenv("RAY_ADDRESS")
    assert f"'ray://127.0.0.1:{port}'" in str(_fails_fast(RayConfig(address=f"ray://127.0.0.1:{port}"), tmp_path))
    assert "expected ray://<host>:<port>" in str(_fails_fast(RayConfig(address="head-without-port"), tmp_path))

    class Failed:
        def result(self):
            raise err

    assert retry_unless_bad_input(None, None, Failed()) is False


@pytest.mark.slow
def test_a_port_that_accepts_but_is_not_ray_fails_within_the_timeout(no_driver, tmp_path, monkeypatch):
    """A silent listener (ray.init would wait there for minutes) and one that answers as something else."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    silent, chatty = socket.socket(), socket.socket()
    accepted: list[socket.socket] = []
    for s in (silent, chatty):
        s.bind(("127.0.0.1", 0))
        s.listen(8)

    def answer_http() -> None:
        while True:
            try:
                conn, _ = chatty.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            accepted.append(conn)

    threading.Thread(target=answer_http, daemon=True).start()
    try:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        err = _fails_fast(RayConfig(address=address, connect_timeout_s=1), tmp_path, within=8)
        assert f"ray.address '{address}'" in str(err) and "within 1 s" in str(err)
        address = f"127.0.0.1:{chatty.getsockname()[1]}"
        err = _fails_fast(RayConfig(address=address, connect_timeout_s=1), tmp_path, within=8)
        assert f"ray.address '{address}'" in str(err) and "not as a Ray cluster" in str(err)
    finally:
        for s in (silent, chatty, *accepted):
            s.close()


def test_the_cluster_launcher_config_is_valid_for_this_ray():
    """infra/ray-cluster.yaml passes the launcher's own schema, and pins the Ray the driver runs."""
    import copy

    import yaml
    from ray.autoscaler._private.util import prepare_config, validate_config

    raw = yaml.safe_load((ROOT / "infra" / "ray-cluster.yaml").read_text())
    cfg = prepare_config(copy.deepcopy(raw))
    validate_config(cfg)
    assert cfg["provider"]["type"] == "local" and cfg["available_node_types"]["local.cluster.node"]["min_workers"] == 2
    assert any(f"ray[client]=={ray.__version__}" in c for c in cfg["setup_commands"])
    head = " ".join(cfg["head_start_ray_commands"])
    assert "--port=6379" in head and "--ray-client-server-port=10001" in head


def _warehouse(root: Path, tsv: Path):
    from amrsim.config import DatasetConfig
    from amrsim.stages.ingest import ingest_tables
    from amrsim.warehouse import Warehouse

    wh = Warehouse(root)
    ds = DatasetConfig(path=str(tsv), kind="pairs", lang="en", score_range=(0, 5),
                       translations={"fr": {"sentence1": "sentence1_fr", "sentence2": "sentence2_fr"}})
    ingest_tables(wh, "s", ds, tsv, "r0")
    return wh


def _parse_and_score(wh, cfg: RayConfig, run_dir: Path) -> tuple[dict, ...]:
    """The parse (ud, English; French through its English side) and metrics stages, spread the way tasks/parse.py
    and tasks/metrics.py spread them, with small batches."""
    from amrsim.amr.parsing import ParserSpec, parse_frame
    from amrsim.config import MetricsConfig, ParseConfig
    from amrsim.metrics.engine import score_pairs
    from amrsim.stages import metrics_stage, parse_stage

    parse = ParseConfig(backend="ud", langs=["en"])
    specs = {lang: ParserSpec("ud", lang) for lang in parse.direct_langs()}
    parsed = parse_stage(wh, "p", "s", parse, "ud", "r1", partial(
        map_batches, partial(parse_frame, specs=specs, linearize=parse.linearize), cfg=cfg, run_dir=run_dir,
        batch_size=cfg.batch_size))
    options = MetricsConfig(parser="ud", vectors="random").options()
    scored = metrics_stage(wh, "p", "s", options, "r2", partial(
        map_batches, partial(score_pairs, options=options), cfg=cfg, run_dir=run_dir))
    return tuple({k: v for k, v in r.summary().items() if k != "seconds"} for r in (parsed, scored))


def _table(wh, name: str) -> pl.DataFrame:
    return wh.read("s", name).drop("seconds").sort("key")


def _where(batch: pl.DataFrame) -> pl.DataFrame:
    import tasks.ray_map

    time.sleep(0.5)  # long enough that one node's single CPU is busy when the next batch is scheduled
    return batch.with_columns(node=pl.lit(ray.get_runtime_context().get_node_id()),
                              code=pl.lit(tasks.ray_map.__file__))


@pytest.mark.slow
def test_parse_and_metrics_on_a_two_node_cluster_equal_the_in_process_run(cluster, tmp_path, write_tsv, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    header = ["id", "split", "score", "sentence1", "sentence2", "sentence1_fr", "sentence2_fr"]
    tsv = write_tsv("pairs.tsv", header, [[i, "test", *rest] for i, *rest in SENTENCES])
    local, remote = _warehouse(tmp_path / "local", tsv), _warehouse(tmp_path / "remote", tsv)

    want = _parse_and_score(local, RayConfig(), tmp_path)
    got = _parse_and_score(remote, RayConfig(address=cluster, batch_size=2), tmp_path)
    assert ray.is_initialized(), "the cluster run did not go through Ray"
    assert got == want
    for name in ("amr", "amr_metrics"):
        a, b = _table(local, name), _table(remote, name)
        assert a.height > 0 and (a["status"] == "ok").all(), a.filter(pl.col("status") != "ok")
        assert b.columns == a.columns and b["key"].to_list() == a["key"].to_list()
        assert b.equals(a), f"{name} differs"
    # 12 sentences parsed in 6 batches; 4 distinct graph pairs (a French pair pivoted through English has the
    # English pair's graphs) scored in 2 batches
    assert (want[0]["computed"], want[1]["computed"]) == (12, 4)

    alive = [n for n in ray.nodes() if n["Alive"]]
    assert len(alive) == 2 and ray.cluster_resources().get("CPU") == 2.0
    where = map_batches(_where, pl.DataFrame({"x": list(range(8))}), RayConfig(address=cluster), tmp_path,
                        batch_size=1)
    assert set(where["node"]) == {n["NodeID"] for n in alive}, "batches did not run on both nodes"
    # the workers imported the snapshot of the driver's packages (runtime_env working_dir), not the checkout at the
    # driver's path, which exists on these nodes too
    assert all("runtime_resources/working_dir_files" in c for c in where["code"]), where["code"].unique().to_list()


def _die_once(batch: pl.DataFrame, marks: str, victim: int, driver: int) -> pl.DataFrame:
    """Log the attempt; on the first attempt at the batch starting with `victim`, SIGKILL this worker process."""
    first, pid = batch["x"][0], os.getpid()
    with (Path(marks) / f"attempt-{first}").open("a") as f:
        f.write(f"{pid}\n")
    killed = Path(marks) / "killed"
    if first == victim and not killed.exists():
        assert pid != driver, "the batch ran in the driver, not a Ray worker"
        killed.write_text(str(pid))
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    return batch.with_columns(y=pl.col("x") * 2, pid=pl.lit(pid))


@pytest.mark.slow
def test_a_worker_killed_mid_batch_is_retried_and_no_batch_is_lost_or_repeated(cluster, tmp_path):
    frame = pl.DataFrame({"x": list(range(40))})
    want = map_batches(_double, frame, RayConfig(), tmp_path, batch_size=5)
    marks = tmp_path / "marks"
    marks.mkdir()
    got = map_batches(partial(_die_once, marks=str(marks), victim=15, driver=os.getpid()), frame,
                      RayConfig(address=cluster), tmp_path, batch_size=5)
    assert got.select("x", "y").equals(want), "rows lost, repeated or out of order"
    attempts = {int(p.name.split("-")[1]): p.read_text().split() for p in marks.glob("attempt-*")}
    assert sorted(attempts) == list(range(0, 40, 5))
    assert {k: len(v) for k, v in attempts.items()} == {k: 2 if k == 15 else 1 for k in attempts}
    killed, retried = attempts[15]
    assert (marks / "killed").read_text() == killed != retried
    # the victim's rows come from the retry; the killed worker may have finished earlier batches, which stand
    assert got.filter(pl.col("x").is_between(15, 19))["pid"].to_list() == [int(retried)] * 5
