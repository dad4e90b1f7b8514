"""`amrsim run` checks a pipeline's files, headers, column mappings and dataset sources before Prefect or Ray start:
one line naming the file, exit 2, nothing written, in seconds rather than after the flow runtime's start-up."""

from __future__ import annotations

from tests.helpers import one_line_error, run_cli

CONFIG = """pipelines:
  p:
    datasets:
      mine: {path: data.tsv, kind: pairs}
    encode: {encoders: [minilm]}
    evaluate: {sts: {encoders: [minilm], datasets: [mine], splits: [test], lang_pairs: [en-en]}}
"""


def test_a_bad_header_stops_the_run_before_prefect_starts(tmp_path, write_tsv):
    write_tsv("data.tsv", ["id", "split", "score", "sentA", "sentence2"], [["1", "test", "3.0", "a b", "c d"]])
    (tmp_path / "pipelines.yaml").write_text(CONFIG, encoding="utf-8")
    line = one_line_error(run_cli(tmp_path, "run", "p", timeout=60))
    assert line == f"error: {tmp_path / 'data.tsv'}:1: header lacks column(s) ['sentence1']; found ['id', 'split', " \
                   "'score', 'sentA', 'sentence2']"  # no "Prefect's log": the runtime never started
    assert not (tmp_path / "warehouse").exists() and not (tmp_path / ".amrsim").exists()


def test_replace_names_a_dataset_of_the_pipeline(tmp_path, write_tsv):
    write_tsv("data.tsv", ["sentence1", "sentence2", "score"], [["a b", "c d", "3.0"]])
    (tmp_path / "pipelines.yaml").write_text(CONFIG, encoding="utf-8")
    line = one_line_error(run_cli(tmp_path, "run", "p", "--replace", "other", timeout=60))
    assert "--replace" in line and "'other'" in line and "mine" in line
    assert not (tmp_path / "warehouse").exists()
