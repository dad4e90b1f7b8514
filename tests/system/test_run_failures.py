"""A pipeline run that fails on the user's side ends with one line and exit 2, as docs/operations.md says: a
read-only (or full) warehouse is a path to fix, not an unexpected failure inside the run (exit 1)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from unittest import mock

import pytest

from amrsim.errors import AmrsimError, RunFailed
from tests.helpers import ROOT


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.ENOSPC], ids=errno.errorcode.get)
def test_a_file_system_error_inside_a_run_is_one_line_exit_2(tmp_path, code):
    from amrsim.cli.flow import flow_runtime

    lock = tmp_path / "warehouse" / ".locks" / "d.sentences.lock"
    with mock.patch.dict(os.environ, {"PREFECT_API_URL": "http://127.0.0.1:9/api"}):  # no server is started
        with pytest.raises(AmrsimError) as raised:
            with flow_runtime(tmp_path / "run", "amrsim run p", verbose=False):
                raise OSError(code, os.strerror(code), str(lock))
    error = raised.value
    assert not isinstance(error, RunFailed) and error.exit_code == 2
    assert str(error) == f"{lock}: {os.strerror(code)}"
    assert "Traceback" in (tmp_path / "run" / "logs" / "prefect.log").read_text()  # the log keeps it


def test_an_unexpected_error_inside_a_run_stays_exit_1(tmp_path):
    from amrsim.cli.flow import flow_runtime

    with mock.patch.dict(os.environ, {"PREFECT_API_URL": "http://127.0.0.1:9/api"}):
        with pytest.raises(RunFailed) as raised:
            with flow_runtime(tmp_path / "run", "amrsim run p", verbose=False):
                raise KeyError("bug")
    assert raised.value.exit_code == 1


def test_a_configured_server_that_stops_answering_is_one_line_exit_1_saying_what_was_kept(tmp_path):
    import httpx

    from amrsim.cli.flow import flow_runtime

    with mock.patch.dict(os.environ, {"PREFECT_API_URL": "http://127.0.0.1:9/api"}):
        with pytest.raises(RunFailed) as raised:
            with flow_runtime(tmp_path / "run", "amrsim run p", verbose=False):
                raise httpx.ConnectError("[Errno 111] Connection refused")
    message = str(raised.value)
    assert message.startswith("the Prefect server at http://127.0.0.1:9/api stopped answering (ConnectError: ")
    assert "tables keep their last whole commit" in message and "computes only what is missing" in message
    assert raised.value.exit_code == 1


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], process_group=0)


def test_the_server_watch_reports_a_death_once_and_an_expected_stop_never(tmp_path):
    from flows.runtime import TemporaryServer

    with (tmp_path / "server.log").open("wb") as log:
        died: list[int] = []
        server = TemporaryServer(log, 1)
        server.process = _sleeper()
        server.watch(died.append, every=0.05)
        server.process.kill()
        deadline = time.monotonic() + 10
        while not died and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        assert died == [-signal.SIGKILL]

        calm = TemporaryServer(log, 1)
        calm.process = _sleeper()
        calm.watch(died.append, every=0.05)
        calm.stop()  # the run's own stop: no news
        time.sleep(0.3)
        assert calm.process.poll() is not None and died == [-signal.SIGKILL]


ABORT = textwrap.dedent("""
    import subprocess, sys, threading, time
    from amrsim.procs import SignalStop

    with SignalStop(grace=5) as stop:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        threading.Thread(target=stop.abort, args=(1, lambda n: print(f"last words, {n} ended", flush=True))).start()
        time.sleep(0.5)
        stop.abort(7, lambda n: print("a second abort must not run", flush=True))  # a stop is under way: no-op
        time.sleep(60)  # the main thread is busy: the stop must not need it
""")


def test_signal_stop_abort_ends_the_tree_and_exits_with_its_code_once(tmp_path):
    """A run's server died: the same stop as a signal's (children ended), with the code and words of the caller."""
    proc = subprocess.run([sys.executable, "-c", ABORT], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and proc.stdout == "last words, 1 ended\n", proc.stdout + proc.stderr
