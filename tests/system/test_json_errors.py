"""With --json a failing command still answers on stdout: one JSON object `{"error": <the line>, "exit_code": 2}`,
next to the usual `error:` line on stderr, so a script piping stdout into jq learns why there is no document."""

from __future__ import annotations

import json

import pytest

from tests.helpers import one_line_error, run_cli


@pytest.mark.parametrize("args", [
    ("query", "--json", "SELECT * FROM nope.t"),
    ("status", "--json", "--config", "/nonexistent.yaml"),  # fails while the options are parsed, after --json
    ("status", "--config", "/nonexistent.yaml", "--json"),  # ... and before it
    ("evaluate", "sts", "--encoder", "minilm", "--file", "/nonexistent.tsv", "--json"),
])
def test_a_failure_with_json_prints_the_error_as_json(tmp_path, args):
    proc = run_cli(tmp_path, *args)
    line = one_line_error(proc)
    assert json.loads(proc.stdout) == {"error": line.removeprefix("error: "), "exit_code": 2}


def test_without_json_stdout_stays_empty(tmp_path):
    proc = run_cli(tmp_path, "query", "SELECT * FROM nope.t")
    one_line_error(proc)
    assert proc.stdout == ""
