"""Warehouse contract: content keys, upsert/sync, atomic commits under SIGKILL, lineage, DuckDB views."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import polars as pl
import pytest

from amrsim.errors import WarehouseError
from amrsim.warehouse import content_key
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.query import query
from tests.helpers import ROOT


def sentences(n: int, start: int = 0, status: str = "ok") -> pl.DataFrame:
    texts = [f"sentence {i}" for i in range(start, start + n)]
    return pl.DataFrame({"key": [content_key("sentence", "en", t) for t in texts], "lang": ["en"] * n,
                         "text": texts, "status": [status] * n, "error": [None] * n},
                        schema_overrides={"error": pl.String})


def test_content_keys_are_stable_and_distinguish_inputs():
    assert content_key("a", 1, {"x": [1, 2]}) == content_key("a", 1, {"x": [1, 2]})
    assert content_key("ab", "c") != content_key("a", "bc")  # parts never run together
    assert content_key("a", 1) != content_key("a", "1")
    assert len(content_key("x")) == 32


def test_content_keys_of_strings_are_the_json_encoding():
    """Strings take a shortcut in the encoding; the keys stay sha256 over each part's json.dumps."""
    import hashlib
    import json

    from amrsim.warehouse.keys import content_keys

    texts = ['(a / "q\\"uote")', "é\u2028\x00\x1f\t中", "", "plain"]
    expected = []
    for t in texts:
        h = hashlib.sha256()
        for part in ("amr_metrics", t, {"seed": 0, "b": [1]}):
            h.update(json.dumps(part, sort_keys=True, ensure_ascii=False, default=str).encode() + b"\x1f")
        expected.append(h.hexdigest()[:32])
    assert content_keys([(t,) for t in texts], prefix=("amr_metrics",), suffix=({"seed": 0, "b": [1]},)) == expected
    assert [content_key("amr_metrics", t, {"seed": 0, "b": [1]}) for t in texts] == expected


def test_text_keys_hashed_in_c_are_content_keys(monkeypatch):
    """text_keys (the C loop over columns of strings) gives content_keys' keys for every character class JSON
    escapes or keeps, non-ASCII included; a cell it cannot take (not a str, a lone surrogate) goes the Python way,
    which gives the same keys or the same error."""
    import random

    from amrsim.warehouse import keys

    assert keys._keys is not None, "the C extension is built in place for the tests"
    rng = random.Random(7)
    alphabet = [chr(c) for c in range(0, 0x80)] + ["é", "中", "\u2028", "\U0001f600", "\x7f", "\u0085"]
    texts = ["", "plain", '(a / "q\\"uote")', "é\u2028\x00\x1f\t中", "\b\f\n\r\\"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))) for _ in range(300)]
    other = texts[1:] + texts[:1]
    prefix, suffix = ("amr_metrics",), ({"seed": 0, "b": [1]}, "x")
    expected = keys.content_keys(zip(texts, other, strict=True), prefix=prefix, suffix=suffix)
    assert keys.text_keys((texts, other), prefix=prefix, suffix=suffix) == expected
    assert keys.text_keys((tuple(texts), other), prefix=prefix, suffix=suffix) == expected  # any sequence
    assert keys.text_keys(([], []), prefix=prefix) == []
    assert keys.text_keys((["a", 1],), prefix=prefix) == keys.content_keys([("a",), (1,)], prefix=prefix)
    with pytest.raises(UnicodeEncodeError):
        keys.text_keys((["a", "b\ud800"],))
    monkeypatch.setattr(keys, "_keys", None)  # built without OpenSSL's headers
    assert keys.text_keys((texts, other), prefix=prefix, suffix=suffix) == expected


def test_upsert_inserts_new_keys_and_replaces_failed_rows(wh):
    assert wh.upsert("d", "sentences", sentences(3)) == 3
    assert wh.version("d", "sentences") == 0
    failed = sentences(2, start=3, status="failed")
    wh.upsert("d", "sentences", failed)
    assert wh.keys("d", "sentences") == set(sentences(3)["key"])  # failed keys are not "done"
    wh.upsert("d", "sentences", sentences(2, start=3))  # the retry replaces them
    table = wh.read("d", "sentences")
    assert table.height == 5 and set(table["status"]) == {"ok"}


def test_sync_makes_table_equal_to_input_and_is_a_noop_when_unchanged(wh):
    assert wh.sync("d", "sentences", sentences(4)) == (4, 0)
    version = wh.version("d", "sentences")
    assert wh.sync("d", "sentences", sentences(4)) == (0, 0)
    assert wh.version("d", "sentences") == version, "unchanged input must not commit a version"
    assert wh.sync("d", "sentences", sentences(3, start=1)) == (0, 1)
    assert sorted(wh.read("d", "sentences")["text"]) == ["sentence 1", "sentence 2", "sentence 3"]
    assert wh.read("d", "sentences", version=version).height == 4, "older versions stay readable"


def test_schema_is_enforced(wh):
    with pytest.raises(WarehouseError, match=r"lack columns \['lang'\]"):
        wh.upsert("d", "sentences", sentences(1).drop("lang"))


