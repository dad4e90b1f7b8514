"""Map a function over a table's batches: in-process by default, on local Ray or a Ray cluster when configured."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from amrsim.config import RayConfig
from amrsim.errors import ConfigError

# left out of the packages shipped to a cluster's workers (compiled extensions, *.so, go with them)
SHIP_EXCLUDES = ("__pycache__", "*.pyc")
# HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS, the Ray Client server) answers with
# a SETTINGS frame of its own; a dead port refuses, another service stays silent or answers something else
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_INIT = threading.Lock()  # stage tasks running in threads connect once


def ray_wanted(cfg: RayConfig) -> bool:
    return cfg.enabled or bool(cfg.address) or bool(os.environ.get("RAY_ADDRESS"))


def cluster_address(cfg: RayConfig) -> str | None:
    """The cluster to join: `ray.address`, else RAY_ADDRESS; None (or "local") means start a local Ray."""
    address = (cfg.address or os.environ.get("RAY_ADDRESS") or "").strip()
    return None if address in ("", "local") else address


def ensure_ray(cfg: RayConfig, run_dir: Path) -> None:
    """Connect to `cfg.address` / RAY_ADDRESS, else start a local Ray on loopback with its temp dir kept local."""
    import ray

    with _INIT:
        if not ray.is_initialized():
            _init(cfg, run_dir)


def _init(cfg: RayConfig, run_dir: Path) -> None:
    import ray

    address = cluster_address(cfg)
    if address:
        connect_cluster(address, cfg)
        return
    # Ray's unix sockets must fit in 107 bytes: fall back to a short /tmp path when run_dir is deep
    temp = run_dir / "ray"
    if len(str(temp)) > 40:
        temp = Path(tempfile.gettempdir()) / f"amrsim-ray-{os.getuid()}"
    temp.mkdir(parents=True, exist_ok=True)
    ray.init(num_cpus=cfg.num_cpus or os.cpu_count(), num_gpus=cfg.num_gpus, include_dashboard=False,
             _node_ip_address="127.0.0.1",
             _temp_dir=str(temp), ignore_reinit_error=True, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(_project_paths())}})


def connect_cluster(address: str, cfg: RayConfig) -> None:
    """Join the cluster at `address` with this project's code shipped to its workers. Checked first, because
    ray.init waits minutes on an address where no GCS answers: a bad address is a ConfigError naming it within
    about `connect_timeout_s` seconds, which Prefect does not retry."""
    import ray

    target = _resolve(address)
    if target.startswith("ray://"):
        from ray._private.utils import get_ray_client_dependency_error

        if get_ray_client_dependency_error() is not None:
            raise ConfigError(f"ray.address '{address}': a ray:// address needs the Ray Client on this machine: "
                              f"pip install 'ray[client]=={ray.__version__}' (or run the flow on the head node "
                              f"with ray.address: auto)")
    host, port = _host_port(address, target)
    probe_gcs(address, host, port, cfg.connect_timeout_s)
    try:
        # ray.init uploads the working_dir, so the snapshot may go once it returns. "auto" goes to Ray as is: only
        # then does Ray pick up a local token (token authentication)
        with tempfile.TemporaryDirectory(prefix="amrsim-code-") as stage:
            ray.init(address="auto" if address == "auto" else target,
                     runtime_env=cluster_runtime_env(cfg, Path(stage)), log_to_driver=False)
    except ConnectionError as e:
        ray.shutdown()
        chain, cause = [], e
        while cause is not None:
            chain.append(str(cause))
            cause = cause.__cause__
        hint = ("; the cluster uses token authentication: set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or "
                "~/.ray/auth_token) to its token" if any("AuthToken" in c for c in chain) else "")
        raise ConfigError(f"ray.address '{address}': could not join the Ray cluster at {target}: "
                          f"{str(e).splitlines()[0]}{hint}") from e


def _resolve(address: str) -> str:
    """`auto` becomes the address Ray would use (RAY_ADDRESS, else the latest `ray start` on this machine)."""
    if address != "auto":
        return address
    if os.environ.get("RAY_ADDRESS", "").strip() not in ("", "auto"):
        return os.environ["RAY_ADDRESS"].strip()
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die

        return canonicalize_bootstrap_address_or_die("auto")
    except ConnectionError as e:  # none found, or several
        raise ConfigError(f"ray.address 'auto': {str(e).splitlines()[0]} (`ray start --head` starts one; or set "
                          f"ray.address to ray://<head>:10001 or <head>:6379)") from e


def _host_port(address: str, target: str) -> tuple[str, int]:
    host, sep, port = target.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"ray.address '{address}': expected ray://<host>:<port> (Ray Client, usually port 10001), "
                          f"<host>:<port> (the head's GCS, usually 6379), auto or local")
    return host, int(port)


def probe_gcs(address: str, host: str, port: int, timeout: float) -> None:
    """A TCP connect and an HTTP/2 greeting with `timeout` seconds each: raises ConfigError naming `address` unless a
    gRPC server (Ray's GCS or Ray Client server) answers at host:port. With RAY_USE_TLS only the connect is checked."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            sock.settimeout(timeout)
            sock.sendall(_H2_HELLO)
            reply = b""
            while len(reply) < 9:
                chunk = sock.recv(9 - len(reply))
                if not chunk:
                    break
                reply += chunk
    except TimeoutError:
        raise ConfigError(f"ray.address '{address}': no Ray cluster answers at {host}:{port} within {timeout:g} s "
                          f"(is the head up, and the port open to this machine?)") from None
    except OSError as e:
        raise ConfigError(f"ray.address '{address}': no Ray cluster answers at {host}:{port}: "
                          f"{e.strerror or e} (is the head up? `ray up infra/ray-cluster.yaml` starts one)") from None
    if len(reply) < 9 or reply[3] != 0x04:  # frame type 4: SETTINGS
        raise ConfigError(f"ray.address '{address}': {host}:{port} answers, but not as a Ray cluster (GCS or Ray "
                          f"Client server); check the port (GCS 6379, Ray Client 10001)")


def cluster_runtime_env(cfg: RayConfig, stage: Path) -> dict[str, Any] | None:
    """The code the cluster's workers import: a snapshot of this driver's `amrsim` and `tasks` packages (compiled
    Smatch extension included) copied into `stage` and sent as the job's working_dir. Ray uploads it once per content
    hash; workers on every node run in it, so they import exactly the driver's code, never a checkout or install that
    happens to sit at the driver's path on their machine. The nodes need the same third-party packages, Python and
    platform (infra/ray-cluster.yaml installs them). `ship_code: false`: the nodes' own install, at the driver's
    version."""
    if not cfg.ship_code:
        return None
    import amrsim
    import tasks

    for module in (amrsim, tasks):
        src = Path(module.__file__).parent
        shutil.copytree(src, stage / src.name, ignore=shutil.ignore_patterns(*SHIP_EXCLUDES))
    return {"working_dir": str(stage)}


def _project_paths() -> list[str]:
    root = str(Path(__file__).resolve().parent.parent)
    return [root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]


class _BatchActor:
    """Holds one GPU (Ray sets CUDA_VISIBLE_DEVICES) and the model `fn` caches in its process."""

    def __init__(self, fn: Callable[[pl.DataFrame], pl.DataFrame]):
        self.fn = fn

    def run(self, batch: pl.DataFrame) -> pl.DataFrame:
        return self.fn(batch)


def map_batches(fn: Callable[[pl.DataFrame], pl.DataFrame], frame: pl.DataFrame, cfg: RayConfig,
                run_dir: Path, batch_size: int | None = None, max_retries: int = 3,
                gpu_actors: bool = False, on_progress: Callable[[int], None] | None = None) -> pl.DataFrame:
    """Apply `fn` to consecutive batches of `frame` and concatenate the results in order. With `gpu_actors` and
    GPUs in the Ray cluster, batches go to one actor per GPU, so each GPU loads its model once (translation,
    parsing); without GPUs they run as plain tasks. `on_progress(rows)` is told each batch's input rows as it comes
    back (on Ray, in the order they finish)."""
    size = batch_size or cfg.batch_size
    batches = [frame.slice(i, size) for i in range(0, frame.height, size)]
    told = on_progress or (lambda rows: None)
    if not batches:
        return fn(frame)
    if not ray_wanted(cfg):
        out = []
        for b in batches:
            out.append(fn(b))
            told(b.height)
        return pl.concat(out, how="vertical_relaxed")
    import ray

    ensure_ray(cfg, run_dir)
    gpus = int(ray.cluster_resources().get("GPU", 0)) if gpu_actors else 0
    if gpus:
        from ray.util import ActorPool

        actor = ray.remote(num_gpus=1, max_restarts=max_retries, max_task_retries=max_retries)(_BatchActor)
        pool = ActorPool([actor.remote(fn) for _ in range(min(gpus, len(batches)))])
        results = []
        for b, result in zip(batches, pool.map(lambda a, b: a.run.remote(b), batches), strict=True):
            results.append(result)
            told(b.height)
        return pl.concat(results, how="vertical_relaxed")

    def call(batch: pl.DataFrame) -> pl.DataFrame:  # ray.remote takes functions, not partials or callables
        return fn(batch)

    remote = ray.remote(max_retries=max_retries, retry_exceptions=False)(call)
    refs = [remote.remote(b) for b in batches]
    rows = {ref: b.height for ref, b in zip(refs, batches, strict=True)}
    pending = list(refs)
    while pending:  # progress as batches finish; a failed batch raises here, as ray.get would
        ready, pending = ray.wait(pending, num_returns=1)
        ray.get(ready)
        told(rows[ready[0]])
    return pl.concat(ray.get(refs), how="vertical_relaxed")
