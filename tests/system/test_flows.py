"""Prefect wiring end to end: the demo flow on the bundled sample, reruns, bad input at the CLI, retries, Ray."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import polars as pl
import pytest

from amrsim.config import RayConfig
from amrsim.warehouse import Warehouse
from tests.forked import amrsim_cli
from tests.helpers import ROOT, cli_env


def _amrsim(tmp_path, *args: str, own_server: bool = False) -> subprocess.CompletedProcess[str]:
    if own_server:  # a new process, as a user starts it
        return subprocess.run([sys.executable, "-m", "amrsim.cli", *args], capture_output=True, text=True,
                              cwd=tmp_path, env=cli_env(tmp_path, own_server), timeout=900)
    return amrsim_cli(*args, cwd=tmp_path, env=cli_env(tmp_path), timeout=900)


@pytest.fixture
def demo_config(tmp_path):
    text = (ROOT / "pipelines.yaml").read_text()
    (tmp_path / "pipelines.yaml").write_text(text.replace("warehouse: warehouse", "warehouse: wh")
                                             .replace("run_dir: .amrsim", "run_dir: run"))
    return tmp_path / "pipelines.yaml"


@pytest.mark.slow
def test_demo_flow_end_to_end_then_a_rerun_computes_nothing(tmp_path, demo_config):
    first = _amrsim(tmp_path, "run", own_server=True)  # as a user's first `make run`: its own temporary server
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    wh = Warehouse(tmp_path / "wh")
    pairs = wh.read("sample_sts", "pairs")
    assert pairs.height == 600 and set(pairs["status"]) == {"ok"}  # 150 pairs x en/de/es/fr
    assert set(pairs["lang1"]) == {"en", "de", "es", "fr"}
    assert wh.read("sample_sts", "parallel").height == 900  # 150 x 2 sentences x 3 languages
    assert wh.read("sample_nli", "triples").height == 120
    amr = wh.read("sample_sts", "amr")  # ud parser: en and fr directly, de and es through the provided English side
    assert amr.height == 1200 and set(amr["status"]) == {"ok"} and set(amr["parser"]) == {"ud"}
    assert dict(amr.group_by("lang").agg(pl.col("pivot_lang").unique()).iter_rows()) == {
        "en": [None], "fr": [None], "de": ["en"], "es": ["en"]}
    assert amr["linearized"].str.starts_with("( ").all()
    n_sentences = wh.read("sample_sts", "sentences").height
    embeddings = wh.read("sample_sts", "embeddings")
    assert embeddings.height == 2 * n_sentences
    assert dict(embeddings.group_by("encoder").agg(pl.col("dim").first()).iter_rows()) == {"minilm": 384,
                                                                                           "muse": 512}
    results = wh.read("eval", "results")
    assert results.height == 2 * 2 * 7  # encoders x metrics x language pairs on the test split
    assert set(results["split"]) == {"test"} and set(results["n"]) == {30}
    assert "STS (x100)" in first.stdout and "Run " in first.stdout
    silver = wh.read("sample_sts", "augmented_pairs")
    gold = set(zip(pairs["sentence1_key"], pairs["sentence2_key"], strict=True))
    assert silver.height > 0 and set(silver["status"]) == {"ok"} and set(silver["scorer"]) == {"cosine:minilm"}
    assert not {(a, b) for a, b in zip(silver["sentence1_key"], silver["sentence2_key"], strict=True)} & gold
    assert not {(b, a) for a, b in zip(silver["sentence1_key"], silver["sentence2_key"], strict=True)} & gold
    report = tmp_path / "wh" / "reports" / "report.html"
    assert f"report: {report}" in first.stdout.replace("\n", "")
    html = report.read_text()
    assert "Leaderboard" in html and "STS sample_sts (cross, 3 pairs)" in html and html.count("data:image/png") >= 2
    assert (tmp_path / "run" / "prefect").is_dir(), "Prefect state lives under the run dir"
    # the rows docs/benchmarks.md says a first `make run` computes are what it computes
    computed = re.search(r"(\d+) rows computed", first.stdout.replace("\n", " "))
    quoted = re.search(r"\| cold: [^|]*\| [\d.]+ \| (\d+) \|", (ROOT / "docs" / "benchmarks.md").read_text())
    assert computed and quoted and int(quoted.group(1)) == int(computed.group(1)), (
        f"docs/benchmarks.md quotes {quoted and quoted.group(1)} rows, the demo computes "
        f"{computed and computed.group(1)}: rerun benchmarks/bench_demo_rerun.py and update the table")

    versions = {t: wh.version(*t) for t in wh.tables() if t[0] != "meta"}
    second = _amrsim(tmp_path, "run")  # the rerun's subject is what it computes, not its server
    assert second.returncode == 0, second.stderr[-3000:]
    assert "0 rows computed" in second.stdout
    assert {t: wh.version(*t) for t in wh.tables() if t[0] != "meta"} == versions
    lineage = wh.read("meta", "lineage")
    last = lineage.sort("started_at").tail(8)
    assert last["rows_computed"].to_list() == [0] * 8 and len(set(last["run_id"])) == 1

    status = _amrsim(tmp_path, "status")
    assert status.returncode == 0 and "sample_sts.embeddings" in status.stdout
    query = _amrsim(tmp_path, "query", "SELECT model, count(*) AS n FROM eval.results GROUP BY model ORDER BY 1")
    assert query.returncode == 0 and "minilm" in query.stdout and "muse" in query.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mutate, expected", [
    (lambda t: t.replace("batch_size: 64", "batch_size: lots"),
     "pipeline 'demo', key 'encode.batch_size', value 'lots'"),
    (lambda t: t.replace("path: sample:nli_triples.tsv", "path: missing.tsv"),
     "pipeline 'demo', key 'datasets.sample_nli.path', value 'missing.tsv': file not found"),
    (lambda t: t.replace("pipelines:\n", "pipelines: [\n", 1), "malformed YAML"),
])
def test_run_rejects_bad_config_before_any_work(tmp_path, demo_config, mutate, expected):
    demo_config.write_text(mutate(demo_config.read_text()))
    proc = _amrsim(tmp_path, "run")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and str(demo_config) in lines[0], proc.stderr
    assert not (tmp_path / "wh").exists()


@pytest.mark.slow
def test_run_with_a_broken_input_file_writes_nothing(tmp_path, demo_config):
    bad = tmp_path / "broken.tsv"
    shutil.copy(ROOT / "amrsim" / "sample" / "nli_triples.tsv", bad)
    with bad.open("a", encoding="utf-8") as f:
        f.write("t999\ttest\tonly three\tfields\n")
    demo_config.write_text(demo_config.read_text().replace("path: sample:nli_triples.tsv", f"path: {bad}"))
    proc = _amrsim(tmp_path, "run")
    assert proc.returncode == 2
    assert f"{bad}:122: expected 5 fields" in proc.stderr.strip().splitlines()[-1]
    wh = Warehouse(tmp_path / "wh")
    assert not wh.exists("sample_nli", "triples")


RETRY_SCRIPT = """
import json, sys
from prefect import flow, task
from amrsim.errors import InputError
from tasks.common import TASK_OPTIONS

