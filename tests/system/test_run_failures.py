"""A pipeline run that fails on the user's side ends with one line and exit 2, as docs/operations.md says: a
read-only (or full) warehouse is a path to fix, not an unexpected failure inside the run (exit 1)."""

from __future__ import annotations

import errno
import os
from unittest import mock

import pytest

from amrsim.errors import AmrsimError, RunFailed


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
