"""Progress on every long command (docs/operations.md): lines on stderr in a log (a bar on a terminal), none on
stdout, which under --json holds the document alone. The thresholds are lowered so small data shows them: every
unit of work may print a line (`PROGRESS_LINE_SECONDS` 0) and any job shows progress (`PROGRESS_LEAST` 1)."""

from __future__ import annotations

import io
import json

import numpy as np
import polars as pl
import pytest
import torch
from typer.testing import CliRunner

import amrsim.console
from amrsim.encoders import cache
from tests.helpers import CountingEncoder


@pytest.fixture
def every_line(monkeypatch, tmp_path):
    """Progress for any job, a line per unit of work; the warehouse at tmp_path/warehouse (no pipelines.yaml)."""
    monkeypatch.setattr(amrsim.console, "PROGRESS_LINE_SECONDS", 0.0)
    monkeypatch.setattr(amrsim.console, "PROGRESS_LEAST", 1)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def fake_encoder(monkeypatch):
    enc = CountingEncoder()
    monkeypatch.setattr(cache, "load_encoder_with", lambda *a, **k: enc)
    return enc


def run_amrsim(*args: str):
    """`amrsim ARGS` in this process (so the lowered thresholds hold), stdout and stderr apart."""
    from amrsim.cli import app

    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result


def json_only(result) -> dict:
    """The command's stdout: one JSON document and nothing else."""
    return json.loads(result.stdout)


def test_evaluate_sts_tells_its_embedding_progress(every_line, fake_encoder, write_tsv):
    file = write_tsv("pairs_test.tsv", ["sentence1", "sentence2", "score"],
                     [["a cat sits", "a cat sat", "4"], ["dogs bark", "a dog barks", "3"], ["rain", "sun", "0"]])
    result = run_amrsim("evaluate", "sts", "--encoder", "minilm", "--file", str(file), "--json")
    assert json_only(result)["command"] == "evaluate sts"
    assert "with minilm: 6/6 rows (100%)" in result.stderr, result.stderr
    again = run_amrsim("evaluate", "sts", "--encoder", "minilm", "--file", str(file), "--lang-pairs", "en-en",
                       "--json")
    assert json_only(again)["command"] == "evaluate sts" and "rows" not in again.stderr  # results reused: no work


@pytest.mark.slow
@pytest.mark.parametrize("symmetric", [False, True])
def test_a_cross_encoder_tells_pairs_scored(every_line, tmp_path, tiny_model, write_tsv, symmetric):
    """A PEAR run scores pairs, not embeddings: `evaluate sts` and `score` tell pairs scored, each pair once when
    the run reads both orders; a second scoring of the same pairs (the model keeps it) is all done at once."""
    from amrsim.methods.pear import PearCrossEncoder, save_run

    save_run(PearCrossEncoder(tiny_model, device="cpu"), tmp_path / "warehouse" / "models" / "pear" / "r1",
             {"symmetric": symmetric})
    file = write_tsv("pairs_test.tsv", ["sentence1", "sentence2", "score"],
                     [["a cat sits", "a cat sat", "4"], ["dogs bark", "a dog barks", "3"], ["rain", "sun", "0"]])
    result = run_amrsim("evaluate", "sts", "--encoder", "pear:r1", "--file", str(file), "--batch-size", "1",
                        "--json")
    assert json_only(result)["command"] == "evaluate sts"
    told = [line for line in result.stderr.splitlines() if " with pear:r1: " in line]
    assert [line.split(": ")[-1].split(" (")[0] for line in told] == ["1/3 pairs", "2/3 pairs", "3/3 pairs"], told
    scored = run_amrsim("score", "--model", "pear:r1", "--file", str(file), "--out", str(tmp_path / "out.tsv"))
    assert "score with pear:r1: 3/3 pairs (100%)" in scored.stderr, scored.stderr


def test_evaluate_bitext_tells_files_done_not_each_files_embeddings(every_line, fake_encoder, tmp_path):
    for pair in ("deu-eng", "fra-eng"):
        (tmp_path / f"tatoeba.{pair}.tsv").write_text(f"{pair[:3]}\teng\nein hund\ta dog\nzwei\ttwo\n")
    result = run_amrsim("evaluate", "bitext", "--encoder", "minilm", "--file", str(tmp_path / "tatoeba.*.tsv"),
                        "--json")
    assert json_only(result)["command"] == "evaluate bitext"
    lines = result.stderr.splitlines()
    assert [line.split(":")[1].split("(")[0].strip() for line in lines] == ["1/2 files", "2/2 files"], lines
    assert all(line.startswith("evaluate bitext with minilm: ") for line in lines)


