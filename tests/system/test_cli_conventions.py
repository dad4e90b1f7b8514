"""What scripts and shells expect of `amrsim`: `--version`, shell completion, `--json` documents alone on stdout, no
traceback for a path that does not exist, is of the wrong kind, is a FIFO or holds random bytes (every path option
of every command, found by walking the command tree), and progress as periodic lines when stderr is a log rather
than a terminal."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import stat
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import typer

from amrsim.cli import app, main
from amrsim.config import one_off_dataset
from amrsim.console import ProgressLines, jsonable, progress_bar, quiet_library_progress_bars
from tests.helpers import ROOT, cli_env, run_cli

GRAPH = "(w / want-01 :ARG0 (b / boy))"
MISSING = "no_such_dir/missing.tsv"
# options that name files or directories although typed as text: LANG=PATH lists, globs, the config, models
TEXT_PATH_OPTIONS = {"--config", "--file", "--dev", "--test", "--translation", "--translate"}
OUTPUTS = {"--out"}  # written, not read: a missing one is created, so the walk gives one that cannot be


def _leaf_commands(command=None, path=()):
    command = command or typer.main.get_command(app)
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _leaf_commands(sub, (*path, name))
    else:
        yield path, command


def _is_path_option(param) -> bool:
    annotation = str(param.type_descriptor.annotation)
    return bool(param.opts) and param.opts[0].startswith("--") and (
        "Path" in annotation or param.opts[0] in TEXT_PATH_OPTIONS or param.opts[0].endswith(("-dir", "-file")))


def _path_cases():
    cases = []
    for path, command in _leaf_commands():
        for param in command.params:
            # results export with no results to export writes nothing: a bad --out is not an error there
            if _is_path_option(param) and (path, param.opts[0]) != (("results", "export"), "--out"):
                cases.append(pytest.param(path, param.opts[0], id=f"{' '.join(path)} {param.opts[0]}"))
    return cases


def test_the_walk_finds_every_kind_of_path_option():
    found = {(" ".join(p.values[0]), p.values[1]) for p in _path_cases()}
    for case in [("evaluate sts", "--file"), ("evaluate transfer", "--dev"), ("evaluate bucc", "--gold-test"),
                 ("status", "--config"), ("parse", "--model-dir"), ("deploy", "--prefect-file"),
                 ("metrics score", "--out"), ("score", "--out"), ("evaluate bitext", "--src")]:
        assert case in found
    assert len(found) >= 40


def _inputs(tmp_path: Path) -> dict[str, Path]:
    """One small valid file of each kind the commands read."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("sentence1\tsentence2\tscore\tlabel\nthe cat\ta cat\t4.5\tENTAILMENT\n", encoding="utf-8")
    graphs = tmp_path / "graphs.jsonl"
    graphs.write_text(json.dumps({"amr1": GRAPH, "amr2": GRAPH}) + "\n", encoding="utf-8")
    penman = tmp_path / "graphs.txt"
    penman.write_text(GRAPH + "\n", encoding="utf-8")
    ids = tmp_path / "ids.tsv"
    ids.write_text("en-1\tthe cat\n", encoding="utf-8")
    gold = tmp_path / "gold.tsv"  # the one pair of ids.tsv as source and target
    gold.write_text("en-1\ten-1\n", encoding="utf-8")
    sentences = tmp_path / "snt.jsonl"
    sentences.write_text(json.dumps({"snt": "The boy wants.", "amr": GRAPH}) + "\n", encoding="utf-8")
    config = tmp_path / "pipelines.yaml"
    config.write_text((ROOT / "pipelines.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return {"pairs": pairs, "graphs": graphs, "penman": penman, "ids": ids, "gold": gold, "sentences": sentences,
            "config": config, "dir": tmp_path}


def _arguments(command: tuple[str, ...], option: str, files: dict[str, Path], out: Path) -> dict[str, list[str]]:
    """Options that get `command` past its other checks to `option`, the path under test: option -> arguments."""
    pairs, graphs, penman = str(files["pairs"]), str(files["graphs"]), str(files["penman"])
    bucc = {f"--{side}-{split}": [str(files["gold" if side == "gold" else "ids"])] for side in ("src", "tgt", "gold")
            for split in ("train", "test")}
    arguments: dict[tuple[str, ...], dict[str, list[str]]] = {
        ("evaluate", "sts"): {"--encoder": ["minilm"], "--file": [pairs]},
        ("evaluate", "bitext"): {"--encoder": ["minilm"], "--src": [str(files["penman"])],
                                 "--tgt": [str(files["penman"])], "--src-lang": ["en"], "--tgt-lang": ["de"]},
        ("evaluate", "bucc"): {"--encoder": ["minilm"], "--src-lang": ["de"], "--tgt-lang": ["en"], **bucc},
        ("evaluate", "transfer"): {"--encoder": ["minilm"], "--task": ["sick_e"], "--train": [pairs],
                                   "--dev": [f"de={pairs}"], "--test": [f"de={pairs}"]},
        ("evaluate", "aspects"): {"--encoder": ["minilm"], "--dataset": ["d"]},
        ("evaluate", "suite"): {"--encoder": ["minilm"]},
        ("evaluate", "ood"): {"--encoder": ["minilm"]},
        ("score",): {"--file": [pairs]},
        ("parse",): {"--file": [str(files["sentences"])], "--out": [str(out / "parsed.jsonl")],
                     "--backend": ["provided"]},
        ("metrics", "score"): {"--file": [graphs], "--out": [str(out / "scores.parquet")]},
        ("metrics", "corpus"): {"--file": [graphs]},
        ("metrics", "score", "--file2"): {"--file": [penman], "--out": [str(out / "scores.parquet")]},
        ("metrics", "corpus", "--file2"): {"--file": [penman]},
        ("parse", "--translate"): {"--file": [str(files["sentences"])], "--out": [str(out / "parsed.jsonl")],
                                   "--lang": ["de"]},
        ("results", "export"): {"--out": [str(out / "mteb")]},
        ("train",): {"METHOD": ["s3bert"]},
        ("explain",): {"SENTENCE1": ["a"], "SENTENCE2": ["b"]},
        ("query",): {"SQL": ["SELECT 1"]},
        ("deploy",): {"--config": [str(files["config"])]},
    }
    return dict(arguments.get((*command, option), arguments.get(command, {})))


def _missing_value(command: tuple[str, ...], option: str, files: dict[str, Path]) -> tuple[str, str]:
    """(the argument, the path the error must name): inputs that do not exist; for an output, a path inside a
    regular file, which can be neither created nor written."""
    if option in OUTPUTS:
        return str(files["pairs"] / "out"), str(files["pairs"])
    missing = str(files["dir"] / MISSING)
    if option in ("--dev", "--test", "--translation") or (option == "--translate" and command != ("parse",)):
        return f"de={missing}", missing
    return missing, missing


def _prefect_settings_of_this_environment() -> contextlib.AbstractContextManager[object]:
    """Prefect reads its settings from the environment once, when this process first imports it: a command run
    here after another test imported Prefect under another environment must still see this test's
    PREFECT_API_URL, as a new process would."""
    if "prefect.settings" not in sys.modules or "PREFECT_API_URL" not in os.environ:
        return contextlib.nullcontext()
    from prefect.settings import PREFECT_API_URL, temporary_settings

    return temporary_settings({PREFECT_API_URL: os.environ["PREFECT_API_URL"]})


def _run_in_process(args: list[str], capsys) -> tuple[int, str, str]:
    """`amrsim ARGS` through main() in this process: (exit code, stdout, stderr). An exception escaping main() is
    the traceback a user would see."""
    before = dict(os.environ)
    argv = sys.argv
    sys.argv = ["amrsim", *args]
    try:
        with _prefect_settings_of_this_environment():
            main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException as e:  # noqa: BLE001 - reported with the command that let it out
        pytest.fail(f"amrsim {' '.join(args)}: traceback ({type(e).__name__}: {e})")
    finally:
        sys.argv = argv
        os.environ.clear()
        os.environ.update(before)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("command, option", _path_cases())
def test_a_missing_path_is_one_line_naming_it(tmp_path, monkeypatch, capsys, command, option):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # deploy checks it before reading files
    files = _inputs(tmp_path)
    out = tmp_path / "outputs"
    out.mkdir()
    given = _arguments(command, option, files, out)
    value, named = _missing_value(command, option, files)
    given[option] = [value]
    args = list(command)
    for name, values in given.items():
        if name.isupper():  # an argument, not an option
            args += values
        else:
            args += [part for v in values for part in (name, v)]
    code, _, stderr = _run_in_process(args, capsys)
    assert code == 2, (args, code, stderr[-2000:])
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], (args, stderr[-2000:])


