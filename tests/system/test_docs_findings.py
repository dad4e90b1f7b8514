"""What a newcomer following README.md and docs/ saw, each pinned: `amrsim query` printing `round(value, 2)` with
four decimals, `amrsim status` with an empty `table` column, and a rerun announcing `0/1200 rows (0%)` for work
that was already done. (The docs' own checks, links, blocks, quoting, pasted YAML, are in test_docs.py.)"""

from __future__ import annotations

import io

import numpy as np
import polars as pl
import pytest

from amrsim.console import frame_table, progress_bar, shortest_decimals
from tests.helpers import run_cli


def test_a_users_rounding_is_kept_and_unrounded_values_get_four_decimals():
    frame = pl.DataFrame({"v": [22.54, -2.01, 27.3], "w": [22.5411, -2.00761234, 1.0], "n": [1, 2, 3]})
    table = frame_table(frame, "t", float_digits=4, as_rounded=True)
    cells = [list(col.cells) for col in table.columns]
    assert cells[0] == ["22.54", "-2.01", "27.30"]  # one column, one number of decimals: the most it needs
    assert cells[1] == ["22.5411", "-2.0076", "1.0000"]
    assert cells[2] == ["1", "2", "3"]
    assert shortest_decimals([1e-9], 4) == 4 and shortest_decimals([float("nan"), None, 3.0], 4) == 0


@pytest.mark.slow  # a subprocess
def test_query_prints_round_value_2_with_two_decimals(tmp_path):
    proc = run_cli(tmp_path, "query", "SELECT round(22.5411::DOUBLE, 2) AS v, 22.5411::DOUBLE AS raw")
    assert proc.returncode == 0, proc.stderr
    assert "22.54 " in proc.stdout and "22.5400" not in proc.stdout, proc.stdout
    assert "22.5411" in proc.stdout


@pytest.mark.slow  # a subprocess
def test_status_says_what_each_stage_run_wrote(tmp_path):
    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.lineage import StageRun, record_stage

    wh = Warehouse(tmp_path / "warehouse")
    wh.append("ds", "notes", pl.DataFrame({"key": ["k"], "status": ["ok"]}))
    with record_stage(wh, StageRun(run_id="r1", pipeline="p", stage="ingest", dataset="ds", config_hash="h")) as run:
        run.wrote("notes")
    with record_stage(wh, StageRun(run_id="r2", pipeline="p", stage="ingest", dataset="ds", config_hash="h")):
        pass  # a rerun: nothing new
    with record_stage(wh, StageRun(run_id="r3", pipeline="p", stage="train:s3bert", dataset="models",
                                   config_hash="h")):
        pass
    (tmp_path / "pipelines.yaml").write_text("pipelines:\n  p:\n    datasets: {}\n", encoding="utf-8")
    proc = run_cli(tmp_path, "status")
    assert proc.returncode == 0, proc.stderr
    runs = proc.stdout[proc.stdout.index("Last stage runs"):]
    rows = {line.split("│")[2].strip(): line.split("│")[5].strip() for line in runs.splitlines()
            if line.startswith("│")}
    assert rows == {"r1": "notes", "r2": "(unchanged)", "r3": "s3bert/r3"}, runs


def test_a_rerun_says_the_rows_are_already_computed():
    out = io.StringIO()
    with progress_bar(1200, "encode sample_sts with minilm", stream=out) as advance:
        advance.plan(0, 1200)
    assert out.getvalue() == "encode sample_sts with minilm: 1200 rows already computed\n"

    out = io.StringIO()
    with progress_bar(1200, "encode d with e", stream=out) as advance:
        advance.plan(600, 600)
        advance(600)
    assert out.getvalue().startswith("encode d with e: 600/600 rows (600 already computed) (100%), ")


def test_embedding_tells_its_plan_before_it_starts(wh):
    from amrsim.encoders.cache import embed_sentences

    class Fake:
        def encode(self, texts):
            return np.ones((len(texts), 4), dtype=np.float32)

    sentences = pl.DataFrame({"key": ["a", "b", "c"], "text": ["x", "y", "z"]})
    plans: list[tuple[int, int]] = []
    for _ in range(2):
        embed_sentences(wh, "ds", "minilm", sentences, encoder=Fake(), on_plan=lambda t, a: plans.append((t, a)))
    assert plans == [(3, 0), (0, 3)]
