"""`metrics score` and `metrics corpus` on two PENMAN files paired graph by graph (`--file2`, as smatch's `-f a b`)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from amrsim.cli import app
from amrsim.ingest.readers import read_graph_pairs, read_penman_graphs
from tests.helpers import one_line_error, run_cli

FIRST = """# AMR release header: a comment block alone is no graph

# ::id 1
# ::snt The boy wants to go.
(w / want-01
   :ARG0 (b / boy)
   :ARG1 (g / go-02 :ARG0 b))

# ::id 2
(d / dog :quant 2)
"""
SECOND = """# ::id 1
(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b) :polarity -)


# ::id 2
(c / cat)
"""


@pytest.fixture
def files(tmp_path):
    a, b = tmp_path / "test.txt", tmp_path / "gold.amr"
    a.write_text(FIRST, encoding="utf-8")
    b.write_text(SECOND.replace("\n", "\r\n"), encoding="utf-8")  # CRLF line endings read the same
    return a, b


def test_penman_files_are_read_as_smatch_reads_them(files):
    a, b = files
    graphs = read_penman_graphs(a)
    assert [line for line, _ in graphs] == [3, 9]  # the line each graph (with its metadata) starts on
    assert graphs[1][1] == "# ::id 2\n(d / dog :quant 2)"
    pairs = read_graph_pairs(a, b)
    assert pairs["__line"].to_list() == [1, 2] and pairs["__start2"].to_list() == [1, 5]
    assert pairs["amr2"][0] == "# ::id 1\n(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b) :polarity -)"


def test_metrics_score_pairs_two_penman_files_as_a_table_of_the_same_pairs(files, tmp_path):
    a, b = files
    pairs = read_graph_pairs(a, b)
    table = tmp_path / "pairs.jsonl"
    table.write_text("".join(json.dumps({"amr1": x, "amr2": y}) + "\n" for x, y in zip(pairs["amr1"], pairs["amr2"],
                                                                                         strict=True)))
    outs = []
    for args in (["--file", str(a), "--file2", str(b)], ["--file", str(table)]):
        out = tmp_path / f"out{len(outs)}.parquet"
        result = CliRunner().invoke(app, ["metrics", "score", *args, "--out", str(out), "--aspects", "smatch,wlk",
                                          "--workers", "1"])
        assert result.exit_code == 0, result.output
        outs.append(pl.read_parquet(out).sort("line").drop("seconds"))
    assert outs[0].equals(outs[1])
    assert outs[0]["line"].to_list() == [1, 2] and 0.8 < outs[0]["smatch_f1"][0] < 1.0


def test_metrics_corpus_on_two_penman_files(files, tmp_path):
    a, b = files
    result = CliRunner().invoke(app, ["metrics", "corpus", "--file", str(a), "--file2", str(b), "--samples", "0"])
    assert result.exit_code == 0, result.output
    # pair 1: 3 instances + TOP + 3 relations, gold + polarity: 7 of 7 / 8; pair 2: (dog, TOP, quant) vs (cat, TOP)
    # under --convention smatch (TOP is the constant `top`): 1 of 3 / 2
    assert "triples matched 8, test 10, gold 10" in result.output


def test_penman_file_errors_name_the_file_and_line(files, tmp_path):
    a, b = files
    short = tmp_path / "short.txt"
    short.write_text("(c / cat)\n", encoding="utf-8")
    error = one_line_error(run_cli(tmp_path, "metrics", "corpus", "--file", str(a), "--file2", str(short)))
    assert str(short) in error and "holds 1 graphs" in error and "holds 2" in error
    bad_gold = tmp_path / "bad.txt"
    bad_gold.write_text("(w / want-01)\n\n\n(c / cat :ARG0 (c / dog))\n", encoding="utf-8")
    error = one_line_error(run_cli(tmp_path, "metrics", "corpus", "--file", str(a), "--file2", str(bad_gold)))
    assert f"{bad_gold}:4" in error and "gold graph 2" in error and "duplicate variable c" in error
    table = tmp_path / "pairs.tsv"
    table.write_text("amr1\tamr2\n(a / b)\t(a / b)\n", encoding="utf-8")
    error = one_line_error(run_cli(tmp_path, "metrics", "score", "--file", str(table), "--file2", str(b),
                                   "--out", str(tmp_path / "o.parquet")))
    assert "is a tsv table" in error