# Every path option again, with a path that exists but is not what the option reads: the wrong kind (a directory
# where a file belongs, a file where a directory belongs; the tests run as root, who reads a chmod 000 file, so
# this stands in for an unreadable path), a FIFO (opening one blocks until a writer comes: each run has a time
# limit), and random bytes where a table, a YAML file or an earlier --out file belongs.
DIRECTORY_OPTIONS = {"--model-dir", "--translate"}  # a model directory (or hub id); report --out is written to
# options whose file holds a table, YAML or an earlier output (a plain-text or PENMAN file of random bytes is
# text of unreadable sentences or graphs, which fail row by row); score checks its --model before reading --file,
# and the walk has no trained cross-encoder
CORRUPTIBLE = {"--file", "--train", "--dev", "--test", "--translation", "--config", "--prefect-file", "--out",
               *(f"--{side}-{split}" for side in ("src", "tgt", "gold") for split in ("train", "test"))}
NOT_CORRUPTIBLE = {(("score",), "--file"), (("report",), "--out")}


def _bad_cases():
    cases = []
    for case in _path_cases():
        command, option = case.values
        kinds = ["wrong kind", "fifo"]
        if option in CORRUPTIBLE and (command, option) not in NOT_CORRUPTIBLE:
            kinds += ["corrupt.tsv", "corrupt.parquet"]
        cases += [pytest.param(command, option, kind, id=f"{case.id} {kind}") for kind in kinds]
    return cases


