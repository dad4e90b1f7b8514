"""Helpers shared by test modules (fixtures stay in conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import cli_env


def run_cli(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`amrsim ARGS` as a real process in `cwd` (exit code, stdout and stderr as a user sees them); wide output so
    table cells are not wrapped."""
    return subprocess.run([sys.executable, "-m", "amrsim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**cli_env(cwd), "COLUMNS": "200"}, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single `error: ...` line of a command that failed with exit 2 (asserts there is no traceback)."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]
