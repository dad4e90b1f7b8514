"""`--out` files: a command never writes over its own input (same path, symlink or hard link), and a write that
fails leaves neither a half-written file nor its temporary file behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amrsim.files import atomic_write
from tests.helpers import one_line_error, run_cli

GRAPH = "(w / want-01 :ARG0 (b / boy))"


def _graph_pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"amr1": GRAPH, "amr2": GRAPH}) + "\n" for _ in range(2)))
    return path


def _sentences(tmp_path: Path) -> Path:
    path = tmp_path / "snt.jsonl"
    path.write_text(json.dumps({"snt": "The boy wants.", "amr": GRAPH}) + "\n")
    return path


METRICS = ("metrics", "score", "--aspects", "smatch", "--vectors", "random", "--workers", "1")
PARSE = ("parse", "--backend", "provided")


def _same_file(kind: str, tmp_path: Path, source: Path) -> Path:
    if kind == "same path":
        return source
    link = tmp_path / f"{kind.replace(' ', '_')}{source.suffix}"
    if kind == "symlink":
        link.symlink_to(source)
    else:
        os.link(source, link)
    return link


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["same path", "symlink", "hard link"])
@pytest.mark.parametrize("command, make_input", [(METRICS, _graph_pairs), (PARSE, _sentences)],
                         ids=["metrics score", "parse"])
def test_out_over_the_input_is_refused_before_anything_happens(tmp_path, kind, command, make_input):
    source = make_input(tmp_path)
    before = source.read_bytes()
    out = _same_file(kind, tmp_path, source)
    line = one_line_error(run_cli(tmp_path, *command, "--file", str(source), "--out", str(out)))
    assert "is the same file as --file" in line and str(out) in line
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.slow
@pytest.mark.parametrize("command, make_input", [(METRICS, _graph_pairs), (PARSE, _sentences)],
                         ids=["metrics score", "parse"])
def test_a_failed_out_write_is_one_line_and_leaves_no_temporary_file(tmp_path, command, make_input):
    source = make_input(tmp_path)
    out = tmp_path / "out_is_a_directory"
    out.mkdir()
    line = one_line_error(run_cli(tmp_path, *command, "--file", str(source), "--out", str(out)))
    assert f"--out {out}: cannot write" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([source.name, out.name])


@pytest.mark.slow
def test_metrics_score_never_replaces_an_out_that_is_not_its_results(tmp_path):
    source = _graph_pairs(tmp_path)
    other = tmp_path / "notes.tsv"
    other.write_text("not\tparquet\n")
    line = one_line_error(run_cli(tmp_path, *METRICS, "--file", str(source), "--out", str(other)))
    assert f"--out {other}: exists and is not a Parquet file of earlier results" in line
    assert other.read_text() == "not\tparquet\n"


def test_atomic_write_replaces_whole_files_or_nothing(tmp_path):
    target = tmp_path / "t.txt"
    atomic_write(target, lambda tmp: tmp.write_text("first"))
    assert target.read_text() == "first"

    def half_then_fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError, match="writer died"):
        atomic_write(target, half_then_fail)
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write(tmp_path / "d", lambda tmp: tmp.write_text("x"))  # the rename itself fails
    assert target.read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "t.txt"]