def _bad_value(kind: str, command: tuple[str, ...], option: str, files: dict[str, Path]) -> tuple[str, str]:
    """(the argument, the path the error must name) for a path of `kind` given to `option`."""
    bad = files["dir"] / "bad"
    bad.mkdir()
    if kind == "fifo":
        path = bad / "named_pipe.tsv"
        os.mkfifo(path)
    elif kind == "wrong kind":
        directory = option in DIRECTORY_OPTIONS or (command == ("report",) and option == "--out")
        path = bad / ("a_file" if directory else "a_directory.tsv")
        path.write_text("a file\n") if directory else path.mkdir()
    else:  # random bytes, the same each run
        path = bad / f"random_bytes.{kind.split('.')[1]}"
        path.write_bytes(random.Random(7).randbytes(4096))
    if option in ("--dev", "--test", "--translation") or (option == "--translate" and command != ("parse",)):
        return f"de={path}", str(path)
    return str(path), str(path)


class Blocked(Exception):
    """The command did not end in time: it waits on a FIFO."""


@pytest.mark.parametrize("command, option, kind", _bad_cases())
def test_a_path_of_the_wrong_kind_or_content_is_one_line_naming_it(tmp_path, monkeypatch, capsys, command, option,
                                                                     kind):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    files = _inputs(tmp_path)
    out = tmp_path / "outputs"
    out.mkdir()
    given = _arguments(command, option, files, out)
    value, named = _bad_value(kind, command, option, files)
    given[option] = [value]
    args = [part for name, values in given.items()
            for part in (values if name.isupper() else [p for v in values for p in (name, v)])]
    args = [*command, *args]

    def blocked(signum, frame):
        raise Blocked(f"amrsim {' '.join(args)} still runs after 120 s")

    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(120)
    try:
        code, _, stderr = _run_in_process(args, capsys)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert code == 2, (args, code, stderr[-2000:])
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], (args, stderr[-2000:])
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(named).st_mode)  # still a FIFO: not replaced by a file


