"""`fresh_python`: run a script as `python -c code args...` would, in a process that has imported only
sentence-transformers (never amrsim), about ten times sooner than a new interpreter.

The tests that check a saved model loads "outside amrsim" (model cards' snippets, Hub loading) each started a new
interpreter that spent ~8 s importing torch and sentence-transformers before loading a tiny model. Here one process
per test process imports them once and forks a child per script: the child starts from that import state (no amrsim
module in it, as the scripts check), runs in the given directory and environment, and its exit code and output come
back as a CompletedProcess. Environment variables that libraries read at import time (HF_HUB_OFFLINE, ...) are set
in the forking process too, so they hold for the imports done before the fork."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# the forking process: import, announce, then fork one child per request line (a JSON object)
SERVER = r"""
import json, os, sys, traceback
import numpy, torch, sentence_transformers  # the slow imports, done once
assert not any(m.split(".")[0] == "amrsim" for m in sys.modules), "sentence-transformers imported amrsim"
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            sys.argv = ["-c", *req["args"]]
            exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
"""

# what every fresh process gets: offline, no GPU, no PYTHONPATH (the test's checkout stays off sys.path)
BASE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}


def fresh_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, **BASE_ENV, **extra}


class _Forker:
    """The forking process of this test process, started at first use, ended at exit."""

    lock = threading.Lock()
    process: subprocess.Popen[str] | None = None
    home = Path(tempfile.mkdtemp(prefix="amrsim-fresh-python-"))

    @classmethod
    def run(cls, code: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float
            ) -> subprocess.CompletedProcess[str]:
        with cls.lock:
            if cls.process is None or cls.process.poll() is not None:
                cls.process = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, text=True, cwd=cls.home, env=fresh_env(),
                                               start_new_session=True)
                assert cls.process.stdout is not None and cls.process.stdout.readline().strip() == "ready", \
                    "the forking process did not start"
            out, err = cls.home / "stdout", cls.home / "stderr"
            request = {"code": code, "args": args, "cwd": str(cwd), "env": env, "stdout": str(out),
                       "stderr": str(err)}
            assert cls.process.stdin is not None and cls.process.stdout is not None
            cls.process.stdin.write(json.dumps(request) + "\n")
            cls.process.stdin.flush()
            answer: list[str] = []
            reader = threading.Thread(target=lambda: answer.append(cls.process.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            if not answer:
                cls.stop()
                raise subprocess.TimeoutExpired(["python", "-c", "..."], timeout)
            returncode = json.loads(answer[0])["returncode"]
            return subprocess.CompletedProcess(["python", "-c", "...", *args], returncode,
                                               out.read_text(errors="replace"), err.read_text(errors="replace"))

    @classmethod
    def stop(cls) -> None:
        if cls.process is not None and cls.process.poll() is None:
            os.killpg(cls.process.pid, 9)  # its running child too
            cls.process.wait()
        cls.process = None


atexit.register(_Forker.stop)


def fresh_python(code: str, *args: str, cwd: Path, timeout: float = 600, **env: str
                 ) -> subprocess.CompletedProcess[str]:
    """`python -c code args...` in `cwd`, with this process's environment less PYTHONPATH, plus BASE_ENV and `env`,
    in a child of a process that imported only sentence-transformers (see the module's doc)."""
    return _Forker.run(code, list(args), Path(cwd), fresh_env(**env), timeout)
