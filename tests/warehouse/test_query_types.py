"""`amrsim query` answers whatever the tables' files and the SQL's types are: a table rewritten by a merge holds
`string_view` files next to `string` ones, and a filter must still work on both; a result column polars cannot hold
(interval, union, bit string, big number, a repeated name) comes back as text instead of a traceback."""

from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from amrsim.warehouse.query import query
from tests.helpers import run_cli


def _rows(keys: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"key": keys, "lang": ["en"] * len(keys), "text": [f"t{k}" for k in keys],
                         "status": ["ok"] * len(keys), "error": [None] * len(keys)},
                        schema_overrides={"error": pl.String})


@pytest.fixture
def rewritten(wh):
    """A sentences table as an edited input leaves it: written, synced to new keys (a merge), then appended."""
    wh.append("d", "sentences", _rows(["a", "b", "c"]))
    wh.sync("d", "sentences", _rows(["a", "b", "x"]))  # 'c' edited to 'x': the merge rewrites the file
    wh.append("d", "sentences", _rows(["y"]))
    files = [pq.read_schema(uri.removeprefix("file://")).field("text").type
             for uri in wh.snapshot("d", "sentences").file_uris()]
    assert {str(t) for t in files} == {"string", "string_view"}, files  # the case this file guards
    return wh


@pytest.mark.parametrize(("where", "keys"), [
    ("text = 'tx'", ["x"]), ("text = 'ty'", ["y"]), ("text IN ('ta', 'tx', 'ty')", ["a", "x", "y"]),
    ("text >= 'tx'", ["x", "y"]), ("text LIKE 't%' AND key <> 'b'", ["a", "x", "y"]), ("error IS NULL", None),
])
def test_filters_work_on_a_table_rewritten_after_an_input_edit(rewritten, where, keys):
    found = query(rewritten, f"SELECT key FROM d.sentences WHERE {where} ORDER BY key")["key"].to_list()
    assert found == (keys if keys is not None else ["a", "b", "x", "y"])


def test_cli_filter_on_a_rewritten_table(rewritten, tmp_path):
    config = tmp_path / "pipelines.yaml"
    config.write_text(yaml.safe_dump({"warehouse": str(rewritten.root), "pipelines": {}}))
    proc = run_cli(tmp_path, "query", "--json", "-c", str(config), "SELECT key FROM d.sentences WHERE text = 'tx'")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["rows"] == [{"key": "x"}]


def test_types_polars_cannot_hold_come_back_as_text(wh):
    frame = query(wh, "SELECT INTERVAL 1 DAY AS i, union_value(k := 1) AS u, '101'::BIT AS b, "
                      "[INTERVAL 2 HOUR] AS li, MAP {1: INTERVAL 1 DAY} AS m, 1::VARINT AS v, "
                      "{'interval': 1} AS s, 1 AS a, 2 AS a")
    assert frame.columns == ["i", "u", "b", "li", "m", "v", "s", "a", "a_1"]
    assert frame.row(0) == ("1 day", "1", "101", "['02:00:00']", "{1=1 day}", "1", {"interval": 1}, 1, 2)


@pytest.mark.parametrize("sql", ["SELECT INTERVAL 1 DAY AS i", "SELECT union_value(k := 1) AS u"])
def test_cli_prints_an_interval_or_union(tmp_path, sql):
    table = run_cli(tmp_path, "query", sql)
    assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr[-2000:]
    assert "1 day" in table.stdout or "│ 1 │" in table.stdout, table.stdout
    document = run_cli(tmp_path, "query", "--json", sql)
    assert document.returncode == 0, document.stderr[-2000:]
    assert list(json.loads(document.stdout)["rows"][0].values()) in (["1 day"], ["1"])
