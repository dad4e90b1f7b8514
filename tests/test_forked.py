"""The forked "fresh process" the outside-amrsim loading tests use behaves as `python -c` would: exit codes,
output, errors, arguments, directory and environment come through, and no amrsim module is in it."""

from __future__ import annotations

import pytest

from tests.forked import fresh_python

pytestmark = pytest.mark.slow

SCRIPT = """
import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": os.environ.get("AMRSIM_PROBE"),
                  "amrsim": [m for m in sys.modules if m.split(".")[0] == "amrsim"],
                  "st": "sentence_transformers" in sys.modules}))
"""


def test_a_script_sees_its_arguments_directory_and_environment_and_no_amrsim(tmp_path):
    import json

    done = fresh_python(SCRIPT, "a", "b c", cwd=tmp_path, AMRSIM_PROBE="yes")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"argv": ["a", "b c"], "cwd": str(tmp_path), "env": "yes", "amrsim": [], "st": True}


def test_a_failing_script_gives_its_exit_code_and_traceback(tmp_path):
    raised = fresh_python("raise ValueError('no model here')", cwd=tmp_path)
    assert raised.returncode == 1 and "ValueError: no model here" in raised.stderr
    assert fresh_python("import sys; sys.exit(3)", cwd=tmp_path).returncode == 3
    # the forking process survives its children's failures
    assert fresh_python("print('after')", cwd=tmp_path).stdout == "after\n"
