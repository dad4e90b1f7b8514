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


class UnsafeFile(AmrsimError):
    """A path amrsim writes under the warehouse or the run directory holds something amrsim did not make there (a
    symlink, FIFO, device, directory, a hard-linked or another user's file): refused, nothing written through it."""

    def __init__(self, path: object, what: str):
        self.path = str(path)
        super().__init__(f"{self.path}: refused to write: it is {what}, not a file amrsim made; amrsim never writes "
                         "through links or into special files under the warehouse or run directory; remove it (and "
                         "find out who put it there), then run again")
