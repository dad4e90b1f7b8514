"""Pieces the CLI modules share: the --config option and where the warehouse is."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="pipelines.yaml to use")]


def warehouse_root(config: str) -> Path:
    """The config's warehouse root, or ./warehouse when there is no config file."""
    from amrsim.config import load_config

    if Path(config).is_file():
        return load_config(config).warehouse_root
    return Path("warehouse").resolve()
