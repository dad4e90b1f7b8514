"""Map a function over a table's batches: in-process by default, on local Ray or a Ray cluster when configured."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl

from amrsim.config import RayConfig


def ray_wanted(cfg: RayConfig) -> bool:
    return cfg.enabled or bool(cfg.address) or bool(os.environ.get("RAY_ADDRESS"))


def ensure_ray(cfg: RayConfig, run_dir: Path) -> None:
    """Connect to `cfg.address` / RAY_ADDRESS, else start a local Ray on loopback with its temp dir kept local."""
    import ray

    if ray.is_initialized():
        return
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
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
                gpu_actors: bool = False) -> pl.DataFrame:
    """Apply `fn` to consecutive batches of `frame` and concatenate the results in order. With `gpu_actors` and
    GPUs in the Ray cluster, batches go to one actor per GPU, so each GPU loads its model once (translation,
    parsing); without GPUs they run as plain tasks."""
    size = batch_size or cfg.batch_size
    batches = [frame.slice(i, size) for i in range(0, frame.height, size)]
    if not batches:
        return fn(frame)
    if not ray_wanted(cfg):
        return pl.concat([fn(b) for b in batches], how="vertical_relaxed")
    import ray

    ensure_ray(cfg, run_dir)
    gpus = int(ray.cluster_resources().get("GPU", 0)) if gpu_actors else 0
    if gpus:
        from ray.util import ActorPool

        actor = ray.remote(num_gpus=1, max_restarts=max_retries, max_task_retries=max_retries)(_BatchActor)
        pool = ActorPool([actor.remote(fn) for _ in range(min(gpus, len(batches)))])
        return pl.concat(list(pool.map(lambda a, b: a.run.remote(b), batches)), how="vertical_relaxed")

    def call(batch: pl.DataFrame) -> pl.DataFrame:  # ray.remote takes functions, not partials or callables
        return fn(batch)

    remote = ray.remote(max_retries=max_retries, retry_exceptions=False)(call)
    refs = [remote.remote(b) for b in batches]
    return pl.concat(ray.get(refs), how="vertical_relaxed")
