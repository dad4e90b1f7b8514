"""Shared fixtures: temporary warehouses, config files, and the ../shared/data location."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def shared(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test with a message where it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data ships with the project's machines, not with a clone)")
    return path


def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for an `amrsim` subprocess: Prefect state under tmp_path/run, offline hub, this checkout."""
    return {**os.environ, "PREFECT_HOME": str(tmp_path / "run" / "prefect"), "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(ROOT), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}


@pytest.fixture
def wh(tmp_path):
    from amrsim.warehouse import Warehouse

    return Warehouse(tmp_path / "warehouse")


@pytest.fixture
def write_config(tmp_path):
    """Write a pipelines.yaml into tmp_path from a YAML string; returns its path."""

    def _write(body: str, name: str = "pipelines.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(body), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def write_tsv(tmp_path):
    """Write rows (lists of fields) as a tab-separated file with no quoting."""

    def _write(name: str, header: list[str], rows: list[list[str]]) -> Path:
        path = tmp_path / name
        lines = ["\t".join(header)] + ["\t".join(r) for r in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    return _write


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny models: tiny matmuls on a shared 2-core box run many times faster, and
    results are reproducible. Restored when the module ends."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
