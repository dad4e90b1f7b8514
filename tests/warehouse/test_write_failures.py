"""A file system that refuses a Delta write (disk full, file too large): one line naming the table, no commit.

deltalake reports the operating system's error inside its own text ('... (os error 27)') after a panic of its
object store's writer thread; the warehouse turns it into a WarehouseError. EFBIG for real: the child process may
write no file larger than the limit (RLIMIT_FSIZE, SIGXFSZ ignored), as a full disk would refuse the write."""

import json
import subprocess
import sys

import pytest

CHILD = r"""
import json, os, resource, signal, sys
import pyarrow as pa
from amrsim.errors import WarehouseError
from amrsim.warehouse.store import Warehouse

wh = Warehouse(sys.argv[1])
wh.upsert("d", "scratch", pa.table({"key": ["k0"], "text": ["first"]}))
before = wh.version("d", "scratch")
big = pa.table({"key": [f"k{i}" for i in range(1, 20001)], "text": [os.urandom(16).hex() for _ in range(20000)]})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
out = {}
for name, write in (("merge", lambda: wh.upsert("d", "scratch", big)),
                    ("first commit", lambda: wh.upsert("d", "fresh", big)),
                    ("append", lambda: wh.append("d", "scratch", big))):
    try:
        write()
        out[name] = None
    except WarehouseError as e:
        out[name] = str(e)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
out["versions"] = [before, wh.version("d", "scratch")]
out["rows"] = wh.read("d", "scratch").height
out["fresh exists"] = wh.exists("d", "fresh")
print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_write_the_file_system_refuses_is_one_line_and_commits_nothing(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "wh")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("merge", "first commit", "append"):
        table = "fresh" if name == "first commit" else "scratch"
        assert out[name] is not None, f"{name}: the write past the limit succeeded"
        assert out[name].startswith(f"table 'd/{table}': cannot write (File too large)"), out[name]
        assert "\n" not in out[name]
    assert out["versions"][0] == out["versions"][1]  # no commit became visible
    assert out["rows"] == 1
    assert out["fresh exists"] is False