def test_evaluate_transfer_tells_its_embedding_progress(every_line, fake_encoder, tmp_path):
    def write(name, rows):
        p = tmp_path / name
        p.write_text("sentence_A\tsentence_B\tentailment_judgment\n" + "".join("\t".join(r) + "\n" for r in rows))
        return p

    rows = [("a cat sits", "a cat sits", "ENTAILMENT"), ("dogs run", "dogs run", "ENTAILMENT"),
            ("a cat sits", "zzz qq", "CONTRADICTION"), ("dogs run", "mmm pp", "CONTRADICTION")]
    train, dev, test = write("train.tsv", rows * 3), write("dev.tsv", rows), write("test.tsv", rows)
    result = run_amrsim("evaluate", "transfer", "--encoder", "minilm", "--task", "sick_e", "--train", str(train),
                    "--dev", f"en={dev}", "--test", f"en={test}", "--json")
    assert json_only(result)["command"] == "evaluate transfer"
    assert "embed " in result.stderr and "rows (100%)" in result.stderr, result.stderr


def test_evaluate_aspects_tells_its_embedding_progress(every_line, fake_encoder, tmp_path):
    from amrsim.metrics import metric_columns
    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.keys import content_key

    wh = Warehouse(tmp_path / "warehouse")
    texts = ["the cat sat", "a cat sat", "dogs bark", "the sun"]
    keys = [content_key("sentence", "en", t) for t in texts]
    wh.upsert("d", "sentences", pl.DataFrame({"key": keys, "lang": "en", "text": texts, "status": "ok",
                                              "error": None}))
    rows = [{"key": f"m{i}", "pair_key": f"p{i}", "item_id": str(i), "split": "test", "sentence1_key": keys[a],
             "sentence2_key": keys[b], "score": 1.0, **dict.fromkeys(metric_columns()), "frames": f,
             "options": "{}", "status": "ok", "error": None, "seconds": 0.0, "graphs_md5": None, "bounded": None}
            for i, ((a, b), f) in enumerate(zip([(0, 1), (0, 2), (2, 3)], [0.9, 0.1, 0.4], strict=True))]
    wh.upsert("d", "amr_metrics", pl.DataFrame(rows))
    result = run_amrsim("evaluate", "aspects", "--encoder", "minilm", "--dataset", "d", "--json")
    assert json_only(result)["command"] == "evaluate aspects"
    assert "embed d with minilm: 4/4 rows (100%)" in result.stderr, result.stderr


def test_parse_tells_sentences_parsed(every_line, tmp_path):
    (tmp_path / "s.txt").write_text("The cat sleeps.\nDogs bark.\n\n")
    result = run_amrsim("parse", "--file", str(tmp_path / "s.txt"), "--out", str(tmp_path / "g.jsonl"))
    assert "parse s.txt (ud): 3/3 rows (100%)" in result.stderr, result.stderr
    assert "parse s.txt" not in result.stdout and result.stdout.startswith("3 sentences: 2 parsed, 1 failed")


def test_metrics_score_tells_pairs_scored_and_a_rerun_what_it_reuses(every_line, tmp_path):
    # four pairs: metrics score shows progress from 4x the rows' threshold (a pair's aspects are quick)
    graphs = ["(s / sleep-01 :ARG0 (c / cat))", "(b / bark-01 :ARG0 (d / dog))", "(r / rain-01)", "(w / walk-01)"]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"amr1": a, "amr2": b}) + "\n"
                                              for a, b in zip(graphs, graphs[1:] + graphs[:1], strict=True)))
    args = ("metrics", "score", "--file", str(tmp_path / "p.jsonl"), "--out", str(tmp_path / "m.parquet"),
            "--aspects", "smatch", "--json")
    result = run_amrsim(*args)
    assert json_only(result)["computed"] == 4
    assert "metrics score p.jsonl: 4/4 pairs (100%)" in result.stderr, result.stderr
    again = run_amrsim(*args)
    assert json_only(again)["reused"] == 4
    assert again.stderr.splitlines()[0] == "metrics score p.jsonl: 4 pairs already computed"  # then the means


