"""`--out` files: a command never writes over its own input (same path, symlink or hard link), over a file that is
not a regular file (a device, a FIFO, a socket) or over a file it did not write itself, and a write that fails
(disk full, file too large, no permission, read-only) is one line and leaves neither a half-written file nor its
temporary file behind."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from amrsim.errors import UnsafeFile
from amrsim.files import atomic_write
from tests.helpers import cli_env, one_line_error, run_cli

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
    with pytest.raises(IsADirectoryError):  # a path the user named (--out): the rename itself fails
        atomic_write(tmp_path / "d", lambda tmp: tmp.write_text("x"), own=False)
    with pytest.raises(UnsafeFile, match="a directory"):  # amrsim's own file: refused before anything is written
        atomic_write(tmp_path / "d", lambda tmp: tmp.write_text("x"))
    assert target.read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "t.txt"]


# One writer for every --out: a regular file or nothing, only files the command wrote, every failure one line

OUT_COMMANDS = {  # command -> (its arguments before --file, a valid input, the suffix of its --out)
    "metrics score": (METRICS, _graph_pairs, ".parquet"),
    "parse": (PARSE, _sentences, ".jsonl"),
    "score": (("score",), _sentences, ".tsv"),  # --out is checked before the model is looked for
}


def _special_file(kind: str, tmp_path: Path) -> Path:
    """A file that is not a regular file, inside tmp_path: a character device (a copy of /dev/null's node: the real
    one must never be at stake), a FIFO or a listening Unix socket."""
    path = tmp_path / kind
    if kind == "character device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root (CAP_MKNOD)")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()  # the socket file stays
    return path


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["character device", "fifo", "socket"])
@pytest.mark.parametrize("command", list(OUT_COMMANDS))
def test_out_that_is_not_a_regular_file_is_refused_and_left_as_it_is(tmp_path, kind, command):
    arguments, make_input, _ = OUT_COMMANDS[command]
    special = _special_file(kind, tmp_path)
    before = os.lstat(special)
    line = one_line_error(run_cli(tmp_path, *arguments, "--file", str(make_input(tmp_path)), "--out", str(special),
                                  timeout=120))
    assert f"--out {special}: cannot write (is a {kind.replace('fifo', 'FIFO')}" in line
    after = os.lstat(special)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino)


def _foreign_file(suffix: str, path: Path) -> bytes:
    """A file of the --out's format that amrsim did not write."""
    if suffix == ".parquet":
        import polars as pl

        pl.DataFrame({"key": ["k"], "line": [1], "status": ["ok"]}).write_parquet(path)  # even the result columns
    else:
        path.write_text('{"id": 1, "text": "notes"}\n' if suffix == ".jsonl" else "sentence1\tsentence2\tscore\n")
    return path.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("command", list(OUT_COMMANDS))
def test_out_that_the_command_did_not_write_is_never_replaced(tmp_path, command):
    arguments, make_input, suffix = OUT_COMMANDS[command]
    other = tmp_path / f"other{suffix}"
    before = _foreign_file(suffix, other)
    line = one_line_error(run_cli(tmp_path, *arguments, "--file", str(make_input(tmp_path)), "--out", str(other)))
    assert line.startswith(f"error: --out {other}: exists and is not a ")
    assert f"of earlier results of amrsim {command};" in line
    assert other.read_bytes() == before


@pytest.mark.slow
def test_parse_replaces_its_own_earlier_output_and_an_empty_file(tmp_path):
    source = _sentences(tmp_path)
    out = tmp_path / "parsed.jsonl"
    out.touch()
    for _ in range(2):  # an empty file, then its own output
        proc = run_cli(tmp_path, *PARSE, "--file", str(source), "--out", str(out))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == ["ok"]


def _run_main(args: list[str], capsys) -> tuple[int, str]:
    """`amrsim ARGS` through main() in this process (so a test can make a write fail): (exit code, stderr)."""
    from amrsim.cli import main

    argv, sys.argv = sys.argv, ["amrsim", *args]
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = argv
    return code, capsys.readouterr().err


FAILURES = [errno.ENOSPC, errno.EFBIG, errno.EACCES, errno.EROFS]


@pytest.mark.parametrize("error", FAILURES, ids=errno.errorcode.get)
def test_metrics_score_write_failure_is_one_line_keeping_the_earlier_results(tmp_path, monkeypatch, capsys, error):
    import polars as pl

    source = _graph_pairs(tmp_path)
    out = tmp_path / "scores.parquet"
    args = [*METRICS, "--file", str(source), "--out", str(out)]
    assert _run_main(args, capsys)[0] == 0
    earlier = out.read_bytes()
    source.write_text(source.read_text() + json.dumps({"amr1": GRAPH, "amr2": "(b / boy)"}) + "\n")

    def fails_half_way(frame, path, **options):  # as polars reports an I/O error: its own exception, errno in text
        Path(path).write_bytes(b"PAR1 half a file")
        raise pl.exceptions.ComputeError(f"parquet: underlying IO error: {os.strerror(error)} (os error {error})")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", fails_half_way)
    code, stderr = _run_main(args, capsys)
    assert code == 2 and stderr == f"error: --out {out}: cannot write ({os.strerror(error)})\n"
    assert out.read_bytes() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([source.name, out.name])


@pytest.mark.parametrize("error", FAILURES, ids=errno.errorcode.get)
def test_parse_write_failure_is_one_line_and_leaves_no_file(tmp_path, monkeypatch, capsys, error):
    source = _sentences(tmp_path)
    out = tmp_path / "parsed.jsonl"

    def refused(src, dst):
        raise OSError(error, os.strerror(error), str(dst))

    monkeypatch.setattr("amrsim.files.os.replace", refused)  # the temporary file is written, its rename fails
    code, stderr = _run_main([*PARSE, "--file", str(source), "--out", str(out)], capsys)
    assert code == 2 and stderr == f"error: --out {out}: cannot write ({os.strerror(error)})\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name]


LIMITED = """
import resource, runpy, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
sys.argv = ["amrsim", *sys.argv[2:]]
runpy.run_module("amrsim.cli", run_name="__main__")
"""


@pytest.mark.slow
def test_an_out_larger_than_the_file_size_limit_is_one_line_and_no_file(tmp_path):
    """EFBIG for real: the process may write no file larger than 4 kB, and the scores of 300 pairs are larger."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"amr1": GRAPH, "amr2": f"(b / boy-{i})"}) + "\n" for i in range(300)))
    out = tmp_path / "scores.parquet"
    proc = subprocess.run([sys.executable, "-c", LIMITED, "4096", *METRICS, "--file", str(pairs), "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**cli_env(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
    assert one_line_error(proc) == f"error: --out {out}: cannot write ({os.strerror(errno.EFBIG)})"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "run") == [pairs.name]
