"""Errors that reach the user as one line: each names the file and line, or the pipeline and key."""

from __future__ import annotations


class AmrsimError(Exception):
    """Base class: the CLI prints str(error) on one line and exits non-zero."""

    exit_code = 2  # bad input or configuration


class ConfigError(AmrsimError):
    """pipelines.yaml is malformed or names something that does not exist."""


class InputError(AmrsimError):
    """An input file cannot be read as declared (encoding, header, field count, empty)."""

    def __init__(self, path: str, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class WarehouseError(AmrsimError):
    """A table is missing, has the wrong schema, or a name would escape the warehouse root."""


class RunFailed(AmrsimError):
    """An unexpected error inside a pipeline run: one line on the terminal, the traceback in the run's log."""

    exit_code = 1
