"""What `amrsim run` sets up around its flow: a temporary Prefect server that dies with the CLI, and Prefect's logs
in a file. Nothing here imports Prefect: the server is started before Prefect is imported, so that both overlap."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import yaml

from amrsim.errors import AmrsimError
from amrsim.files import atomic_write
from amrsim.procs import spawn_tied

UVICORN_PORT_TAKEN = 3  # uvicorn's exit code when it cannot start (the port went to another process meanwhile)


def _prefect_dir() -> Path:
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise AmrsimError("prefect is not installed: pip install -e . installs it")
    return Path(list(spec.submodule_search_locations)[0])


def log_prefect_to_file(log_path: Path) -> Path:
    """Prefect's logging configuration with its console handlers writing to `log_path` instead of the terminal
    (flow and task tracebacks included); set as PREFECT_LOGGING_SETTINGS_PATH before Prefect is imported, it also
    reaches the server process. Returns the settings file."""
    config = yaml.safe_load((_prefect_dir() / "logging" / "logging.yml").read_text(encoding="utf-8"))
    to_file = {"level": 0, "class": "logging.FileHandler", "filename": str(log_path), "encoding": "utf-8",
               "delay": True}
    config["handlers"]["console"] = {**to_file, "formatter": "standard"}
    config["handlers"]["debug"] = {**to_file, "formatter": "debug"}
    settings = log_path.with_name("prefect-logging.yml")
    text = yaml.safe_dump(config, sort_keys=False)
    atomic_write(settings, lambda tmp: tmp.write_text(text, encoding="utf-8"))  # concurrent runs see a whole file
    return settings


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# A new Prefect home's SQLite database costs its first server about 10 s of CPU (migrations, block registration) on
# a 2-core machine. The first server on a machine keeps that empty database, per Prefect version, and each later new
# home starts from a copy of it: Prefect then finds nothing to migrate.
PREFECT_DB = "prefect.db"
DATABASE_URL_SETTINGS = ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL")


def database_template() -> Path | None:
    """`<cache>/amrsim/prefect-<version>.db` (cache: $XDG_CACHE_HOME, else ~/.cache); None where the server's
    database is not the Prefect home's default SQLite file (a database URL is configured)."""
    import importlib.metadata

    if any(os.environ.get(name) for name in DATABASE_URL_SETTINGS):
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "amrsim"
    return cache / f"prefect-{importlib.metadata.version('prefect')}.db"


def _home_database() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser() / PREFECT_DB


def seed_database() -> bool:
    """Give a Prefect home without a database a copy of the template; True when the home has no database and no
    template was there to copy (the server about to start creates one from scratch). Never replaces a database: a
    concurrent run may have created it meanwhile (the copy is linked into place only where none is)."""
    template, database = database_template(), _home_database()
    if template is None or database.exists():
        return False
    try:
        if not template.is_file() or template.is_symlink():
            return True
        database.parent.mkdir(parents=True, exist_ok=True)
        copy = database.with_name(f".{PREFECT_DB}.{os.getpid()}.tmp")
        copy.write_bytes(template.read_bytes())
        try:
            os.link(copy, database)
        except FileExistsError:
            pass
        finally:
            copy.unlink(missing_ok=True)
    except OSError:  # an unreadable cache or a full disk: the server migrates from scratch, as without a template
        return True
    return False


def keep_database_template() -> None:
    """Save the home's freshly migrated database as the template (SQLite's backup: a consistent copy of a database
    in use), swapped in whole; any failure leaves things as they were."""
    import sqlite3

    template, database = database_template(), _home_database()
    if template is None or not database.is_file():
        return
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        partial = template.with_name(f".{template.name}.{os.getpid()}.tmp")
        source, target = sqlite3.connect(f"file:{database}?mode=ro", uri=True), sqlite3.connect(partial)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
        os.replace(partial, template)
    except (OSError, sqlite3.Error):
        pass


class TemporaryServer:
    """Prefect's API server (the same uvicorn app Prefect's ephemeral mode runs) on a free loopback port, started
    by this process as a child in its own process group with a parent-death signal: it never outlives the CLI."""

    def __init__(self, log: IO[Any], startup_timeout: float):
        self.log = log
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._stopping = threading.Event()  # set by `stop`: the server's end is then no news for `watch`
        self._new_database = False  # this server migrates a new home's database from scratch (`seed_database`)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self) -> None:
        """Start it and point this process (and its children) at it; `wait_ready` waits until it answers. A new
        Prefect home gets its database from `database_template()` when there is one."""
        self._new_database = seed_database()
        self.port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env |= {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        cmd = [sys.executable, "-m", "uvicorn", "--app-dir", str(_prefect_dir().parent), "--factory",
               "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(self.port),
               "--log-level", "error", "--lifespan", "on"]
        self.process = spawn_tied(cmd, env, stdout=self.log, stderr=self.log)
        os.environ["PREFECT_API_URL"] = self.api_url

    def wait_ready(self) -> None:
        """Until GET /health answers 200; a server that exits or stays silent is an error naming the log."""
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        restarts = 0
        while True:
            code = self.process.poll()
            if code == UVICORN_PORT_TAKEN and restarts < 3:
                restarts += 1
                self.start()
                continue
            if code is not None:
                raise AmrsimError(f"the temporary Prefect server exited with code {code} before answering; "
                                  f"its output is in {self.log.name}")
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as response:
                    if response.status == 200:
                        if self._new_database:  # migrated by this server, nothing run in it yet
                            keep_database_template()
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet
            if time.monotonic() > deadline:
                self.stop()
                raise AmrsimError(f"the temporary Prefect server did not answer within {self.startup_timeout:g} s "
                                  f"(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS); its output is in "
                                  f"{self.log.name}")
            time.sleep(0.1)

    def watch(self, on_exit: Callable[[int], None], every: float = 0.2) -> None:
        """From a thread, call `on_exit(returncode)` once the server process ends (killed, crashed, out of memory)
        unless `stop` or `unwatch` came first. Prefect's client would otherwise retry each call to the vanished
        server with backoff (PREFECT_CLIENT_MAX_RETRIES) for minutes, then fail with a ConnectError."""
        process = self.process
        assert process is not None

        def poll() -> None:
            while not self._stopping.wait(every):
                code = process.poll()
                if code is not None:
                    if not self._stopping.is_set():
                        on_exit(code)
                    return

        threading.Thread(target=poll, daemon=True, name="amrsim-server-watch").start()

    def unwatch(self) -> None:
        """The server's end is expected from now on: `watch` calls nothing."""
        self._stopping.set()

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM its process group, SIGKILL after `grace` seconds."""
        self.unwatch()
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        except ProcessLookupError:
            pass


def drain_prefect_logs() -> None:
    """Send Prefect's queued log records to its API now, while the temporary server still answers: its at-exit
    flush would find the server gone and print an error to the terminal."""
    if "prefect.logging.handlers" not in sys.modules:
        return
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=5)
