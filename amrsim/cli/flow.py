"""Running a Prefect flow from the CLI (`amrsim run`, `amrsim train`): Prefect's settings, a temporary server that
dies with the CLI, Prefect's logs in <run_dir>/logs/prefect.log, one-line errors, and a stop on Ctrl-C/SIGTERM that
takes the server and workers with it, or on the server's death, which ends the run with one line within seconds."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer

from amrsim.cli.common import prefect_env, report_error
from amrsim.errors import AmrsimError, RunFailed
from amrsim.files import open_own, own_dir

VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Prefect's logs on the terminal instead of "
                                                                  "<run_dir>/logs/prefect.log")]


@contextlib.contextmanager
def flow_runtime(run_dir: Path, label: str, verbose: bool,
                 stop_note: Callable[[], str | None] | None = None) -> Iterator[Callable[[], None]]:
    """Around a flow call: yields `ready()`, to call once the flows are imported (the server boots meanwhile) and
    before the flow runs. Errors come out as one AmrsimError line naming the log; the traceback goes to the log.
    `stop_note()`: what the stop message adds after a Ctrl-C/SIGTERM (how to continue), or None."""
    from amrsim.procs import SignalStop
    from flows.runtime import TemporaryServer, drain_prefect_logs, log_prefect_to_file

    prefect_env(run_dir)
    log_path = run_dir / "logs" / "prefect.log"
    own_dir(log_path.parent)
    log_fd = open_own(log_path, os.O_WRONLY | os.O_APPEND)  # a link there is refused: Prefect appends by name too
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_SETTINGS_PATH", str(log_prefect_to_file(log_path)))
    command = label.split()[1] if " " in label else label

    def stopping(signum: int) -> None:
        print(f"\namrsim {command}: {signal.Signals(signum).name} received, stopping (again to force)",
              file=sys.stderr, flush=True)

    def note() -> str:
        try:
            text = stop_note() if stop_note is not None else None
        except Exception:  # noqa: BLE001 - the stop message must print whatever the note's lookup meets
            text = None
        return f"; {text}" if text else ""

    def stopped(signum: int, processes: int) -> None:
        print(f"amrsim {command}: stopped by {signal.Signals(signum).name} ({processes} child processes ended); "
              f"tables keep their last whole commit, and a rerun computes only what is missing" + note(),
              file=sys.stderr, flush=True)

    # Ctrl-C / SIGTERM: this process, its server and its workers end within seconds (exit 130 / 143)
    with SignalStop(announce=stopping, before_exit=stopped) as stop, os.fdopen(log_fd, "ab") as log:
        log.write(f"\n=== {label} (pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')})\n".encode())
        log.flush()
        server = None
        if not os.environ.get("PREFECT_API_URL"):  # a configured server is used as is
            server = TemporaryServer(log, float(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"]))
            server.start()

        def server_died(code: int) -> None:  # the watch thread: the run cannot report to Prefect any more
            assert server is not None
            try:
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
            except ValueError:
                how = f"ended by signal {-code}"

            def last_words(processes: int) -> None:
                ended = f" ({processes} child processes ended)" if processes else ""
                report_error(f"the temporary Prefect server ({server.api_url}) stopped during the run ({how}; its "
                             f"output is in {log_path}), so amrsim {command} stopped too{ended}: tables keep their "
                             f"last whole commit (each stage commits atomically), and the same command again computes "
                             f"only what is missing{note()}", RunFailed.exit_code)

            stop.abort(RunFailed.exit_code, last_words)

        def ready() -> None:  # the server answers: from now on its death ends the run at once
            assert server is not None
            server.wait_ready()
            server.watch(server_died)

        try:
            yield ready if server is not None else lambda: None
        except Exception as e:
            if verbose:
                raise
            log.write("".join(traceback.format_exception(e)).encode())  # the terminal gets one line
            log.flush()
            if isinstance(e, AmrsimError):
                e.add_note(f"Prefect's log: {log_path}")
                raise
            if isinstance(e, OSError) and e.filename is not None:  # a read-only or full warehouse: the user's to fix
                error = AmrsimError(f"{e.filename}: {e.strerror or type(e).__name__}")
                error.add_note(f"Prefect's log: {log_path}")
                raise error from None
            first = (str(e).strip().splitlines() or [""])[0]  # the whole message is in the log
            if type(e).__module__.startswith("httpx") and "Connect" in type(e).__name__:  # a configured server
                raise RunFailed(f"the Prefect server at {os.environ.get('PREFECT_API_URL')} stopped answering "
                                f"({type(e).__name__}: {first}): tables keep their last whole commit (each stage "
                                f"commits atomically), and the same command again computes only what is missing "
                                f"(traceback in {log_path})") from e
            raise RunFailed(f"{type(e).__name__}: {first} (traceback in {log_path}; --verbose shows it here)") from e
        finally:
            if server is not None:
                server.unwatch()  # its end is expected from here on
                drain_prefect_logs()
                server.stop()
