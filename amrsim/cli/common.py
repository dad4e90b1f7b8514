"""Pieces the CLI modules share: the --config option, where the warehouse is, and --out files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from amrsim.errors import AmrsimError, ConfigError

ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="pipelines.yaml to use")]


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
    from amrsim.files import atomic_write

    try:
        atomic_write(out, write)
    except OSError as e:
        raise AmrsimError(f"--out {out}: cannot write ({e.strerror or e})") from None