@pytest.mark.slow
def test_the_reported_traceback_is_one_line_in_a_real_process(tmp_path):
    proc = run_cli(tmp_path, "evaluate", "sts", "--encoder", "minilm", "--file", "/nonexistent.tsv")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --file /nonexistent.tsv: No such file or directory"


def test_version_prints_the_installed_version():
    proc = subprocess.run([sys.executable, "-m", "amrsim.cli", "--version"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"amrsim {version('amrsim')}\n"


def test_shell_completion_script_completes_amrsim(tmp_path):
    env = {**cli_env(tmp_path), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = subprocess.run([sys.executable, "-m", "amrsim.cli", "--show-completion", "bash"], capture_output=True,
                           text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "_AMRSIM_COMPLETE=complete_bash" in shown.stdout and "complete -o default -F _amrsim_completion amrsim" \
        in shown.stdout
    # what bash runs on <TAB> after `amrsim eval`: the script's protocol, answered by the command itself
    completing = subprocess.run([sys.executable, "-m", "amrsim.cli"], capture_output=True, text=True, timeout=120,
                                env={**env, "_AMRSIM_COMPLETE": "complete_bash", "COMP_WORDS": "amrsim eval",
                                     "COMP_CWORD": "1"})
    assert completing.stdout.split() == ["evaluate"], completing.stderr


def test_json_values_become_json_types():
    import datetime as dt
    from decimal import Decimal

    import numpy as np
    import polars as pl

    frame = pl.DataFrame({"when": [dt.datetime(2024, 5, 1, 12, 30)], "v": [float("nan")]})
    doc = jsonable({"path": Path("/w/x"), "day": dt.date(2024, 5, 1), "n": np.int64(3), "f": np.float32(0.5),
                    "d": Decimal("1.5"), "inf": float("inf"), "rows": frame, "b": b"\x00\xff", "t": (1, 2)})
    assert doc == {"path": "/w/x", "day": "2024-05-01", "n": 3, "f": 0.5, "d": 1.5, "inf": None,
                   "rows": [{"when": "2024-05-01T12:30:00", "v": None}], "b": "00ff", "t": [1, 2]}
    json.dumps(doc, allow_nan=False)  # strict JSON: jq reads it


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_in_a_log_is_a_line_at_most_every_interval():
    log = io.StringIO()  # not a terminal
    now = [0.0]
    lines = ProgressLines(5000, "encode d with minilm", log, every=10.0, clock=lambda: now[0])
    for _ in range(50):  # 100 rows a second for 50 s
        now[0] += 1.0
        lines.advance(100)
    lines.finish()
    printed = log.getvalue().splitlines()
    assert printed[0] == "encode d with minilm: 1000/5000 rows (20%), 10 s"
    assert printed[-1] == "encode d with minilm: 5000/5000 rows (100%), 50 s"
    assert len(printed) == 5  # 10, 20, 30, 40 s and the end


def test_progress_bar_draws_on_a_terminal_and_writes_lines_to_a_log():
    log, terminal = io.StringIO(), FakeTerminal()
    with progress_bar(1000, "parse x", stream=log) as advance:
        advance(1000)
    assert log.getvalue() == "parse x: 1000/1000 rows (100%), 0 s\n"
    with progress_bar(1000, "[/quote] :x:", stream=terminal) as advance:
        advance(500)
    drawn = terminal.getvalue()
    assert " 500/1000" in drawn and "[/quote] :x:" in drawn and "rows" not in drawn  # a bar, not log lines
    assert drawn.endswith("\x1b[2K")  # cleared when the work ends; the description printed literally
    with progress_bar(10, "tiny", stream=log) as advance:
        advance(10)
    assert log.getvalue().count("\n") == 1  # tiny jobs print nothing


def test_library_bars_are_turned_off_only_when_stderr_is_not_a_terminal(monkeypatch):
    from transformers.utils import logging as transformers_logging

    for name in ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE"):
        monkeypatch.delenv(name, raising=False)
    enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.enable_progress_bar()
    assert not quiet_library_progress_bars(FakeTerminal())
    assert "TQDM_DISABLE" not in os.environ and transformers_logging.is_progress_bar_enabled()
    monkeypatch.setenv("TQDM_DISABLE", "0")  # the user's choice stands
    assert quiet_library_progress_bars(io.StringIO())
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" and os.environ["TQDM_DISABLE"] == "0"
    assert not transformers_logging.is_progress_bar_enabled()  # transformers was imported: told directly
    if enabled:
        monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS")
        transformers_logging.enable_progress_bar()


# --json: one document alone on stdout, whatever else the command, a library or a child process prints

ROUTED = '''
import os, subprocess, sys
import typer
from amrsim.cli.common import JsonOpt, emit_json
from amrsim.console import console

app = typer.Typer()

@app.command()
def noisy(json_: JsonOpt = False) -> None:
    print("a print")
    console.print("a rich table")
    os.write(1, b"raw bytes on fd 1\\n")
    subprocess.run(["echo", "a child process"], check=True)
    if json_:
        emit_json({"answer": 42})
    else:
        print("a plain result")

app()
'''


def test_json_routes_every_other_stdout_write_to_stderr(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(ROUTED, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    routed = subprocess.run([sys.executable, str(script), "--json"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert routed.returncode == 0, routed.stderr
    assert json.loads(routed.stdout) == {"answer": 42}
    for chatter in ("a print", "a rich table", "raw bytes on fd 1", "a child process"):
        assert chatter in routed.stderr
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert "a child process" in plain.stdout and "a plain result" in plain.stdout  # without --json: as before


def _warehouse_with_a_dataset(tmp_path, write_tsv):
    from amrsim.config import DatasetConfig
    from amrsim.stages.ingest import ingest_tables
    from amrsim.warehouse import Warehouse

    rows = [["the cat runs", "a dog runs", "4.5"], ["the bird eats", "a fish sleeps", "1.0"],
            ["the red cat", "the blue cat", "3.0"], ["a dog jumps", "a dog jumps", "5.0"]]
    path = write_tsv("d_test.tsv", ["sentence1", "sentence2", "score"], rows)
    wh = Warehouse(tmp_path / "warehouse")
    ds = DatasetConfig(path=str(path), kind="pairs", lang="en",
                       columns={"sentence1": "sentence1", "sentence2": "sentence2", "score": "score"})
    ingest_tables(wh, "d", ds, path, "r1")
    return wh, path


def _json_of(proc: subprocess.CompletedProcess[str]):
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # the whole of stdout is one document


@pytest.mark.slow
def test_status_and_query_json_describe_the_warehouse(tmp_path, write_tsv):
    import shutil

    from amrsim.warehouse.lineage import last_runs

    wh, _ = _warehouse_with_a_dataset(tmp_path, write_tsv)
    status = _json_of(run_cli(tmp_path, "status", "--json"))
    assert status["warehouse"] == str(wh.root)
    assert status["tables"] == [{"table": f"{d}.{t}", "version": wh.version(d, t), "rows": wh.count(d, t),
                                 "failed": wh.count(d, t, status="failed"), "status": "ok"} for d, t in wh.tables()]
    runs = last_runs(wh, 12)
    assert [r["run_id"] for r in status["runs"]] == runs["run_id"].to_list() and status["broken"] == []
    assert status["runs"][0]["started_at"] == runs["started_at"][0].isoformat()

    texts = sorted(wh.read("d", "sentences")["text"].to_list())
    query = _json_of(run_cli(tmp_path, "query", "--json", "--limit", "2",
                             "SELECT text, length(text) AS n FROM d.sentences ORDER BY text"))
    assert query == {"columns": ["text", "n"], "rows": [{"text": t, "n": len(t)} for t in texts[:2]],
                     "truncated": True}
    everything = _json_of(run_cli(tmp_path, "query", "--json", "SELECT text FROM d.sentences ORDER BY text"))
    assert [r["text"] for r in everything["rows"]] == texts and everything["truncated"] is False

    if shutil.which("jq"):  # the way scripts use it
        piped = subprocess.run(f"{sys.executable} -m amrsim.cli status --json | jq -r '.tables[].table'", shell=True,
                               capture_output=True, text=True, cwd=tmp_path, env=cli_env(tmp_path), timeout=300)
        assert piped.stdout.split() == [f"{d}.{t}" for d, t in wh.tables()], piped.stderr[-2000:]


@pytest.mark.slow
def test_evaluate_json_holds_the_stored_results(tmp_path, write_tsv, tiny_model):
    import polars as pl

    wh, path = _warehouse_with_a_dataset(tmp_path, write_tsv)
    encoder = f"hf:{tiny_model}#mean"
    doc = _json_of(run_cli(tmp_path, "evaluate", "sts", "--encoder", encoder, "--file", str(path), "--device",
                           "cpu", "--json"))
    stored = wh.read("eval", "results").filter(pl.col("dataset") == one_off_dataset(path))
    assert doc["command"] == "evaluate sts" and doc["notes"] == []
    expected = stored.select("model", "dataset", "split", "lang_pair", "metric", "n", "value").to_dicts()
    key = lambda r: (r["metric"], r["lang_pair"])  # noqa: E731
    assert sorted(doc["results"], key=key) == sorted(expected, key=key)
    assert {r["metric"] for r in doc["results"]} == {"spearman", "pearson"} and doc["results"][0]["n"] == 4


@pytest.mark.slow
def test_metrics_json_matches_the_computed_scores(tmp_path):
    import polars as pl

    from amrsim.metrics.corpus import corpus_smatch

    graphs = [("(w / want-01 :ARG0 (b / boy))", "(w / want-01 :ARG0 (g / girl))"),
              ("(r / run-01 :ARG0 (d / dog))", "(r / run-01 :ARG0 (d / dog) :manner (q / quick))")]
    file = tmp_path / "pairs.jsonl"
    file.write_text("".join(json.dumps({"amr1": a, "amr2": b}) + "\n" for a, b in graphs), encoding="utf-8")
    corpus = _json_of(run_cli(tmp_path, "metrics", "corpus", "--file", str(file), "--samples", "20", "--json"))
    expected = corpus_smatch([a for a, _ in graphs], [b for _, b in graphs], convention="smatch", seed=0,
                             samples=20, confidence=0.95)
    assert corpus["f1"] == pytest.approx(expected.f1) and corpus["pairs"] == 2
    assert (corpus["f1_low"], corpus["f1_high"]) == pytest.approx((expected.f1_low, expected.f1_high))
    assert (corpus["matched"], corpus["test_triples"], corpus["gold_triples"]) == (expected.matched, expected.n1,
                                                                                   expected.n2)

    out = tmp_path / "scores.parquet"
    scored = _json_of(run_cli(tmp_path, "metrics", "score", "--file", str(file), "--out", str(out), "--aspects",
                              "smatch", "--vectors", "random", "--workers", "1", "--json"))
    written = pl.read_parquet(out)
    assert scored["pairs"] == scored["computed"] == 2 and scored["reused"] == 0 and scored["out"] == str(out)
    assert scored["means"]["smatch_f1"] == pytest.approx(written["smatch_f1"].mean(), abs=1e-4)
    again = _json_of(run_cli(tmp_path, "metrics", "score", "--file", str(file), "--out", str(out), "--aspects",
                             "smatch", "--vectors", "random", "--workers", "1", "--json"))
    assert (again["computed"], again["reused"], again["pairs_per_second"]) == (0, 2, None)


def test_train_json_lists_the_stages_and_models(tmp_path, monkeypatch, capsys):
    """The flow itself (Prefect, Ray, training) is replaced: what is checked is the document made of its summary,
    alone on stdout while the flow's own prints go to stderr."""
    import contextlib
    import logging
    import types

    stages = [{"stage": "refresh", "dataset": "sample_sts", "rows_in": 10, "computed": 0, "status": "ok"},
              {"stage": "train", "dataset": "sample_sts", "model": "s3bert:r9", "status": "ok", "seconds": 1.5,
               "model_dir": tmp_path / "models" / "s3bert" / "r9"}]

    def fake_train(method, pipeline, config, overrides, run_id, **options):
        print(f"flow chatter: training {method} of {pipeline}")
        return stages

    @contextlib.contextmanager
    def no_server(run_dir, label, verbose, stop_note=None):
        yield lambda: None

    monkeypatch.setitem(sys.modules, "flows.train", types.SimpleNamespace(train=fake_train))
    monkeypatch.setattr("amrsim.cli.train.flow_runtime", no_server)
    logger = logging.getLogger("amrsim")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        code, stdout, stderr = _run_in_process(["train", "s3bert", "--config", str(ROOT / "pipelines.yaml"),
                                                "--json"], capsys)
    finally:
        logger.handlers[:], logger.propagate = handlers, propagate
        logger.setLevel(level)
    assert code == 0, stderr[-3000:]
    doc = json.loads(stdout)
    assert "flow chatter: training s3bert" in stderr and "s3bert:r9" not in stderr  # the table is not printed
    assert doc["method"] == "s3bert" and doc["stages"][1]["model_dir"] == str(stages[1]["model_dir"])
    assert doc["models"] == [{"model": "s3bert:r9", "status": "ok", "model_dir": str(stages[1]["model_dir"]),
                              "seconds": 1.5}]


EXIT_SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
import amrsim.cli as cli

out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
worker = threading.Thread(target=lambda: (time.sleep(0.5), (out / "thread").write_text("done")))
worker.start()
sys.argv = ["amrsim", *sys.argv[2:]]
cli.entry()
"""


@pytest.mark.parametrize(("args", "code"), [(["--version"], 0), (["evaluate", "sts", "--encoder", "minilm", "--file",
                                                                   MISSING], 2), (["no-such-command"], 2)])
def test_the_executable_ends_as_python_would_without_cxx_teardown(tmp_path, args, code):
    """entry() leaves with os._exit (pyarrow's thread pool can hang in C++ teardown): the exit code is main()'s, a
    non-daemon thread finishes, atexit handlers run and buffered output arrives, as at a normal interpreter exit."""
    proc = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(tmp_path), *args], capture_output=True, text=True,
                          cwd=tmp_path, env=cli_env(tmp_path), timeout=300)
    assert proc.returncode == code, proc.stderr[-2000:]
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "done"
    if code == 0:
        assert proc.stdout == f"amrsim {version('amrsim')}\n"
    else:
        assert proc.stderr.strip()  # the error line (or click's usage) reached stderr


def test_train_set_applies_to_the_pipeline_it_trains(tmp_path, monkeypatch, capsys):
    """`--set` lands in the pipeline that is trained: the one named by --pipeline (no default_pipeline needed), else
    the method's own recipe pipeline, not the default one."""
    import contextlib
    import logging
    import types

    seen = []

    def fake_train(method, pipeline, config, overrides, run_id, **options):
        from amrsim.config import load_config

        cfg = load_config(config, overrides=overrides, pipeline=pipeline)
        seen.append((pipeline, cfg.project.pipelines[pipeline].description))
        return []

    @contextlib.contextmanager
    def no_server(run_dir, label, verbose, stop_note=None):
        yield lambda: None

    monkeypatch.setitem(sys.modules, "flows.train", types.SimpleNamespace(train=fake_train))
    monkeypatch.setattr("amrsim.cli.train.flow_runtime", no_server)
    config = tmp_path / "pipelines.yaml"
    (tmp_path / "pairs.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n", encoding="utf-8")
    config.write_text("pipelines:\n  first: {description: one}\n  second:\n    description: two\n"
                      "    datasets: {toy: {path: pairs.tsv, kind: pairs}}\n"
                      "    train: [{method: s3bert, params: {datasets: [toy]}}]\n", encoding="utf-8")
    logger = logging.getLogger("amrsim")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        runs = [(["train", "s3bert", "--config", str(config), "--pipeline", "second", "--set", "description=changed"]),
                (["train", "s3bert", "--config", str(ROOT / "pipelines.yaml"), "--set", "description=recipe"])]
        codes = [_run_in_process(args, capsys)[0] for args in runs]
    finally:
        logger.handlers[:], logger.propagate = handlers, propagate
        logger.setLevel(level)
    assert codes == [0, 0] and seen == [("second", "changed"), ("s3bert", "recipe")]
