"""Pieces the CLI modules share: the --config option, --json output, --set overrides, Prefect's environment, where
the warehouse is, --out files, and evaluation scores as a table or JSON. Library modules are imported inside the
functions: they load polars and pydantic, which `amrsim --help` does not need."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Annotated, Any

import typer
import yaml

from amrsim.console import console, frame_table, print_json
from amrsim.errors import AmrsimError, ConfigError
from amrsim.files import LINK_LOOP, atomic_write, file_kind, write_failure_reason


def _config_given_exists(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """A --config named on the command line must exist (the default may be absent: ./warehouse is used). A
    mistyped path would otherwise read or write another warehouse without a word."""
    source = ctx.get_parameter_source(param.name or "config")
    if not ctx.resilient_parsing and source is not None and source.name != "DEFAULT":
        input_path(value, "--config")
    return value


ConfigOpt = Annotated[str, typer.Option("--config", "-c", callback=_config_given_exists, help="pipelines.yaml to use")]

_json_stdout: IO[str] | None = None  # the real stdout while --json routes everything else to stderr


def _route_stdout_to_stderr(ctx: typer.Context, value: bool) -> bool:
    """--json: stdout carries the JSON document and nothing else. Until the command ends, whatever else is written
    to stdout (tables, notes, a library's or a child process's prints) goes to stderr, at the file descriptor."""
    global _json_stdout
    if not value or ctx.resilient_parsing or _json_stdout is not None:
        return value
    sys.stdout.flush()
    real = sys.stdout
    try:
        fd, err_fd = real.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (a test runner's buffer)
        _json_stdout, sys.stdout = real, sys.stderr
        saved = None
    else:
        saved = os.dup(fd)
        os.dup2(err_fd, fd)
        _json_stdout = os.fdopen(saved, "w", encoding="utf-8")

    def restore() -> None:
        global _json_stdout
        sys.stdout.flush()
        if saved is None:
            sys.stdout = real
        else:
            _json_stdout.flush()  # type: ignore[union-attr]
            os.dup2(saved, fd)
            _json_stdout.close()  # type: ignore[union-attr]
        _json_stdout = None

    ctx.call_on_close(restore)
    return value


JsonOpt = Annotated[bool, typer.Option("--json", callback=_route_stdout_to_stderr,
                                       help="print one JSON document on stdout for scripts (fields: "
                                            "docs/operations.md); messages go to stderr")]


def emit_json(document: Any) -> None:
    """The command's JSON document on stdout (the real one while --json routes other output to stderr)."""
    print_json(document, _json_stdout or sys.stdout)


def json_requested(argv: list[str] | None = None) -> bool:
    """Whether the command line (`sys.argv[1:]` by default) asks for --json (before a `--` that ends the options)."""
    argv = sys.argv[1:] if argv is None else argv
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def report_error(message: str, exit_code: int) -> None:
    """One `error:` line on stderr (secrets masked, control characters escaped); with --json also `{"error",
    "exit_code"}` on stdout, so a script reading stdout learns why there is no document rather than reading nothing.
    The CLI's `fail` then exits; a thread that ends the process itself (a run whose Prefect server died) calls this."""
    from amrsim.console import printable
    from amrsim.secrets import redact

    line = printable(redact(message))
    print(f"error: {line}", file=sys.stderr, flush=True)
    if json_requested():
        emit_json({"error": line, "exit_code": exit_code})  # the real stdout, also when a failing option left it routed


def parse_overrides(pairs: list[str] | None) -> dict[str, Any]:
    """`--set key=value` items as a dict of YAML values; a malformed item is a ConfigError naming it."""
    from amrsim.config import load_yaml_value

    out: dict[str, Any] = {}
    for item in pairs or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set '{item}': expected key=value (e.g. encode.batch_size=32)")
        try:
            out[key.strip()] = load_yaml_value(value)
        except yaml.YAMLError as e:
            raise ConfigError(f"--set '{item}': the value is not valid YAML ({str(e).splitlines()[0]})") from None
    return out


