"""Pieces the CLI modules share: the --config option, --set overrides, Prefect's environment, where the warehouse
is, --out files, and evaluation scores as a table. Library modules are imported inside the functions: they load
polars and pydantic, which `amrsim --help` does not need."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from amrsim.console import console, frame_table
from amrsim.errors import AmrsimError, ConfigError
from amrsim.files import atomic_write

ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="pipelines.yaml to use")]


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


def refuse_out_over_input(out: Path, **inputs: Path | None) -> None:
    """An --out that is one of the inputs (same path, a symlink or a hard link to it) would replace the input:
    refused before anything is read or written. `inputs` maps option names (file -> --file) to paths."""
    if not out.exists():
        return
    for option, path in inputs.items():
        if path is not None and path.exists() and os.path.samefile(path, out):
            raise ConfigError(f"--out {out} is the same file as --{option.replace('_', '-')} {path}; "
                              f"write the output to another file")


def write_out(out: Path, write: Callable[[Path], object]) -> None:
    """Write an --out file atomically (`amrsim.files.atomic_write`); a failure is one line naming the file, and
    leaves no temporary file."""
    try:
        atomic_write(out, write)
    except OSError as e:
        raise AmrsimError(f"--out {out}: cannot write ({e.strerror or e})") from None


def shown_values(frame, columns: list[str]):
    """`columns` as text with 2 decimals; a null or NaN (a correlation of constant input) as `undefined`."""
    import polars as pl

    from amrsim.evaluate import UNDEFINED

    return frame.with_columns(pl.col(c).cast(pl.Float64).fill_nan(None)
                              .map_elements(lambda v: f"{v:.2f}", return_dtype=pl.String).fill_null(UNDEFINED)
                              for c in columns if c in frame.columns)


def print_scores(rows, title: str) -> None:
    """Result rows (eval/results columns) as one table, values to 2 decimals."""
    if not rows.height:
        console.print(f"{title}: no results")
        return
    shown = shown_values(rows.select("model", "dataset", "split", "lang_pair", "metric", "n", "value"), ["value"])
    console.print(frame_table(shown.sort("dataset", "lang_pair", "metric", "model"), title))
