"""Fast new processes for tests: `fresh_python` (a script outside amrsim) and `amrsim_cli` (the `amrsim` command as
a user runs it), each a child forked from a process that has already imported torch and sentence-transformers.

A new interpreter spends ~8 s of CPU importing torch, transformers and sentence-transformers before a test's tiny
model or command does anything; the suite starts a few hundred of them. Here a forking process per test process
(and per concurrent call) imports them once; each request forks a child that starts from that import state (no
amrsim module in it: amrsim, Prefect and the rest are imported by the child, from its own environment), runs in the
given directory, environment and stdin, and exits as the process would (exit code; atexit handlers run). Variables
read at import time by the preloaded libraries (HF_HUB_OFFLINE, ...) are set in the forking process itself.

Tests of signals, process groups or startup latency start real processes instead."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SERVER = r"""
import json, os, runpy, sys, traceback
import numpy, torch, sentence_transformers  # the slow imports, done once
assert not any(m.split(".")[0] == "amrsim" for m in sys.modules), "a preloaded library imported amrsim"
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setpgid(0, 0)  # a command that signals its own process group must not reach the forking process
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            for fd, path, flags in ((0, req["stdin"], os.O_RDONLY), (1, req["stdout"], os.O_WRONLY | os.O_TRUNC),
                                    (2, req["stderr"], os.O_WRONLY | os.O_TRUNC)):
                os.dup2(os.open(path, flags), fd)
            sys.stdin = open(0, closefd=False, encoding=sys.stdin.encoding, errors=sys.stdin.errors)
            if req["module"]:
                sys.argv = ["-m", *req["args"]]
                runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
            else:
                sys.argv = ["-c", *req["args"]]
                exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        except SystemExit as e:
            code = e.code
        except BaseException:
            traceback.print_exc()
            code = 1
        raise SystemExit(code)  # a normal interpreter exit: atexit handlers, flushed streams
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
"""

# offline, no GPU, and no PYTHONPATH unless asked: a script "outside amrsim" must not see this checkout's sources
BASE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}


class _Forker:
    """One forking process (environment `env`); serves one request at a time."""

    def __init__(self, env: dict[str, str]):
        self.home = Path(tempfile.mkdtemp(prefix="amrsim-forked-"))
        self.process = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=self.home, env=env,
                                        start_new_session=True)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the forking test process did not start")

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(self, request: dict, timeout: float, stdin: str | None) -> subprocess.CompletedProcess[str]:
        out, err, inp = self.home / "stdout", self.home / "stderr", self.home / "stdin"
        for path in (out, err):
            path.write_text("")
        inp.write_text(stdin or "")
        request = {**request, "stdout": str(out), "stderr": str(err), "stdin": str(inp) if stdin is not None
                   else os.devnull}
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        pid = json.loads(self.process.stdout.readline())["pid"]
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        args = ["python", *(["-m", request["module"]] if request["module"] else ["-c", "..."]), *request["args"]]
        if not answer:  # as subprocess.run(timeout=) does: the child killed, TimeoutExpired
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            reader.join()
            raise subprocess.TimeoutExpired(args, timeout, out.read_text(errors="replace"),
                                            err.read_text(errors="replace"))
        if not answer[0]:
            raise RuntimeError("the forking test process ended")
        return subprocess.CompletedProcess(args, json.loads(answer[0])["returncode"],
                                           out.read_text(errors="replace"), err.read_text(errors="replace"))

    def stop(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)


class _Pool:
    """Forking processes by environment, one more for each concurrent call (threads of one test)."""

    lock = threading.Lock()
    idle: dict[str, list[_Forker]] = {}
    every: list[_Forker] = []

    @classmethod
    def run(cls, env: dict[str, str], request: dict, timeout: float, stdin: str | None
            ) -> subprocess.CompletedProcess[str]:
        key = env.get("PYTHONPATH", "")
        with cls.lock:
            free = [f for f in cls.idle.get(key, []) if f.alive()]
            forker = free.pop() if free else None
            cls.idle[key] = free
        if forker is None:
            forker = _Forker(dict(env))
            with cls.lock:
                cls.every.append(forker)
        try:
            return forker.run(request, timeout, stdin)
        finally:
            if forker.alive():
                with cls.lock:
                    cls.idle[key].append(forker)

    @classmethod
    def stop(cls) -> None:
        for forker in cls.every:
            forker.stop()


atexit.register(_Pool.stop)


def _env(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    return {**base, **BASE_ENV, **extra}


def fresh_python(code: str, *args: str, cwd: Path, timeout: float = 600, **env: str
                 ) -> subprocess.CompletedProcess[str]:
    """`python -c code args...` in `cwd`, with this process's environment less PYTHONPATH (so amrsim is importable
    only as installed) plus BASE_ENV and `env`."""
    full = _env({k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, env)
    return _Pool.run(full, {"code": code, "module": None, "args": list(args), "cwd": str(cwd), "env": full},
                     timeout, None)


def amrsim_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600,
               input: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m amrsim.cli args...` (the `amrsim` command) in `cwd` with `env` (default: this process's) plus
    BASE_ENV and this checkout on PYTHONPATH; `input` is its stdin (default: none, as /dev/null)."""
    full = _env(dict(os.environ if env is None else env), {"PYTHONPATH": str(ROOT)})
    return _Pool.run(full, {"code": None, "module": "amrsim.cli", "args": list(args), "cwd": str(cwd), "env": full},
                     timeout, input)
