"""`amrsim query` runs analysts' SQL in a sandbox: the warehouse tables are views, DuckDB's file system access is off
and its configuration locked, so SQL cannot write files (a table's own `_delta_log` included), read arbitrary files,
attach databases, list directories or turn the sandbox off; `--allow-external` is the explicit opt-out. `--limit`
runs inside DuckDB, so a large result is never materialised."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from amrsim.warehouse.query import connect, query
from tests.helpers import one_line_error, run_cli


def _rows(keys: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"key": keys, "lang": ["en"] * len(keys), "text": keys, "status": ["ok"] * len(keys),
                         "error": [None] * len(keys)}, schema_overrides={"error": pl.String})


@pytest.fixture
def filled(wh):
    wh.append("d", "sentences", _rows(["a", "b", "c"]))
    return wh


def _escapes(wh, tmp_path) -> dict[str, str]:
    """SQL that reaches outside the warehouse views, by what it tries."""
    table = wh.table_path("d", "sentences")
    log = sorted((table / "_delta_log").glob("*.json"))[-1]
    outside = tmp_path / "outside.csv"
    outside.write_text("secret\n42\n")
    parquet = sorted(table.glob("*.parquet"))[0]
    return {
        "COPY TO a file": f"COPY (SELECT 1 AS x) TO '{tmp_path / 'out.csv'}'",
        "COPY TO the table's own log": f"COPY (SELECT 'x' AS key) TO '{log}' (FORMAT json)",
        "read_csv on any file": f"SELECT * FROM read_csv('{outside}')",
        "read_text /etc/passwd": "SELECT * FROM read_text('/etc/passwd')",
        "a file named in FROM": f"SELECT * FROM '{outside}'",
        "read_parquet on the table's files": f"SELECT * FROM read_parquet('{parquet}')",
        "ATTACH": f"ATTACH '{tmp_path / 'other.duckdb'}' AS other",
        "glob": f"SELECT * FROM glob('{tmp_path}/**')",
        "INSTALL an extension": "INSTALL httpfs",
        "LOAD an extension": "LOAD httpfs",
        "EXPORT DATABASE": f"EXPORT DATABASE '{tmp_path / 'export'}'",
        "turning access back on": "SET enable_external_access = true",
        "resetting it": "RESET enable_external_access",
        "unlocking the configuration": "SET lock_configuration = false",
    }


def test_views_read_the_warehouse_after_the_lock(filled):
    con = connect(filled)
    assert con.execute("SELECT current_setting('enable_external_access'), current_setting('lock_configuration')"
                       ).fetchall() == [(False, True)]
    assert sorted(r[0] for r in con.execute("SELECT text FROM d.sentences").fetchall()) == ["a", "b", "c"]
    assert query(filled, "SELECT count(*) AS n FROM d.sentences")["n"].to_list() == [3]


def test_sql_cannot_reach_outside_the_views(filled, tmp_path):
    table = filled.table_path("d", "sentences")
    logs = {p: p.read_bytes() for p in (table / "_delta_log").glob("*.json")}
    con = connect(filled)
    for what, sql in _escapes(filled, tmp_path).items():
        with pytest.raises(duckdb.Error):
            con.execute(sql).fetchall()
            pytest.fail(f"{what} was allowed: {sql}")
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "other.duckdb").exists()
    assert not (tmp_path / "export").exists()
    assert {p: p.read_bytes() for p in (table / "_delta_log").glob("*.json")} == logs
    assert con.execute("SELECT count(*) FROM d.sentences").fetchall() == [(3,)]  # still answering after the refusals


def test_the_python_scope_is_not_readable(filled):
    hidden = pl.DataFrame({"x": [1]})  # noqa: F841 - DuckDB's replacement scan would find it by name
    with pytest.raises(duckdb.Error):
        connect(filled).execute("SELECT * FROM hidden").fetchall()


def test_the_opt_out_enables_file_functions(filled, tmp_path):
    (tmp_path / "mine.csv").write_text("v\n7\n")
    frame = query(filled, f"SELECT v FROM read_csv('{tmp_path / 'mine.csv'}')", allow_external=True)
    assert frame["v"].to_list() == [7]
    with pytest.raises(duckdb.Error):
        query(filled, f"SELECT v FROM read_csv('{tmp_path / 'mine.csv'}')")


@pytest.mark.slow
def test_cli_refuses_each_escape_with_one_line(filled, tmp_path):
    escapes = _escapes(filled, tmp_path)
    for what in ("COPY TO a file", "COPY TO the table's own log", "read_csv on any file", "ATTACH", "glob"):
        line = one_line_error(run_cli(tmp_path, "query", escapes[what]))
        assert line.startswith("error: query failed: ") and "disabled" in line, (what, line)
    assert not (tmp_path / "out.csv").exists()
    ok = run_cli(tmp_path, "query", "SELECT count(*) AS n FROM d.sentences")
    assert ok.returncode == 0 and "│ 3 │" in ok.stdout, ok.stderr[-2000:]


@pytest.mark.slow
def test_cli_allow_external_opts_out(filled, tmp_path):
    (tmp_path / "mine.csv").write_text("v\n7\n")
    proc = run_cli(tmp_path, "query", "--allow-external", "SELECT v * 6 AS w FROM read_csv('mine.csv')")
    assert proc.returncode == 0 and "│ 42 │" in proc.stdout, proc.stderr[-2000:]


# a row past the first 100,000 raises: only a query that stops at the limit succeeds
PAST_THE_LIMIT = ("SELECT CASE WHEN i < 100000 THEN i ELSE error('read past the limit') END AS i "
                  "FROM range(100000000) t(i)")


def test_limit_runs_inside_duckdb(filled):
    with pytest.raises(duckdb.Error, match="read past the limit"):
        query(filled, PAST_THE_LIMIT)  # the reference: materialising the whole result fails
    assert query(filled, PAST_THE_LIMIT, limit=3)["i"].to_list() == [0, 1, 2]


@pytest.mark.slow
def test_cli_limit_shows_the_first_rows_without_materialising(filled, tmp_path):
    proc = run_cli(tmp_path, "query", "--limit", "3", PAST_THE_LIMIT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "│ 2 │" in proc.stdout and "│ 3 │" not in proc.stdout
    assert "the first 3 rows of more" in proc.stdout
    few = run_cli(tmp_path, "query", "--limit", "5", "SELECT text FROM d.sentences")
    assert few.returncode == 0 and "3 rows" in few.stdout and "of more" not in few.stdout, few.stderr[-2000:]
