"""Stopping `amrsim run`: Ctrl-C and SIGTERM end it within 10 s with exit 130 / 143 and take its temporary Prefect
server and workers with it; SIGKILL leaves no server behind; a second Ctrl-C is never ignored. Errors under `run`
print one line; Prefect's logs and tracebacks go to <run_dir>/logs/prefect.log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from amrsim.procs import alive, descendants, parent_death_signal_supported
from amrsim.synthetic import pipeline_yaml, write_pairs
from tests.helpers import ROOT, cli_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; parent-death signal")

SERVER_APP = "prefect.server.api.server:create_app"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _start_run(tmp_path: Path, ray: bool = False) -> subprocess.Popen[str]:
    write_pairs(tmp_path / "pairs.tsv", 0, 1200)
    text = pipeline_yaml(tmp_path / "pairs.tsv", commit_rows=100)
    if ray:
        text += "    ray: {enabled: true, num_cpus: 1}\n"
    (tmp_path / "pipelines.yaml").write_text(text)
    return subprocess.Popen([sys.executable, "-m", "amrsim.cli", "run"], cwd=tmp_path,
                            env=cli_env(tmp_path, own_server=True),  # its own temporary server is stopped too
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_mid_metrics(proc: subprocess.Popen[str], tmp_path: Path) -> None:
    log = tmp_path / "wh" / "synthetic" / "amr_metrics" / "_delta_log"
    deadline = time.monotonic() + 300
    while not (log.is_dir() and any(log.glob("*.json"))):
        assert proc.poll() is None, f"the run ended before the metrics stage: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, "no metrics commit within 300 s"
        time.sleep(0.05)


def _stop_and_check(proc: subprocess.Popen[str], sig: int, to_group: bool, expect_rc: int,
                    expect_in_tree: tuple[str, ...], slow_to_end: tuple[str, ...] = ()) -> str:
    """Signal the run, then check it ended within 10 s with `expect_rc` and took its whole process tree with it;
    processes whose command holds one of `slow_to_end` get 120 s instead of 10."""
    tree = descendants(proc.pid)
    commands = {p: _cmdline(p[0]) for p in tree}
    for what in expect_in_tree:  # the test covers what it claims to: these were running when the signal came
        assert any(what in c for c in commands.values()), f"no '{what}' under the run: {sorted(commands.values())}"
    t0 = time.monotonic()
    if to_group:
        os.killpg(proc.pid, sig)  # a terminal's Ctrl-C: every process of the foreground group
    else:
        os.kill(proc.pid, sig)  # `kill PID`: the CLI alone
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"still running 10 s after {signal.Signals(sig).name}")
    elapsed = time.monotonic() - t0
    late = {p for p in tree if any(name in commands[p] for name in slow_to_end)}
    while time.monotonic() - t0 < 10 and any(alive(p) for p in tree - late):
        time.sleep(0.1)
    survivors = {p[0]: commands[p] for p in tree - late if alive(p)}  # after 10 s
    while time.monotonic() - t0 < 120 and any(alive(p) for p in late):
        time.sleep(0.5)
    survivors |= {p[0]: commands[p] for p in late if alive(p)}  # after 120 s
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    stderr = proc.stderr.read()  # after the survivors are gone: one holding the pipe would block the read
    assert not survivors, f"left running after {signal.Signals(sig).name}: {survivors}"
    assert proc.returncode in (expect_rc, -sig), stderr[-3000:]
    assert elapsed <= 10
    return stderr


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "to_group", "rc"), [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_a_signal_mid_stage_stops_the_run_its_server_and_workers_within_10_s(tmp_path, sig, to_group, rc):
    proc = _start_run(tmp_path)
    try:
        _wait_mid_metrics(proc, tmp_path)
        stderr = _stop_and_check(proc, sig, to_group, rc, (SERVER_APP,))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == rc  # not killed by the signal's default action: stopped in order
    assert f"stopped by {signal.Signals(sig).name}" in stderr and "Traceback" not in stderr, stderr[-3000:]


@pytest.mark.slow
def test_sigterm_stops_local_ray_workers_too(tmp_path):
    proc = _start_run(tmp_path, ray=True)
    try:
        _wait_mid_metrics(proc, tmp_path)
        _stop_and_check(proc, signal.SIGTERM, False, 143, (SERVER_APP, "raylet", "gcs_server"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(not parent_death_signal_supported(), reason="needs prctl(PR_SET_PDEATHSIG)")
# local Ray: its agents outlive a SIGKILLed driver by about a minute of their own polling (make test-long)
@pytest.mark.parametrize("ray", [False, pytest.param(True, marks=pytest.mark.long)], ids=["in-process", "local-ray"])
def test_sigkill_of_the_cli_leaves_no_prefect_server_and_no_ray(tmp_path, ray):
    proc = _start_run(tmp_path, ray=ray)
    try:
        _wait_mid_metrics(proc, tmp_path)
        expected = (SERVER_APP, "raylet", "gcs_server") if ray else (SERVER_APP,)
        # Ray's agents notice their raylet is gone by polling it: about a minute after a SIGKILL of the driver
        _stop_and_check(proc, signal.SIGKILL, False, -signal.SIGKILL, expected,
                        slow_to_end=("ray::RuntimeEnvAgent", "ray::DashboardAgent"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)



@pytest.mark.slow
def test_a_prefect_server_killed_mid_run_ends_the_run_at_once_with_one_line_and_exit_1(tmp_path):
    """Before, Prefect's client retried each call to the vanished server with backoff: the run ended ~145 s later,
    exit 1, with a ConnectError and an 'Error logging to API' report. Now the run watches its server."""
    from amrsim.warehouse import Warehouse

    proc = _start_run(tmp_path)
    try:
        _wait_mid_metrics(proc, tmp_path)
        tree = descendants(proc.pid)
        servers = [p for p in tree if SERVER_APP in _cmdline(p[0])]
        assert len(servers) == 1, sorted(_cmdline(p[0]) for p in tree)
        os.kill(servers[0][0], signal.SIGKILL)  # the OOM killer's way
        try:  # a bound on behaviour, not a speed figure: the client's retries took ~145 s; a stop takes ~0.5 s
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("still running 60 s after its Prefect server was killed: retrying a dead server")
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr[-3000:]  # no traceback, no ConnectError, no 'Error logging to API'
    line = lines[0]
    assert line.startswith("error: the temporary Prefect server (http://127.0.0.1:"), line
    assert "killed by SIGKILL" in line and str(tmp_path / "run" / "logs" / "prefect.log") in line, line
    assert "tables keep their last whole commit" in line and "computes only what is missing" in line, line
    assert not any(alive(p) for p in tree)
    stored = Warehouse(tmp_path / "wh").read("synthetic", "amr_metrics")  # whole commits of 100 rows
    assert stored.height and stored.height % 100 == 0


STUBBORN = textwrap.dedent("""
    import os, subprocess, sys
    from amrsim.procs import SignalStop

    with SignalStop(grace=60, announce=lambda s: print("stopping", flush=True)):
        child = subprocess.Popen([sys.executable, "-c",
                                  "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                  "print('ready', flush=True); time.sleep(600)"], stdout=sys.stdout)
        read_end, _ = os.pipe()
        os.read(read_end, 1)  # the main thread blocks in a system call for good: the stop must not need it
""")


def test_a_second_ctrl_c_skips_the_grace_period_and_the_main_thread_is_not_needed(tmp_path):
    """A child that ignores SIGTERM would hold the first stop for its 60 s grace; the second SIGINT ends it now."""
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        tree = descendants(proc.pid)
        assert len(tree) == 1
        os.kill(proc.pid, signal.SIGINT)
        assert proc.stdout.readline().strip() == "stopping"
        time.sleep(1.0)
        assert proc.poll() is None and all(alive(p) for p in tree)  # the first stop waits on the stubborn child
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=10) == 130
        assert time.monotonic() - t0 < 10
        deadline = time.monotonic() + 5
        while any(alive(p) for p in tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(p) for p in tree)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_descendants_and_alive_follow_real_processes():
    """The checks above rely on these: a grandchild is found, and a dead (or zombie) process is not alive."""
    proc = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                             "print('up', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        tree = descendants(os.getpid())
        mine = {p for p in tree if p[0] == proc.pid}
        grandchildren = descendants(proc.pid)
        assert mine and len(grandchildren) == 1 and grandchildren <= tree
        assert all(alive(p) for p in tree | mine)
        (grandchild,) = grandchildren
        os.kill(grandchild[0], signal.SIGKILL)
        deadline = time.monotonic() + 5
        while alive(grandchild) and time.monotonic() < deadline:  # a zombie until its parent waits: not alive
            time.sleep(0.02)
        assert not alive(grandchild)
        assert not alive((proc.pid, next(iter(mine))[1] + 1))  # same pid, other start time: a different process
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_an_error_under_run_prints_one_line_naming_the_log_and_the_log_has_prefects_tracebacks(tmp_path):
    # the header and first row pass the checks made before Prefect starts; line 3's field count fails inside the flow
    header = "id\tsplit\tscore\tsentence1\tsentence2\tamr1\tamr2\n"
    good = "p1\ttest\t3.0\tA man sings.\tA man is singing.\t(s / sing-01)\t(s / sing-01)\n"
    (tmp_path / "pairs.tsv").write_text(header + good + "p2\ttest\t2.0\tonly three fields\n")
    (tmp_path / "pipelines.yaml").write_text(pipeline_yaml(tmp_path / "pairs.tsv"))
    cmd = [sys.executable, "-m", "amrsim.cli", "run"]
    env = cli_env(tmp_path, own_server=True)
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    log = tmp_path / "run" / "logs" / "prefect.log"
    assert out.returncode == 2, out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr[-3000:]
    assert lines[0].startswith("error: ") and "pairs.tsv:3:" in lines[0]
    assert f"Prefect's log: {log}" in lines[0]
    assert "Traceback (most recent call last)" in log.read_text() and "pairs.tsv:3" in log.read_text()

    verbose = subprocess.run([*cmd, "--verbose"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert verbose.returncode == 2 and "Traceback (most recent call last)" in verbose.stderr
    assert "pairs.tsv:3" in verbose.stderr


UNEXPECTED = textwrap.dedent("""
    import sys
    import amrsim.cli.run as run_command
    from amrsim.cli import main

    def failing_flow(*args):
        raise RuntimeError("boom in a stage\\nsecond line of the message")

    run_command._run_flow = failing_flow
    sys.argv = ["amrsim", "run"]
    main()
""")


def test_an_unexpected_error_under_run_is_one_line_exit_1_with_its_traceback_in_the_log(tmp_path):
    write_pairs(tmp_path / "pairs.tsv", 0, 3)
    (tmp_path / "pipelines.yaml").write_text(pipeline_yaml(tmp_path / "pairs.tsv"))
    env = cli_env(tmp_path) | {"PREFECT_API_URL": "http://127.0.0.1:9/api"}  # a configured server: none started
    proc = subprocess.run([sys.executable, "-c", UNEXPECTED], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    log = tmp_path / "run" / "logs" / "prefect.log"
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [
        f"error: RuntimeError: boom in a stage (traceback in {log}; --verbose shows it here)"]
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "in failing_flow\nRuntimeError: boom in a stage" in text
    assert "second line of the message" in text


def test_signal_stop_outside_the_main_thread_leaves_the_handlers_alone():
    """Only the main thread may set handlers: a run started from another thread keeps the process's own."""
    import threading

    from amrsim.procs import SignalStop

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def body() -> None:
        with SignalStop():
            seen.append((signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(10)
    assert seen == [before]
    with SignalStop() as stop:  # in the main thread it does install its handler, and restores the old one after
        assert signal.getsignal(signal.SIGINT) == stop._handler
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_stopped_training_says_how_to_continue_the_run_it_left_a_checkpoint_for(tmp_path):
    from amrsim.cli.train import resume_note
    from amrsim.warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh")

    def interrupted(run_id: str, when: float) -> None:
        path = wh.models_root / "dueam" / run_id
        (path / "checkpoint").mkdir(parents=True)
        os.utime(path, (when, when))

    started = time.time()
    interrupted("old", started - 3600)  # interrupted before this command: not its run
    assert resume_note(wh, "dueam", None, started) is None
    interrupted("20261128T051214-08c579da", started + 1)
    assert resume_note(wh, "dueam", None, started) == (
        "dueam run 20261128T051214-08c579da keeps its checkpoint: the same command with --resume --run-id "
        "20261128T051214-08c579da continues it (without them it trains a new run)")
    interrupted("r7", started + 2)  # --run-id r7: the same command resumes it
    assert resume_note(wh, "dueam", "r7", started) == "dueam run r7 keeps its checkpoint: the same command continues it"
    assert resume_note(wh, "dueam", "never-started", started) is None