@pytest.mark.parametrize("aspects", [(), ("--aspects", "all")])
def test_metrics_corpus_tells_pairs_scored(every_line, tmp_path, aspects):
    graphs = ["(s / sleep-01 :ARG0 (c / cat))", "(b / bark-01 :ARG0 (d / dog))", "(r / rain-01)", "(w / walk-01)"]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"amr1": a, "amr2": b}) + "\n"
                                              for a, b in zip(graphs, graphs[1:] + graphs[:1], strict=True)))
    result = run_amrsim("metrics", "corpus", "--file", str(tmp_path / "c.jsonl"), "--samples", "10", *aspects,
                        "--json")
    assert json.loads(result.stdout)  # stdout: the document alone
    told = [line.split(": ")[-1].split(" (")[0] for line in result.stderr.splitlines()
            if line.startswith("metrics corpus c.jsonl: ")]
    assert told == ["1/4 pairs", "2/4 pairs", "3/4 pairs", "4/4 pairs"], result.stderr


def test_training_tells_steps_and_a_resumed_run_the_steps_done_before(every_line, capsys):
    from amrsim.methods.training import Trainer, TrainingArgs, seeded_batches

    x = torch.linspace(-1, 1, 16).reshape(8, 2)
    model = torch.nn.Linear(2, 1)

    def losses(rows: np.ndarray) -> dict[str, torch.Tensor]:
        return {"mse": (model(x[torch.as_tensor(rows)]) ** 2).mean()}

    trainer = Trainer("toy", TrainingArgs(lr=0.01, batch_size=4, epochs=2), [model], 2, seeded_batches(0, 8, 4),
                      losses)
    trainer.fit()
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"train toy: {n}/4 steps" for n in (1, 2, 3, 4)], lines
    resumed = Trainer("toy", TrainingArgs(lr=0.01, batch_size=4, epochs=2), [model], 2, seeded_batches(0, 8, 4),
                      losses, state={**trainer.state, "step": 3})
    resumed.fit()
    assert capsys.readouterr().err.startswith("train toy: 1/1 steps (3 already computed) (100%)")


def test_stages_tell_their_plan_and_every_row(wh):
    """The parse and metrics stages plan the work, then every row is told once: by the stage (rows that fail
    without parsing) or by the batch function it is given (the Ray helper's map_batches, here in-process)."""
    from amrsim.config import ParseConfig, RayConfig
    from amrsim.warehouse.keys import content_key
    from tasks.ray_map import map_batches

    texts = ["The cat sleeps.", "Dogs bark.", "Es regnet."]
    wh.upsert("d", "sentences", pl.DataFrame({"key": [content_key("sentence", t) for t in texts],
                                              "lang": ["en", "en", "de"], "text": texts, "status": "ok",
                                              "error": None}))
    from amrsim.amr.parsing import parse_frame
    from amrsim.stages.parse import parse_stage

    parse = ParseConfig(backend="ud", langs=["en"], pivot=False)
    specs = parse.parser_specs()
    told: list[tuple[str, int, int]] = []

    def batches(frame: pl.DataFrame, on_progress=None) -> pl.DataFrame:
        return map_batches(lambda b: parse_frame(b, specs=specs, linearize=None), frame, RayConfig(),
                           wh.root, batch_size=1, on_progress=on_progress)

    for run in ("r1", "r2"):
        parse_stage(wh, "p", "d", parse, next(iter(specs.values())).id, run, batches,
                    on_progress=lambda n: told.append(("rows", n, 0)),
                    on_plan=lambda todo, done: told.append(("plan", todo, done)))
    assert told == [("plan", 3, 0), ("rows", 1, 0), ("rows", 1, 0), ("rows", 1, 0),  # German: no parser
                    ("plan", 0, 3)]  # a rerun: every graph there


def test_a_bar_inside_a_bar_is_a_second_line_of_it_and_quiet_in_a_log():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log, terminal = io.StringIO(), Terminal()
    with amrsim.console.progress_bar(300, "files", stream=log) as outer:
        with amrsim.console.progress_bar(300, "inner", stream=log) as inner:
            inner(300)
        outer(300)
    assert log.getvalue() == "files: 300/300 rows (100%), 0 s\n"  # the outer work's lines only
    with amrsim.console.progress_bar(300, "files", stream=terminal) as outer:
        with amrsim.console.progress_bar(300, "inner", stream=terminal) as inner:
            inner(100)
            drawn = terminal.getvalue()
        outer(300)
    assert "files" in drawn and "inner" in drawn  # one display, two lines (two displays would overwrite)


