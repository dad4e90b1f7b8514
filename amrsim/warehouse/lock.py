"""One writer per table at a time: an exclusive `flock` on `<root>/.locks/<dataset>.<table>.lock`, held while a
writer checks which keys a table has and commits the rest. One training per run directory likewise: `run_lock` on
`<models root>/.locks/<method>.<run id>.lock`, held for the whole training. The kernel drops the lock when its
holder exits (even on SIGKILL), so a crashed run never leaves a stale lock; the file only records who holds it, for
the busy message. A lock file is amrsim's own (`amrsim.files.open_own`): one that is a link or not a regular file of
this user is refused, never truncated."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from amrsim.errors import WarehouseError
from amrsim.files import open_own, own_dir
from amrsim.secrets import redact

LOCK_DIR = ".locks"
LOCK_TIMEOUT = 600.0  # seconds a writer waits for another's commit: longer than any single commit takes
log = logging.getLogger(__name__)
_held = threading.local()  # lock paths this thread holds -> depth: a writer may re-enter its own table's lock


class TableBusy(WarehouseError):
    """Another process held a table's lock for longer than the writer would wait."""


class RunBusy(WarehouseError):
    """Another training holds the run directory (same method and run id)."""


def lock_path(root: Path, dataset: str, table: str) -> Path:
    return root / LOCK_DIR / f"{dataset}.{table}.lock"


def holder(path: Path, name: str, what: str = "table") -> str:
    """Who holds the lock on `what` `name` (a table, a run), as the holder recorded it."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return (f"another run (pid {info['pid']}, host {info['host']}, command `{info['command']}`) "
                f"holds {what} '{name}' since {info['since']}")
    except (OSError, ValueError, KeyError, TypeError):  # the holder is writing its record right now
        return f"another run holds {what} '{name}'"


def _record(fd: int) -> None:
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "python"
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": (redact(command) or "")[:200],
            "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)


@contextmanager
def table_lock(root: Path, dataset: str, table: str, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold `dataset/table`'s write lock; waits up to `timeout` seconds for another holder, then raises TableBusy."""
    with exclusive(lock_path(root, dataset, table), f"{dataset}/{table}", "table", timeout, TableBusy):
        yield


def run_lock_path(models_root: Path, method: str, run_id: str) -> Path:
    return Path(models_root) / LOCK_DIR / f"{method}.{run_id}.lock"


@contextmanager
def run_lock(models_root: Path, method: str, run_id: str, timeout: float = 0.0) -> Iterator[None]:
    """Hold run `method:run_id`'s lock for a whole training. By default no wait: a training takes minutes to hours,
    and a second one of the same run id could only find the run finished or resume what the first left: RunBusy."""
    with exclusive(run_lock_path(models_root, method, run_id), f"{method}:{run_id}", "run", timeout, RunBusy):
        yield


@contextmanager
def exclusive(path: Path, name: str, what: str, timeout: float, busy: type[WarehouseError]) -> Iterator[None]:
    """Hold the `flock` on `path` (re-entrant in one thread); waits up to `timeout` seconds for another holder of
    `what` `name`, then raises `busy` naming the holder."""
    depth: dict[str, int] = _held.__dict__.setdefault("depth", {})
    if depth.get(str(path)):
        depth[str(path)] += 1
        try:
            yield
        finally:
            depth[str(path)] -= 1
        return
    own_dir(path.parent)  # a linked .locks would put the locks (and their truncation) elsewhere
    fd = open_own(path, os.O_RDWR)  # a link, FIFO, device, hard-linked or foreign file there: UnsafeFile
    try:
        deadline, pause, warned = time.monotonic() + timeout, 0.02, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    waited = f"waited {timeout:.0f} s for it" if timeout > 0 else "not waiting for it"
                    raise busy(f"busy: {holder(path, name, what)}; {waited} (lock file {path})") from None
                if not warned:
                    log.warning("busy: %s; waiting up to %.0f s", holder(path, name, what), timeout)
                    warned = True
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
        _record(fd)
        depth[str(path)] = 1
        try:
            yield
        finally:
            depth.pop(str(path), None)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
