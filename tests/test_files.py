"""amrsim.files: a file's format from its name and its header columns, the one helper every command reads them with."""

from __future__ import annotations

import gzip

import polars as pl
import pytest

from amrsim.files import file_digest, file_format, header_columns
from amrsim.warehouse.keys import file_stat_digest
from tests.forked import amrsim_cli


@pytest.mark.parametrize("name, expected", [
    ("pairs.tsv", "tsv"), ("pairs.csv", "csv"), ("pairs.jsonl", "jsonl"), ("pairs.parquet", "parquet"),
    ("pairs.tsv.gz", "tsv"), ("pairs.jsonl.gz", "jsonl"), ("PAIRS.TSV", "tsv"), ("dir.tsv/pairs.csv", "csv"),
    ("sts.test.tsv", "tsv"), ("pairs.txt", None), ("pairs.tsv.bak", None), ("pairs.gz", None), ("pairs", None),
])
def test_file_format_reads_the_suffix_past_gz(name, expected):
    assert file_format(name) == expected


def test_file_format_default_and_own_suffixes():
    assert file_format("pairs.txt", default="tsv") == "tsv"
    assert file_format("pairs.tsv", default="jsonl") == "tsv"
    transfer = {".txt": "tsv", ".ndjson": "jsonl"}
    assert file_format("german.train.txt.gz", transfer) == "tsv"
    assert file_format("x.ndjson", transfer) == "jsonl"
    assert file_format("x.tsv", transfer) is None  # only the suffixes given


def test_header_columns_of_each_format(tmp_path):
    (tmp_path / "a.tsv").write_text("sentence1\tsentence2 \tscore\nx\ty\t1\n", encoding="utf-8")
    (tmp_path / "a.csv").write_text("s1,s2\r\nx,y\r\n", encoding="utf-8")
    (tmp_path / "a.jsonl").write_text('{"snt": "x", "amr": "(a / b)"}\n', encoding="utf-8")
    with gzip.open(tmp_path / "a.tsv.gz", "wt", encoding="utf-8") as f:
        f.write("sentence_A\tsentence_B\nx\ty\n")
    pl.DataFrame({"amr1": ["(a / b)"], "amr2": ["(c / d)"]}).write_parquet(tmp_path / "a.parquet")
    (tmp_path / "list.jsonl").write_text('["not", "an", "object"]\n', encoding="utf-8")
    (tmp_path / "bad.jsonl").write_text("{not json\n", encoding="utf-8")
    assert header_columns(tmp_path / "a.tsv", "tsv") == ["sentence1", "sentence2", "score"]
    assert header_columns(tmp_path / "a.csv", "csv") == ["s1", "s2"]
    assert header_columns(tmp_path / "a.jsonl", "jsonl") == ["snt", "amr"]
    assert header_columns(tmp_path / "a.tsv.gz", "tsv") == ["sentence_A", "sentence_B"]
    assert header_columns(tmp_path / "a.parquet", "parquet") == ["amr1", "amr2"]
    assert header_columns(tmp_path / "list.jsonl", "jsonl") == []
    assert header_columns(tmp_path / "bad.jsonl", "jsonl") == []
    assert header_columns(tmp_path / "a.tsv", None) == []


def test_digests_follow_content_and_stat(tmp_path):
    path = tmp_path / "f.tsv"
    path.write_bytes(b"a\tb\n")
    first, stat = file_digest(path), file_stat_digest(path)
    assert first.startswith("4:")
    path.write_bytes(b"a\tc\n")
    assert file_digest(path) != first  # same size, other bytes
    assert file_stat_digest(tmp_path / "missing.tsv") is None and stat is not None


@pytest.mark.slow
def test_evaluate_sts_reads_a_gzipped_files_header(tmp_path):
    """The header of a .tsv.gz file picks the sentence columns as a .tsv's does (sentence_A/sentence_B here)."""
    with gzip.open(tmp_path / "sick.tsv.gz", "wt", encoding="utf-8") as f:
        f.write("sentence_A\tsentence_B\trelatedness_score\n")
        for i in range(4):
            f.write(f"A cat sits number {i}.\tA cat is sitting, number {i}.\t{i + 1}\n")
    proc = amrsim_cli("evaluate", "sts", "--encoder", "muse", "--file", str(tmp_path / "sick.tsv.gz"),
                      cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})  # no pipelines.yaml in tmp_path: ./warehouse
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "STS (x100) sick.tsv.gz" in proc.stdout
