"""The one-call GPU device check runs with torch and transformers alone: in a fresh process where the warehouse
stack (polars, deltalake, duckdb, pyarrow, prefect), amrsim's warehouse and its compiled graph reader cannot be
imported, it runs every benchmark (tiny models, CPU, a stand-in free-memory figure) and writes one JSON."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT

BLOCKED = ("polars", "deltalake", "duckdb", "pyarrow", "prefect", "ray", "amrsim.warehouse",
           "amrsim.amr._penman_reader")

SCRIPT = f"""
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in {BLOCKED!r}):
            raise ImportError("blocked on the GPU machine: " + name)

sys.meta_path.insert(0, Block())
from amrsim.bench.check import main
main(sys.argv[1:])
blocked = sorted(m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in {BLOCKED!r}))
assert not blocked, blocked
"""


def test_device_check_runs_with_torch_and_transformers_alone(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, "--device", "cpu", "--tiny", "--sentences", "6",
                           "--free-memory-gib", "0.001", "--out", str(out)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                                                       "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    runs = {r["run"]: r for r in result["runs"]}
    assert len(runs) == 7 and all("error" not in r and r["sentences_per_s"] > 0 for r in runs.values()), runs
    fixed, budget = runs["translate, fixed batch (earlier default)"], runs["translate, token budget (default)"]
    assert fixed["batch_budget"] is None and fixed["batch_size"] == 64
    assert budget["batch_budget"] > 0 and "GiB free" in budget["budget"] and budget["batches"] > 1
    assert runs["parse, fp32, fixed batch (earlier default)"]["dtype"] == "float32"
    parse_default = runs["parse, bf16, token budget (default)"]
    assert parse_default["dtype"] == "bfloat16" and parse_default["batch_budget"] > 0
    assert runs["translate, token budget, static cache"]["cache_implementation"] == "static"
    assert result["device_name"] == "cpu" and result["tiny"] is True
