"""warehouse/README.md's recipe for plain DuckDB and Polars: run as written (code blocks taken from the page) on a table
whose directory still holds the Parquet files of replaced and deleted rows, it reads the current version only, while
the Parquet glob the page warns against reads more."""

from __future__ import annotations

import re

import duckdb
import polars as pl
import pytest

from amrsim.warehouse import Warehouse, content_key
from tests.helpers import ROOT

README = ROOT / "warehouse" / "README.md"
SECTION = "### Reading the tables with plain DuckDB or Polars"
DOC_TABLE = "warehouse/sample_sts/sentences"  # the table the recipe reads, swapped for the test's


def recipe_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    assert SECTION in text, f"{README} lost its section {SECTION!r}"
    section = re.split(r"\n#{2,3} ", text.split(SECTION, 1)[1])[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "expected a DuckDB and a Polars block"
    return blocks


def run_block(code: str, table_path: str) -> dict:
    assert f'"{DOC_TABLE}"' in code, "the recipe no longer reads the table this test provides"
    namespace: dict = {}
    exec(compile(code.replace(f'"{DOC_TABLE}"', repr(table_path)), str(README), "exec"), namespace)
    return namespace


def sentence_rows(texts: list[tuple[str, str]], status: str = "ok") -> pl.DataFrame:
    return pl.DataFrame({"key": [content_key("sentence", lang, t) for lang, t in texts],
                         "lang": [lang for lang, _ in texts], "text": [t for _, t in texts],
                         "status": [status] * len(texts), "error": [None if status == "ok" else "bad"] * len(texts)},
                        schema_overrides={"error": pl.String})


@pytest.fixture
def churned_table(tmp_path) -> tuple[Warehouse, str]:
    """sample_sts/sentences after an append, a retry that replaces failed rows and a delete: four versions."""
    wh = Warehouse(tmp_path / "warehouse")
    ok = [("en", "a dog runs"), ("en", "a cat sleeps"), ("de", "ein Hund rennt"), ("de", "eine Katze schläft")]
    failed = [("de", "ein Vogel singt"), ("fr", "un chien court")]
    wh.append("sample_sts", "sentences", sentence_rows(ok))
    wh.append("sample_sts", "sentences", sentence_rows(failed, status="failed"))
    wh.upsert("sample_sts", "sentences", sentence_rows(failed))  # the retry: same keys, now ok
    wh.delete_keys("sample_sts", "sentences", [content_key("sentence", "en", "a cat sleeps")])
    return wh, str(wh.table_path("sample_sts", "sentences"))


def test_duckdb_recipe_reads_the_current_version_and_a_glob_does_not(churned_table):
    wh, path = churned_table
    current = wh.read("sample_sts", "sentences")
    assert current.height == 5 and set(current["status"]) == {"ok"}

    duck, _ = recipe_blocks()
    ns = run_block(duck, path)
    expected = sorted(current.group_by("lang").len().iter_rows())
    assert ns["per_language"].fetchall() == expected == [("de", 3), ("en", 1), ("fr", 1)]
    registered = ns["con"].sql("SELECT key, status FROM sentences").fetchall()
    assert sorted(registered) == sorted(current.select("key", "status").iter_rows())

    # the warning: the directory's Parquet files hold replaced and deleted rows too
    globbed = duckdb.sql(f"SELECT key, status FROM read_parquet('{path}/*.parquet')").fetchall()
    assert len(globbed) > current.height
    assert content_key("sentence", "en", "a cat sleeps") in {k for k, _ in globbed}  # deleted, still globbed
    assert "failed" in {s for _, s in globbed}  # the replaced attempts, still globbed


def test_polars_recipe_reads_the_current_version_and_a_glob_does_not(churned_table):
    wh, path = churned_table
    current = wh.read("sample_sts", "sentences")

    _, polars_block = recipe_blocks()
    ns = run_block(polars_block, path)
    assert sorted(ns["sentences"]["key"].to_list()) == sorted(current["key"].to_list())
    german = current.filter(pl.col("lang") == "de")
    assert ns["german"].height == german.height == 3
    assert sorted(ns["german"]["text"].to_list()) == sorted(german["text"].to_list())

    assert pl.scan_parquet(f"{path}/*.parquet").collect().height > current.height