def test_the_metrics_stage_plans_then_tells_every_pair(wh, write_tsv):
    """Counted before the stream (the DuckDB count leaves the connection free for it), then every pair told once:
    by the stage for pairs found scored, by the scorer for the rest; a rerun plans nothing to do."""
    from amrsim.config import DatasetConfig
    from amrsim.metrics.engine import MetricsOptions, score_pairs
    from amrsim.stages import metrics_stage
    from amrsim.stages.ingest import ingest_tables

    graph = "(w / want-01 :ARG0 (b / boy))"
    rows = [[i, "1.0", f"s{i}", f"t{i}", graph, "(b / boy)"] for i in "abc"] + [["d", "1.0", "u", "v", graph, ""]]
    path = write_tsv("p.tsv", ["idx", "gold", "sentence1", "sentence2", "amr1", "amr2"], rows)
    ingest_tables(wh, "bam", DatasetConfig(path=str(path), kind="pairs", split="test", columns={
        "id": "idx", "score": "gold", "amr1": "amr1", "amr2": "amr2"}), path, "r0")
    options = MetricsOptions(aspects=("smatch",), extra={"parser": "provided"})
    told: list[tuple[str, int, int]] = []

    def score(frame: pl.DataFrame, on_progress=None) -> pl.DataFrame:
        out = score_pairs(frame, options)
        on_progress(frame.height)
        return out

    for run in ("r1", "r2"):
        metrics_stage(wh, "p", "bam", options, run, score, on_progress=lambda n: told.append(("pairs", n, 0)),
                      on_plan=lambda todo, done: told.append(("plan", todo, done)))
    # a, b and c have the same graphs: the stage tells two as found scored (repeated), the scorer scores one; pair d
    # has an empty graph and is no graph pair
    assert told == [("plan", 3, 0), ("pairs", 2, 0), ("pairs", 1, 0), ("plan", 0, 3)]


def test_parse_with_translation_tells_both_and_translation_counts_each_row_once(every_line, tmp_path):
    import random

    from amrsim.translate.marian import MarianTranslator
    from tests.helpers import build_tiny_marian, random_sentence

    model = build_tiny_marian(tmp_path / "marian", max_pos=64)
    rng = random.Random(2)
    texts = ["Der Hund läuft.", "", " ".join(random_sentence(rng) for _ in range(20)), "Die Katze."]  # 3rd: split
    translator = MarianTranslator(str(model), device="cpu", batch_size=2, num_beams=1, max_length=12)
    told: list[int] = []
    results = translator.translate(texts, on_progress=told.append)
    assert sum(told) == len(texts) and results[2].flags == "split"  # a split row counts once, when all its pieces are
    assert results == translator.translate(texts)  # telling changes nothing
    (tmp_path / "de.txt").write_text("Der Hund läuft.\nDie Katze schläft.\n")
    result = run_amrsim("parse", "--file", str(tmp_path / "de.txt"), "--out", str(tmp_path / "g.jsonl"), "--lang",
                        "de", "--translate", str(model), "--device", "cpu")
    lines = [line for line in result.stderr.splitlines() if " rows (" in line]  # (not transformers' loading bars)
    assert lines[0].startswith(f"translate de->en with {model}: 2/2 rows (100%)"), lines
    assert [line.split(", ")[0] for line in lines[1:]] == ["parse de.txt (ud): 2/2 rows (100%)"], lines


@pytest.mark.slow
def test_ray_batches_tell_progress_as_they_come_back(tmp_path):
    """On a local Ray: plain tasks (told as each finishes) and GPU actors (told in order), every row once."""
    import subprocess
    import sys
    import textwrap

    from tests.helpers import ROOT, cli_env

    pytest.importorskip("ray")
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        import polars as pl, ray
        from amrsim.config import RayConfig
        from tasks.ray_map import map_batches
        from tests.system.test_flows import _double_with_pid
        frame = pl.DataFrame({"x": list(range(2000))})
        for actors in (False, True):
            told = []
            cfg = RayConfig(enabled=True, num_cpus=2, num_gpus=2 if actors else 0)
            out = map_batches(_double_with_pid, frame, cfg, Path(sys.argv[1]), batch_size=300, gpu_actors=actors,
                              on_progress=told.append)
            assert out["y"].to_list() == [2 * i for i in range(2000)], "order or values differ"
            assert sorted(told) == [200] + [300] * 6, told
            ray.shutdown()
        print("told ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, env=cli_env(tmp_path), timeout=300)
    assert proc.returncode == 0 and "told ok" in proc.stdout, proc.stderr[-3000:]


def test_work_planned_with_nothing_to_do_prints_no_line():
    log = io.StringIO()
    with amrsim.console.progress_bar(1000, "translate d", stream=log) as advance:
        advance.plan(0, 0)  # translations given with the data: none to generate
    assert log.getvalue() == ""
