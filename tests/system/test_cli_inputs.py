"""`amrsim evaluate` options that name things the command cannot use end in one line (exit 2) before anything is
built or written: a model directory or hub id that does not load, a file suffix it does not read, a dataset name
that is not one safe directory or is reserved. A file named like a reserved dataset gets a name of its own. Other
commands: `score --model` naming a sentence encoder says so, `metrics corpus --samples` is bounded, and `parse`
suggests a translation model only for a language code."""

from __future__ import annotations

import json
import re

import pytest

from amrsim.config import RESERVED_DATASETS, dataset_name_error, one_off_dataset
from amrsim.encoders import model_id
from tests.helpers import one_line_error, run_cli


@pytest.fixture
def pairs(write_tsv):
    return write_tsv("pairs.tsv", ["sentence1", "sentence2", "score"],
                     [["a man plays", "a man is playing", "4.5"], ["a cat sleeps", "the sky is blue", "0.5"],
                      ["kids run", "children are running", "4.0"]])


def _nothing_written(tmp_path) -> None:
    assert not (tmp_path / "warehouse").exists() or not any((tmp_path / "warehouse").iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("encoder, says", [
    ("hf:/nonexistent/dir", "no model directory /nonexistent/dir"),
    ("hf:./not/here#mean", "no model directory not/here"),
    ("hf:nonexistent-org/no-such-model", "cannot load 'nonexistent-org/no-such-model'"),
])
def test_an_encoder_that_does_not_load_is_one_line(tmp_path, pairs, encoder, says):
    line = one_line_error(run_cli(tmp_path, "evaluate", "sts", "--encoder", encoder, "--file", str(pairs)))
    assert says in line and encoder in line
    if "no model directory" in says:
        _nothing_written(tmp_path)  # refused before the warehouse is touched


def test_local_hf_paths_are_checked_when_the_name_resolves(tmp_path):
    with pytest.raises(ValueError, match="no model directory"):
        model_id(f"hf:{tmp_path / 'absent'}")
    (tmp_path / "model").mkdir()
    # a local directory's id carries a fingerprint of its files (a changed model is a new model, never stale rows)
    named = f"hf:{tmp_path / 'model'}#cls"
    assert re.fullmatch(re.escape(named) + r"@[0-9a-f]{16}", model_id(named))
    assert model_id("hf:org/model") == "hf:org/model"  # a hub id: resolved when loaded


@pytest.mark.slow
def test_a_file_suffix_sts_does_not_read_names_the_suffixes_it_reads(tmp_path, pairs):
    txt = tmp_path / "x.txt"
    txt.write_text(pairs.read_text())
    line = one_line_error(run_cli(tmp_path, "evaluate", "sts", "--encoder", "minilm", "--file", str(txt)))
    assert str(txt) in line and ".tsv" in line and ".parquet" in line and "format" not in line
    _nothing_written(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["../../outside/x", "/tmp/x", "a/b", "Upper", "eval", "meta", "x\n"])
def test_a_dataset_name_that_is_not_one_safe_directory_is_refused_first(tmp_path, pairs, name):
    line = one_line_error(run_cli(tmp_path, "evaluate", "sts", "--encoder", "minilm", "--file", str(pairs),
                                  "--dataset", name))
    assert "--dataset" in line and "must match" in line
    _nothing_written(tmp_path)
    assert not (tmp_path.parent / "outside").exists()


def test_dataset_name_error_agrees_with_the_config_rule():
    assert dataset_name_error("stsb_en") is None
    for name in ["eval", "../x", "x/y", "", "9x", "x\n", *RESERVED_DATASETS]:
        assert dataset_name_error(name) is not None


@pytest.mark.slow
def test_a_file_named_like_a_reserved_dataset_gets_a_name_of_its_own(tmp_path, pairs):
    (tmp_path / "ev").mkdir()
    eval_tsv = tmp_path / "ev" / "eval.tsv"
    eval_tsv.write_text(pairs.read_text())
    proc = run_cli(tmp_path, "evaluate", "sts", "--encoder", "minilm", "--file", str(eval_tsv), "--device", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    reserved = tmp_path / "warehouse" / "eval"
    assert sorted(p.name for p in reserved.iterdir()) == ["results"]  # no pairs/sentences under `eval`
    assert (tmp_path / "warehouse" / one_off_dataset(eval_tsv) / "pairs").is_dir()  # file_eval_<hash>


@pytest.mark.parametrize("param, says", [
    ("lr=fast", "--param: train s3bert param 'lr', value 'fast': Input should be a valid number"),
    ("batch_size=true", "--param: train s3bert param 'batch_size', value True: Input should be a valid integer"),
    ("no_such_key=3", "--param: train s3bert param 'no_such_key', value 3: unknown parameter"),
])
def test_a_bad_training_param_is_one_line_before_anything_starts(tmp_path, param, says):
    from tests.helpers import ROOT

    proc = run_cli(tmp_path, "train", "s3bert", "--config", str(ROOT / "pipelines.yaml"), "--param", param,
                   "--run-id", "never-started")
    assert one_line_error(proc) == f"error: {says}"
    assert not (ROOT / "warehouse" / "models" / "s3bert" / "never-started").exists()  # no stage, no run directory
    assert "Ray" not in proc.stderr and "Prefect" not in proc.stderr  # refused before either started


def test_score_calls_a_sentence_encoder_by_what_it_is_not_unknown(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("sentence1\tsentence2\na cat\tthe cat\n")
    line = one_line_error(run_cli(tmp_path, "score", "--file", str(pairs), "--model", "minilm"))
    assert "unknown" not in line
    assert line.startswith("error: --model 'minilm': score needs a trained cross-encoder (pear:<run id|latest>; "
                           "trained: none)") and "evaluate sts --encoder minilm" in line


def test_metrics_corpus_samples_are_bounded_by_one_line(tmp_path):
    graphs = tmp_path / "graphs.jsonl"
    graphs.write_text(json.dumps({"amr1": "(w / want-01)", "amr2": "(w / want-01 :ARG0 (b / boy))"}) + "\n")
    line = one_line_error(run_cli(tmp_path, "metrics", "corpus", "--file", str(graphs), "--samples", "1000000000"))
    assert line == "error: --samples 1000000000: at most 100000 bootstrap resamples"
    at_the_bound = run_cli(tmp_path, "metrics", "corpus", "--file", str(graphs), "--samples", "100000", "--json")
    assert at_the_bound.returncode == 0, at_the_bound.stderr[-2000:]
    assert json.loads(at_the_bound.stdout)["samples"] == 100000


@pytest.mark.parametrize("lang, says", [
    ("klingon", "--lang 'klingon': not a language code; use e.g. de, es or zh"),
    ("opus-mt-x/../../evil", "--lang 'opus-mt-x/../../evil': not a language code"),
    ("de", "translate into English first: --translate Helsinki-NLP/opus-mt-de-en"),
    ("de-DE", "translate into English first: --translate Helsinki-NLP/opus-mt-de-en"),
])
def test_parse_suggests_a_translation_model_only_for_a_language_code(tmp_path, lang, says):
    sentences = tmp_path / "snt.txt"
    sentences.write_text("Der Junge will.\n")
    line = one_line_error(run_cli(tmp_path, "parse", "--file", str(sentences), "--out", str(tmp_path / "o.jsonl"),
                                  "--lang", lang))
    assert says in line
    assert lang in line and (f"opus-mt-{lang}-en" not in line or lang == "de")


def test_parse_translation_model_that_does_not_load_is_one_line_naming_the_pair(tmp_path):
    """The load error names the model and the translation direction, on one line: transformers' own message
    spans lines and huggingface_hub logs each failed request before it."""
    sentences = tmp_path / "snt.txt"
    sentences.write_text("Der Junge will.\n")
    line = one_line_error(run_cli(tmp_path, "parse", "--file", str(sentences), "--out", str(tmp_path / "o.jsonl"),
                                  "--lang", "de", "--translate", "opus-mt-not-a-model"))
    assert line.startswith("error: --translate 'opus-mt-not-a-model' (de->en): cannot load translation model")


def test_explain_refuses_empty_sentences(tmp_path):
    """Two empty texts embed identically: every aspect would read 1.00; refused before a model is loaded."""
    assert one_line_error(run_cli(tmp_path, "explain", "", "A dog runs.")) == (
        "error: SENTENCE1 is empty: give two sentences to compare")
    assert "SENTENCE2 is empty" in one_line_error(run_cli(tmp_path, "explain", "A dog runs.", "  "))


def test_query_cells_cannot_send_terminal_commands(tmp_path):
    proc = run_cli(tmp_path, "query", "SELECT chr(27) || '[2J' AS c, chr(27) || ']52;c;aGk=' || chr(7) AS osc")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert "\\x1b[2J" in proc.stdout and "\\x1b]52;c;aGk=\\x07" in proc.stdout


def _graphs(tmp_path):
    graphs = tmp_path / "graphs.jsonl"
    graphs.write_text(json.dumps({"amr1": "(w / want-01 :ARG0 (b / boy))", "amr2": "(w / want-01 :ARG0 (g / girl))"})
                      + "\n")
    return graphs


def test_metrics_score_vectors_that_are_not_vectors_fail_first_and_keep_the_earlier_out(tmp_path):
    from tests.helpers import ROOT

    graphs, out = _graphs(tmp_path), tmp_path / "scores.parquet"
    good = run_cli(tmp_path, "metrics", "score", "--file", str(graphs), "--out", str(out), "--aspects", "smatch")
    assert good.returncode == 0, good.stderr[-2000:]
    before = out.read_bytes()
    line = one_line_error(run_cli(tmp_path, "metrics", "score", "--file", str(graphs), "--out", str(out),
                                  "--vectors", f"file:{ROOT / 'README.md'}", "--workers", "2"))
    assert "README.md" in line and "not a vectors file" in line
    assert out.read_bytes() == before  # never replaced


def test_metrics_score_workers_are_bounded_by_one_line(tmp_path):
    from amrsim.metrics.engine import max_workers

    line = one_line_error(run_cli(tmp_path, "metrics", "score", "--file", str(_graphs(tmp_path)), "--out",
                                  str(tmp_path / "o.parquet"), "--workers", "100000"))
    assert line == (f"error: --workers 100000: at most {max_workers()} (4 per usable core); more processes only "
                    "share the cores")
    assert not (tmp_path / "o.parquet").exists()


def test_metrics_score_an_aspect_named_twice_is_scored_once(tmp_path):
    import polars as pl

    graphs = _graphs(tmp_path)
    once = run_cli(tmp_path, "metrics", "score", "--file", str(graphs), "--out", str(tmp_path / "a.parquet"),
                   "--aspects", "smatch,concepts")
    twice = run_cli(tmp_path, "metrics", "score", "--file", str(graphs), "--out", str(tmp_path / "b.parquet"),
                    "--aspects", "smatch, concepts,smatch")
    assert once.returncode == 0 and twice.returncode == 0, twice.stderr[-2000:]
    a, b = pl.read_parquet(tmp_path / "a.parquet"), pl.read_parquet(tmp_path / "b.parquet")
    assert a.drop("seconds").equals(b.drop("seconds"))  # the same columns and keys


def test_metrics_corpus_takes_a_negative_seed_as_smatch_does(tmp_path):
    graphs = _graphs(tmp_path)
    runs = [run_cli(tmp_path, "metrics", "corpus", "--file", str(graphs), "--seed", "-1", "--samples", "20", "--json")
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:]
    first = json.loads(runs[0].stdout)
    assert first == json.loads(runs[1].stdout) and first["seed"] == -1 and first["f1"] == 0.75
