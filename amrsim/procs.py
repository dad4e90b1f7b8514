"""Child processes that die with the CLI, and a stop on SIGINT/SIGTERM that takes the whole process tree with it
(a temporary server, Ray, process pools) within seconds, whatever the main thread is doing."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

PR_SET_PDEATHSIG = 1  # linux/prctl.h
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _load_prctl() -> Callable[..., int] | None:
    # resolved before any fork: a child between fork and exec must not import or dlopen
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc.prctl


_PRCTL = _load_prctl()


def parent_death_signal_supported() -> bool:
    return _PRCTL is not None


def _die_with(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: the kernel sends the child SIGKILL when its parent dies, even by SIGKILL (Linux); a parent that
    died before the prctl took effect is caught by the getppid check."""

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def die_with_parent(parent_pid: int) -> None:
    """Called in a child (a worker pool's initializer): it never outlives `parent_pid`, even one killed with
    SIGKILL (Linux; elsewhere a no-op)."""
    _die_with(parent_pid)()


def spawn_tied(cmd: list[str], env: dict[str, str], stdout: IO[Any] | int | None = None,
               stderr: IO[Any] | int | None = None, cwd: str | Path | None = None) -> subprocess.Popen[bytes]:
    """Start `cmd` in its own process group (a terminal's Ctrl-C reaches only this process, which stops it in order)
    with a parent-death signal (it never outlives this process, even one killed with SIGKILL)."""
    return subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, cwd=cwd,
                            process_group=0, preexec_fn=_die_with(os.getpid()))


# --- the process tree, read from /proc (psutil is not a dependency) ---

def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time in clock ticks) of `pid`, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), fields[0], int(fields[19])


def descendants(pid: int) -> set[tuple[int, int]]:
    """(pid, start time) of every live descendant of `pid`; the start time tells a reused pid apart."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] != "Z":
                children.setdefault(stat[0], []).append((int(entry), stat[2]))
    found: set[tuple[int, int]] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child[0])
    return found


def alive(proc: tuple[int, int]) -> bool:
    """Still running (a zombie is not: it has exited and only awaits its parent's wait)."""
    stat = _stat(proc[0])
    return stat is not None and stat[2] == proc[1] and stat[1] != "Z"


def _signal_all(procs: set[tuple[int, int]], sig: int) -> None:
    for proc in procs:
        if alive(proc):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc[0], sig)


def kill_tree(root: int, grace: float, force: threading.Event | None = None) -> int:
    """SIGTERM every descendant of `root`, SIGKILL what is left after `grace` seconds (at once when `force` is set);
    processes started meanwhile, or orphaned by a parent that died first, are caught too. Returns how many."""
    seen = descendants(root)
    _signal_all(seen, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not (force and force.is_set()):
        seen |= descendants(root)
        _signal_all({p for p in seen if alive(p)}, signal.SIGTERM)
        if not any(alive(p) for p in seen):
            return len(seen)
        time.sleep(0.05)
    for _ in range(50):  # SIGKILL cannot be refused; the loop covers children forked until the last moment
        seen |= descendants(root)
        left = {p for p in seen if alive(p)}
        if not left:
            break
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.02)
    return len(seen)


class SignalStop:
    """On the first SIGINT/SIGTERM: report, stop the process tree (grace, then SIGKILL), exit 128+signal. A second
    signal skips the grace. The work is done by a thread woken through the signal wakeup fd, so it runs at once even
    while the main thread is inside a long C call, and whatever Python handler a library swapped in (Prefect raises
    its own exception on SIGTERM) runs as well but cannot delay the exit."""

    def __init__(self, grace: float = 3.0, announce: Callable[[int], None] | None = None,
                 before_exit: Callable[[int, int], None] | None = None):
        self.grace = grace
        self.announce = announce  # first signal, before stopping anything: tell the user
        self.before_exit = before_exit  # (signal, processes stopped): last words
        self._force = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)
        self._previous: dict[int, Any] = {}
        self._previous_fd = -1

    def _handler(self, signum: int, frame: Any) -> None:
        # the C-level handler already wrote the signal to the wakeup fd, unless someone replaced it since
        old = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        if old != self._write.fileno():
            with contextlib.suppress(OSError):
                self._write.send(bytes([signum]))

    def _watch(self) -> None:
        while True:
            try:
                data = self._read.recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum not in STOP_SIGNALS:
                    continue
                if not self._begin():
                    self._force.set()  # a second Ctrl-C is never ignored: no more grace
                    continue
                threading.Thread(target=self._stop, args=(signum,), daemon=True, name="amrsim-stop").start()

    def _begin(self) -> bool:
        """Whether this caller starts the stop (False: one is under way)."""
        with self._lock:
            if self._stopping.is_set():
                return False
            self._stopping.set()
            return True

    def abort(self, code: int, last_words: Callable[[int], None]) -> None:
        """From any thread: stop the process tree as a signal does (grace, then SIGKILL), call `last_words(processes
        stopped)` and exit with `code`, whatever the main thread is doing; a no-op while a stop is under way."""
        if self._begin():
            threading.Thread(target=self._end, args=(code, None, last_words), daemon=True, name="amrsim-stop").start()

    def _stop(self, signum: int) -> None:
        self._end(128 + signum, (lambda: self.announce(signum)) if self.announce else None,
                  (lambda stopped: self.before_exit(signum, stopped)) if self.before_exit else None)

    def _end(self, code: int, announce: Callable[[], None] | None, before_exit: Callable[[int], None] | None) -> None:
        try:
            if announce:
                announce()
            # killing the children breaks what waits on them (a process pool's manager thread raises): the process
            # is exiting, so those errors are consequences of the stop, not news for the terminal
            threading.excepthook = lambda args: None
            stopped = kill_tree(os.getpid(), self.grace, self._force)
            if before_exit:
                before_exit(stopped)
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
        finally:
            os._exit(code)  # the main thread may be anywhere (a Prefect API retry, a C call): do not wait for it

    def __enter__(self) -> SignalStop:
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread may set signal handlers; a caller in another thread keeps its own
        self._previous_fd = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handler)
        threading.Thread(target=self._watch, daemon=True, name="amrsim-signals").start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stopping.is_set():  # the main thread got here first (Prefect turns SIGTERM into an exception)
            threading.Event().wait()  # the stop thread ends the process with the signal's exit code
        if self._previous:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(self._previous_fd)
        self._write.close()  # ends the watcher thread
        self._read.close()