calls = {"flaky": 0, "bad": 0}

@task(**(TASK_OPTIONS | {"retry_delay_seconds": 0}))
def flaky():
    calls["flaky"] += 1
    if calls["flaky"] < 3:
        raise OSError("disk hiccup")
    return "done"

@task(**(TASK_OPTIONS | {"retry_delay_seconds": 0}))
def bad_input():
    calls["bad"] += 1
    raise InputError("x.tsv", "expected 3 fields, found 2", 7)

@flow
def f():
    out = flaky()
    state = bad_input(return_state=True)
    return out, str(state.type)

print(json.dumps({"result": f(), "calls": calls}))
"""


@pytest.mark.slow
def test_tasks_retry_transient_errors_but_not_bad_input(tmp_path):
    script = tmp_path / "retry.py"
    script.write_text(textwrap.dedent(RETRY_SCRIPT))
    env = cli_env(tmp_path) | {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "ERROR"}
    (tmp_path / "run" / "prefect").mkdir(parents=True)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["result"] == ["done", "StateType.FAILED"]
    assert out["calls"] == {"flaky": 3, "bad": 1}


def _double(batch: pl.DataFrame) -> pl.DataFrame:
    return batch.with_columns((pl.col("x") * 2).alias("y"))


def test_map_batches_in_process_keeps_order(tmp_path):
    from tasks.ray_map import map_batches

    frame = pl.DataFrame({"x": list(range(1000))})
    out = map_batches(_double, frame, RayConfig(), tmp_path, batch_size=64)
    assert out["y"].to_list() == [2 * i for i in range(1000)]


@pytest.mark.slow
def test_map_batches_on_gpu_actors_keeps_order(tmp_path):
    """Two (declared) GPUs: batches go to two long-lived actors, in order; mechanics only, no CUDA needed."""
    pytest.importorskip("ray")
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        import polars as pl, ray
        from amrsim.config import RayConfig
        from tasks.ray_map import map_batches
        from tests.system.test_flows import _double_with_pid
        frame = pl.DataFrame({"x": list(range(2000))})
        cfg = RayConfig(enabled=True, num_cpus=2, num_gpus=2)
        out = map_batches(_double_with_pid, frame, cfg, Path(sys.argv[1]), batch_size=100, gpu_actors=True)
        assert out["y"].to_list() == [2 * i for i in range(2000)], "order or values differ"
        assert out["pid"].n_unique() == 2, out["pid"].unique().to_list()
        assert set(out["gpus"].unique().to_list()) == {"0", "1"}, out["gpus"].unique().to_list()
        print("actors ok")
        ray.shutdown()
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, env=cli_env(tmp_path), timeout=300)
    assert proc.returncode == 0 and "actors ok" in proc.stdout, proc.stderr[-3000:]


def _double_with_pid(frame: pl.DataFrame) -> pl.DataFrame:

    return frame.with_columns(y=pl.col("x") * 2, pid=pl.lit(os.getpid()),
                              gpus=pl.lit(os.environ.get("CUDA_VISIBLE_DEVICES", "")))


@pytest.mark.slow
def test_map_batches_on_local_ray_matches_in_process(tmp_path):
    pytest.importorskip("ray")
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        import polars as pl, ray
        from amrsim.config import RayConfig
        from tasks.ray_map import map_batches
        from tests.system.test_flows import _double
        frame = pl.DataFrame({"x": list(range(5000))})
        out = map_batches(_double, frame, RayConfig(enabled=True, num_cpus=2), Path(sys.argv[1]), batch_size=500)
        assert ray.is_initialized() and ray.cluster_resources().get("CPU") == 2.0
        assert out["y"].to_list() == [2 * i for i in range(5000)], "order or values differ"
        print("ray ok", out.height)
        ray.shutdown()
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, env=cli_env(tmp_path), timeout=300)
    assert proc.returncode == 0 and "ray ok 5000" in proc.stdout, proc.stderr[-3000:]