def test_a_column_the_schema_lacks_is_refused_not_dropped(wh):
    """Every write (upsert, sync, append) refuses rows with a column neither the table's schema nor a declaration
    for it has, naming the table and the columns; nothing is written."""
    from amrsim.metrics import metric_columns  # (importing metrics declares amr_metrics' aspect columns)

    extra = sentences(2).with_columns(pl.lit(1.0).alias("vibes"), pl.lit("x").alias("mood"))
    for write in (wh.upsert, wh.sync, wh.append):
        with pytest.raises(WarehouseError, match=r"table 'sentences' have columns its schema lacks: \['vibes', "
                                                 r"'mood'\]"):
            write("d", "sentences", extra)
    assert not wh.exists("d", "sentences")
    row = {"key": "k", "pair_key": "p", "item_id": "1", "split": "test", "sentence1_key": "a", "sentence2_key": "b",
           "score": 1.0, **dict.fromkeys(metric_columns(), 0.5), "options": "{}", "status": "ok",
           "error": None, "seconds": 0.0, "graphs_md5": None, "bounded": None}
    assert wh.append("d", "amr_metrics", pl.DataFrame([row])) == 1  # the declared aspect columns are its columns
    with pytest.raises(WarehouseError, match=r"table 'amr_metrics' have columns its schema lacks: \['toy'\]"):
        wh.append("d", "amr_metrics", pl.DataFrame([row | {"key": "k2", "toy": 0.5}]))
    assert wh.read("d", "amr_metrics")["key"].to_list() == ["k"]


@pytest.mark.parametrize("name", ["..", "../x", "a/b", ""])
def test_names_cannot_escape_the_root(wh, name):
    with pytest.raises(WarehouseError):
        wh.table_path(name, "pairs")


KILL_SCRIPT = """
import os, signal, sys
import polars as pl
import pyarrow as pa
import amrsim.warehouse.store as store
from amrsim.warehouse import Warehouse

real_write = store.write_deltalake

def dying_write(path, data, **kw):
    # stream the rows in small batches and SIGKILL this process after a few are handed to the writer
    batches = data.to_batches(max_chunksize=1000)
    def gen():
        for i, b in enumerate(batches):
            if i == 40:
                os.kill(os.getpid(), signal.SIGKILL)
            yield b
    return real_write(path, pa.RecordBatchReader.from_batches(data.schema, gen()), **kw)

store.write_deltalake = dying_write
n = 200_000
texts = [f"killed write {i}" for i in range(n)]
frame = pl.DataFrame({"key": texts, "lang": ["en"] * n, "text": texts, "status": ["ok"] * n,
                      "error": [None] * n}, schema_overrides={"error": pl.String})
Warehouse(sys.argv[1]).append("d", "sentences", frame)
print("write finished: the kill did not happen")
"""


@pytest.mark.slow
def test_a_write_killed_midway_leaves_the_table_unchanged(wh, tmp_path):
    wh.upsert("d", "sentences", sentences(10))
    before = wh.read("d", "sentences").sort("key")
    script = tmp_path / "kill.py"
    script.write_text(textwrap.dedent(KILL_SCRIPT))
    proc = subprocess.run([sys.executable, str(script), str(wh.root)], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    table_dir = wh.table_path("d", "sentences")
    assert wh.version("d", "sentences") == 0
    assert wh.read("d", "sentences").sort("key").equals(before)
    assert len(list((table_dir / "_delta_log").glob("*.json"))) == 1, "no new commit may appear"
    # and the table still takes writes afterwards
    wh.upsert("d", "sentences", sentences(5, start=100))
    assert wh.read("d", "sentences").height == 15


def test_lineage_records_inputs_outputs_counts_and_errors(wh):
    wh.upsert("d", "sentences", sentences(2))
    run = StageRun(run_id="r1", pipeline="p", stage="encode:x", dataset="d", config_hash="c1",
                   input_versions={"sentences": 0})
    with record_stage(wh, run):
        run.rows_in, run.rows_computed = 2, 2
        wh.upsert("d", "sentences", sentences(1, start=9))
        run.outputs.append("sentences")
    with pytest.raises(RuntimeError), record_stage(wh, StageRun("r2", "p", "ingest", "d", "c2")):
        raise RuntimeError("boom")
    lineage = wh.read("meta", "lineage").sort("started_at")
    first, second = lineage.to_dicts()
    assert first["output_version"] == 1 and first["input_versions"] == '{"sentences": 0}'
    assert first["rows_computed"] == 2 and first["code_version"].startswith("0.1.0")
    assert first["seconds"] >= 0 and first["status"] == "ok"
    assert second["status"] == "error" and second["error"] == "RuntimeError: boom"


def test_query_exposes_every_table_as_a_view(wh):
    wh.upsert("d", "sentences", sentences(3))
    wh.upsert("other", "sentences", sentences(2, start=50))
    frame = query(wh, "SELECT count(*) AS n FROM d.sentences UNION ALL SELECT count(*) FROM other.sentences")
    assert frame["n"].to_list() == [3, 2]


def test_reading_a_table_does_not_start_arrows_dataset_scanner(tmp_path):
    """`Warehouse.read` goes through polars' Parquet reader: Arrow's dataset scanner leaves C++ threads that can
    abort a short command at exit ("terminate called without an active exception", seen on `amrsim status`)."""
    script = textwrap.dedent(f"""
        import sys
        import polars as pl
        from amrsim.warehouse import Warehouse
        wh = Warehouse({str(tmp_path / "wh")!r})
        wh.append("d", "t", pl.DataFrame({{"key": ["a", "b"], "status": ["ok", "failed"]}}))
        assert wh.read("d", "t", columns=["key"])["key"].to_list() == ["a", "b"]
        assert wh.count("d", "t", status="failed") == 1
        print(sorted(m for m in sys.modules if m.startswith("pyarrow") and "dataset" in m))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