def prefect_env(run_dir: Path) -> None:
    """Prefect state under the project's run dir; settings for the temporary server unless one is configured."""
    os.environ.setdefault("PREFECT_HOME", str(run_dir / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)  # its SQLite file needs the directory
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # a local Ray's C++ crash handler would take SIGTERM from this process and abort it (exit 134) before the run
    # could stop its server and workers
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    # Prefect's 20 s default is too short on a busy 2-core machine (its server imports ~10 s of modules)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # the temporary server lives for one run: its UI and scheduling services only slow its start
    for service in ("UI", "SERVICES_SCHEDULER", "SERVICES_LATE_RUNS", "SERVICES_FOREMAN", "SERVICES_TRIGGERS",
                    "SERVICES_PAUSE_EXPIRATIONS", "SERVICES_CANCELLATION_CLEANUP", "SERVICES_REPOSSESSOR"):
        os.environ.setdefault(f"PREFECT_SERVER_{service}_ENABLED", "false")


def warehouse_root(config: str) -> Path:
    """The config's warehouse root, or ./warehouse when there is no config file."""
    from amrsim.config import load_config

    if Path(config).is_file():
        return load_config(config).warehouse_root
    return Path("warehouse").resolve()


def input_path(path: Path | str, option: str, directory: bool = False) -> Path:
    """The one check of every path a command reads, before it is opened: it exists and is a regular file (a
    directory where the option names one) that can be read. A FIFO, device or socket is refused: opening a FIFO
    blocks until another process writes to it, and a device never ends. A symlink is judged by what it points to."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError as e:  # missing, a parent that is a file, a loop of links, ...
        reason = LINK_LOOP if e.errno == errno.ELOOP else e.strerror or type(e).__name__
        raise ConfigError(f"{option} {path}: {reason}") from None
    wanted = "a directory" if directory else "a regular file"
    if file_kind(mode) != wanted:
        raise ConfigError(f"{option} {path}: is {file_kind(mode)}, not {wanted}")
    if not os.access(path, os.R_OK | (os.X_OK if directory else 0)):
        raise ConfigError(f"{option} {path}: permission denied")
    return path


# What each command writes to --out, and how a file it wrote is recognised: Parquet files carry the command in
# their key-value metadata (OUT_MARKER); a JSONL or TSV output is recognised by its first line, whose columns
# no other file is likely to start with. Only such a file (or an empty one) is replaced.
OUT_MARKER = "amrsim.command"
OUT_FORMATS: dict[str, tuple[str, tuple[str, ...]]] = {
    "metrics score": ("parquet", ()),
    "parse": ("jsonl", ("snt", "amr", "status", "error")),
    "score": ("tsv", ("sentence1", "sentence2", "prediction")),
}


def out_metadata(command: str) -> dict[str, str]:
    """Parquet key-value metadata that marks a file as `command`'s --out."""
    return {OUT_MARKER: command}


def _written_by(out: Path, command: str) -> bool:
    """Whether an existing --out holds `command`'s earlier output (OUT_FORMATS)."""
    fmt, columns = OUT_FORMATS[command]
    if fmt == "parquet":
        import polars as pl

        try:
            return pl.read_parquet_metadata(out).get(OUT_MARKER) == command
        except (pl.exceptions.PolarsError, OSError, ValueError):  # not Parquet, truncated, unreadable
            return False
    with open(out, "rb") as f:
        first = f.readline(1 << 16).decode("utf-8", errors="replace").rstrip("\r\n")
    if fmt == "jsonl":
        try:
            record = json.loads(first)
        except ValueError:
            return False
        return isinstance(record, dict) and tuple(record)[:len(columns)] == columns
    return tuple(first.split("\t"))[:len(columns)] == columns


def check_out(out: Path, command: str, **inputs: Path | None) -> None:
    """Before anything is read or computed: an --out that cannot be written (not a regular file: a directory, a
    device, a FIFO, a socket; in a directory that does not exist; not writable) is refused; so is an existing file
    that `command` did not write (OUT_FORMATS), and one that is one of the inputs (same path, a symlink or a hard
    link to it), which would replace the input. `inputs` maps option names (file -> --file) to paths."""
    parent = out.absolute().parent
    try:
        mode = out.stat().st_mode  # through a symlink: a link to /dev/null is a device
    except FileNotFoundError:
        mode = None
    except OSError as e:  # a parent that is a file, a loop of links
        raise AmrsimError(f"--out {out}: cannot write ({e.strerror or e})") from None
    if mode is not None and not stat.S_ISREG(mode):
        what = file_kind(mode)
        reason = "is a directory" if what == "a directory" else f"is {what}, not a regular file"
        raise AmrsimError(f"--out {out}: cannot write ({reason}); --out must be a new or earlier {command} "
                          f"output file")
    problem = (f"{parent} does not exist" if not parent.exists() else
               f"{parent} is not a directory" if not parent.is_dir() else
               "permission denied" if not os.access(parent, os.W_OK) or (mode and not os.access(out, os.W_OK))
               else None)
    if problem:
        raise AmrsimError(f"--out {out}: cannot write ({problem})")
    if mode is None:
        return
    for option, path in inputs.items():
        if path is not None and path.exists() and os.path.samefile(path, out):
            raise ConfigError(f"--out {out} is the same file as --{option.replace('_', '-')} {path}; "
                              f"write the output to another file")
    if out.stat().st_size and not _written_by(out, command):
        fmt = OUT_FORMATS[command][0]
        raise ConfigError(f"--out {out}: exists and is not a {'Parquet' if fmt == 'parquet' else fmt.upper()} file "
                          f"of earlier results of amrsim {command}; remove it or write to another file")


def write_out(out: Path, write: Callable[[Path], object]) -> None:
    """Write an --out file atomically (`amrsim.files.atomic_write`): a failure of the file system (disk full, file
    too large, no permission, read-only) is one line naming the file, and leaves neither a partial nor a temporary
    file; the previous --out, if any, is left as it was."""
    try:
        atomic_write(out, write, own=False)  # a link the user named as --out is replaced, as `mv` would
    except Exception as e:
        if (reason := write_failure_reason(e, out)) is None:
            raise
        raise AmrsimError(f"--out {out}: cannot write ({reason})") from None


def shown_values(frame, columns: list[str]):
    """`columns` as text with 2 decimals; a null or NaN (a correlation of constant input) as `undefined`."""
    import polars as pl

    from amrsim.evaluate import UNDEFINED

    return frame.with_columns(pl.col(c).cast(pl.Float64).fill_nan(None)
                              .map_elements(lambda v: f"{v:.2f}", return_dtype=pl.String).fill_null(UNDEFINED)
                              for c in columns if c in frame.columns)


RESULT_FIELDS = ("model", "dataset", "split", "lang_pair", "metric", "n", "value")


def evaluation_document(command: str, rows, notes: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """The --json document of an evaluation: its eval/results rows (RESULT_FIELDS; values x100 as stored, an
    undefined correlation as null) and the notes a table would be followed by."""
    records = rows.select(*RESULT_FIELDS).to_dicts() if rows is not None and rows.height else []
    return {"command": command, "results": records, **extra, "notes": list(notes or [])}


def print_scores(rows, title: str) -> None:
    """Result rows (eval/results columns) as one table, values to 2 decimals."""
    if not rows.height:
        console.print(f"{title}: no results")
        return
    shown = shown_values(rows.select("model", "dataset", "split", "lang_pair", "metric", "n", "value"), ["value"])
    console.print(frame_table(shown.sort("dataset", "lang_pair", "metric", "model"), title))
