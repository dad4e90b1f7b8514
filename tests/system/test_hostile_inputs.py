"""Issue 51, hostile input as a user meets it on the command line: a dataset path or --file that is a loop of
symbolic links is one line (exit 2, nothing written); sentences of only invisible characters fail like empty ones in
`parse` and stop `score`; `amrsim run` names each dataset's failed rows and the first reason under its summary."""

from __future__ import annotations

import json
import sys
import types

import polars as pl
import pytest

from tests.helpers import one_line_error, run_cli

LOOP = "symbolic link loop (too many levels of symbolic links)"

CONFIG = """pipelines:
  p:
    datasets:
      mine: {path: %s, kind: pairs, format: tsv}
    encode: {encoders: [minilm]}
    evaluate: {sts: {encoders: [minilm], datasets: [mine], splits: [test], lang_pairs: [en-en]}}
"""


def _loop(tmp_path, name: str = "a.tsv"):
    (tmp_path / "b.tsv").symlink_to(tmp_path / name)
    (tmp_path / name).symlink_to(tmp_path / "b.tsv")
    return tmp_path / name


def test_a_dataset_path_that_is_a_symlink_loop_stops_the_run_in_one_line(tmp_path):
    _loop(tmp_path)
    (tmp_path / "pipelines.yaml").write_text(CONFIG % "a.tsv", encoding="utf-8")
    line = one_line_error(run_cli(tmp_path, "run", "p", timeout=60))
    assert line == (f"error: {tmp_path / 'pipelines.yaml'}: pipeline 'p', key 'datasets.mine.path', value 'a.tsv': "
                    f"{LOOP} ({tmp_path / 'a.tsv'})")
    assert not (tmp_path / "warehouse").exists() and not (tmp_path / ".amrsim").exists()  # Prefect never started


@pytest.mark.parametrize("command", [["evaluate", "sts", "--encoder", "minilm"], ["parse", "--out", "o.jsonl"]])
def test_a_one_off_file_that_is_a_symlink_loop_is_one_line(tmp_path, command):
    path = _loop(tmp_path)
    line = one_line_error(run_cli(tmp_path, *command, "--file", str(path)))
    assert line == f"error: --file {path}: {LOOP}"
    assert not (tmp_path / "warehouse").exists() and not (tmp_path / "o.jsonl").exists()


def test_parse_fails_a_line_of_only_invisible_characters_like_an_empty_one(tmp_path):
    sentences = tmp_path / "snt.txt"
    sentences.write_text("Dogs bark.\n\u200b\u200d\n\u2060 \n", encoding="utf-8")
    done = run_cli(tmp_path, "parse", "--file", str(sentences), "--out", str(tmp_path / "o.jsonl"))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["status"] for r in rows] == ["ok", "failed", "failed"]
    assert rows[1]["error"] == rows[2]["error"] == "empty sentence (only invisible characters)"
    assert rows[1]["amr"] is None


def test_score_stops_at_a_pair_with_an_invisible_sentence_before_a_model_loads(tmp_path):
    run = tmp_path / "warehouse" / "models" / "pear" / "r1"
    run.mkdir(parents=True)  # no weights: the pair is refused before the model would load
    (run / "model.json").write_text(json.dumps({"method": "pear", "run_id": "r1", "kind": "cross-encoder",
                                                "created_at": "2024-01-01T00:00:00"}), encoding="utf-8")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("sentence1\tsentence2\nA cat sleeps.\tA cat naps.\nA dog runs.\t\ufeff\u200b\n",
                     encoding="utf-8")
    line = one_line_error(run_cli(tmp_path, "score", "--file", str(pairs)))
    assert line == (f"error: {pairs}:3: empty sentence2 (only invisible characters): every row needs two sentences "
                    f"to score")


def test_run_prints_a_datasets_failed_rows_and_the_first_reason_under_its_summary(monkeypatch, capsys, tmp_path):
    """The flow's ingest summary carries the note (tests/ingest/test_hostile_input.py); `amrsim run` prints it as
    one line after the summary table, as text."""
    from amrsim.cli.run import _run_flow

    note = ("warning: dataset 'mine': 1 of 3 rows failed (kept with status 'failed'); the first: /d/x.tsv:3: "
            "language code 'und' (undetermined) names no language; give the text's language (an ISO 639 code such "
            "as en, de, es, zh) [bold]")
    stages = [{"stage": "ingest", "dataset": "mine", "rows_in": 3, "computed": 3, "failed": 1, "rows_out": 3,
               "seconds": 0.1, "status": "ok", "notes": [note]},
              {"stage": "encode:minilm", "dataset": "mine", "rows_in": 2, "computed": 2, "failed": 0, "rows_out": 2,
               "seconds": 0.1, "status": "ok"}]
    fake = types.ModuleType("flows.demo")
    fake.demo = lambda *a, **k: {"run_id": "r1", "stages": stages, "results": pl.DataFrame(), "tables": {}, "notes": [],
                                 "report": None}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flows.demo", fake)
    cfg = types.SimpleNamespace(path=tmp_path / "pipelines.yaml", warehouse_root=tmp_path / "warehouse")
    _run_flow("p", cfg, {}, lambda: None, 0.0)
    out = capsys.readouterr().out
    assert out.count(note) == 1 and out.index("Run r1 summary") < out.index(note)
