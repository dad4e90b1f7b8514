"""One damaged table (log overwritten, data file deleted or truncated) is reported by name wherever it is read, and
never read as empty; `status` and `query` still serve the other tables."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path

import polars as pl
import pytest

from amrsim.warehouse import Warehouse
from amrsim.warehouse.query import query
from amrsim.warehouse.store import BrokenTable
from tests.helpers import cli_env


def _rows(keys: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"key": keys, "lang": ["en"] * len(keys), "text": keys, "status": ["ok"] * len(keys),
                         "error": [None] * len(keys)}, schema_overrides={"error": pl.String})


def _garbage_log(table: Path) -> None:
    (table / "_delta_log" / f"{0:020d}.json").write_text("garbage{\n")


def _json_over_last_commit(table: Path) -> None:
    """What `COPY (...) TO '<table>/_delta_log/<last>.json'` leaves: valid JSON, no Delta action."""
    last = sorted((table / "_delta_log").glob("*.json"))[-1]
    last.write_text('{"key": "x", "text": "y"}\n')


def _deleted_data_file(table: Path) -> None:
    sorted(table.glob("*.parquet"))[0].unlink()


def _truncated_data_file(table: Path) -> None:
    path = sorted(table.glob("*.parquet"))[-1]
    path.write_bytes(path.read_bytes()[:40])


DAMAGE = {"garbage log": _garbage_log, "JSON over the last commit": _json_over_last_commit,
          "deleted data file": _deleted_data_file, "truncated data file": _truncated_data_file}


def _two_tables(wh: Warehouse) -> None:
    wh.append("d", "sentences", _rows(["a", "b"]))
    wh.append("d", "sentences", _rows(["c"]))
    wh.append("d", "pairs_ok", pl.DataFrame({"key": ["p"], "n": [1]}))


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_table_is_named_and_never_read_as_empty(wh, damage):
    _two_tables(wh)
    DAMAGE[damage](wh.table_path("d", "sentences"))
    for read in (lambda: wh.read("d", "sentences"), lambda: wh.keys("d", "sentences"),
                 lambda: wh.version("d", "sentences"), lambda: wh.append("d", "sentences", _rows(["e"]))):
        with pytest.raises(BrokenTable) as broken:
            read()
        message = str(broken.value)
        assert message.startswith("table 'd/sentences' is unreadable: ") and "\n" not in message
    assert wh.read("d", "pairs_ok")["key"].to_list() == ["p"]  # the other table is untouched


def test_a_log_without_commits_is_an_absent_table(wh):
    (wh.table_path("d", "sentences") / "_delta_log").mkdir(parents=True)  # a first write killed before its commit
    assert not wh.exists("d", "sentences") and wh.read("d", "sentences").height == 0
    assert wh.append("d", "sentences", _rows(["a"])) == 1


def test_query_serves_healthy_tables_and_fails_naming_a_broken_one(wh):
    _two_tables(wh)
    _deleted_data_file(wh.table_path("d", "sentences"))
    assert query(wh, "SELECT n FROM d.pairs_ok")["n"].to_list() == [1]
    for sql in ("SELECT * FROM d.sentences", "SELECT count(*) FROM d.sentences", "SELECT 1 FROM d.sentences",
                "SELECT text FROM d.sentences JOIN d.pairs_ok USING (key)"):
        with pytest.raises(Exception, match=r"table 'd/sentences' is unreadable: data file .* is missing"):
            query(wh, sql)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "pipelines.yaml"
    config.write_text("warehouse: warehouse\npipelines: {demo: {}}\n")
    return subprocess.run([sys.executable, "-m", "amrsim.cli", *args, "--config", str(config)], capture_output=True,
                          text=True, cwd=tmp_path, env={**cli_env(tmp_path), "COLUMNS": "200"}, timeout=300)


@pytest.mark.slow
def test_status_and_query_commands_name_the_broken_table_and_serve_the_others(tmp_path, wh):
    _two_tables(wh)
    _garbage_log(wh.table_path("d", "sentences"))
    status = _cli(tmp_path, "status")
    assert status.returncode == 0, status.stderr[-2000:]
    assert "broken: table 'd/sentences' is unreadable: " in status.stdout
    pairs_row = next(line for line in status.stdout.splitlines() if "d.pairs_ok" in line)
    assert pairs_row.replace("│", " ").split()[1:4] == ["0", "1", "0"]  # version, rows, failed
    assert "Traceback" not in status.stderr

    healthy = _cli(tmp_path, "query", "SELECT n FROM d.pairs_ok")
    assert healthy.returncode == 0 and "│ 1 │" in healthy.stdout, healthy.stderr[-2000:]
    broken = _cli(tmp_path, "query", "SELECT * FROM d.sentences")
    lines = broken.stderr.strip().splitlines()
    assert broken.returncode == 2 and len(lines) == 1 and "table 'd/sentences' is unreadable" in lines[0], \
        broken.stderr[-2000:]


def test_a_stage_reading_a_broken_table_fails_naming_it(tmp_path):
    from amrsim.config import load_config
    from amrsim.metrics.engine import score_pairs
    from amrsim.stages import metrics_stage
    from amrsim.stages.ingest import ingest_stage
    from amrsim.synthetic import pipeline_yaml, write_pairs

    write_pairs(tmp_path / "pairs.tsv", 0, 20)
    (tmp_path / "pipelines.yaml").write_text(pipeline_yaml(tmp_path / "pairs.tsv"))
    cfg = load_config(tmp_path / "pipelines.yaml")
    wh = Warehouse(cfg.warehouse_root)
    ingest_stage(cfg.section("load"), "synthetic", "r1")
    _deleted_data_file(wh.table_path("synthetic", "amr"))
    options = cfg.project.pipelines["load"].metrics.options()  # type: ignore[union-attr]
    with pytest.raises(BrokenTable, match="table 'synthetic/amr' is unreadable"):
        metrics_stage(wh, "load", "synthetic", options, "r2", partial(score_pairs, options=options))
    assert not wh.exists("synthetic", "amr_metrics")  # nothing computed from a table read as empty
    lineage = wh.read("meta", "lineage").filter(pl.col("stage") == "metrics")
    assert lineage["status"].to_list() == ["error"] and "synthetic/amr" in lineage["error"][0]
