"""Shared fixtures: temporary warehouses, config files, one torch thread, a tiny sentence-transformers model.
Plain helpers (paths, the CLI environment, toy data) are in helpers.py."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.helpers import build_tiny_sentence_transformer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The longest tests and modules (seconds under `make test` on a 2-core machine), started first: xdist's worksteal
# gives each of the two test processes one contiguous half of the collection and balances by stealing queued tests,
# so a long test left to the end keeps one process busy while the other idles. A module listed whole shares a
# module-scoped fixture (a Prefect server and worker, say), so it stays together.
RUN_FIRST = {
    "tests/system/test_flows.py::test_demo_flow_end_to_end": 160,
    "tests/system/test_signals.py": 150,
    "tests/system/test_deployments.py": 110,
    "tests/stages/evaluate/test_encode_and_evaluate.py::test_evaluate_cli_reproduces_baselines": 85,
    "tests/system/test_foreign_text.py": 70,
    "tests/test_gpu_check.py": 50,
    "tests/evaluate/test_transfer.py": 35,
    "tests/system/test_concurrency.py": 30,
}


@pytest.hookimpl(trylast=True)  # after -m has deselected: the halves are of what runs
def pytest_collection_modifyitems(config, items):
    """Start each half of the collection with its share of RUN_FIRST (the heaviest first, each to the lighter half);
    every other test keeps its place and order."""
    groups: dict[str, list] = {prefix: [] for prefix in RUN_FIRST}
    rest = []
    for item in items:
        prefix = next((p for p in RUN_FIRST if item.nodeid.startswith(p)), None)
        (groups[prefix] if prefix else rest).append(item)
    halves: tuple[list, list] = ([], [])
    loads = [0, 0]
    for prefix, seconds in sorted(RUN_FIRST.items(), key=lambda kv: -kv[1]):
        lighter = loads.index(min(loads))
        halves[lighter].extend(groups[prefix])
        loads[lighter] += seconds
    # xdist's first process gets items[:n // 2]: the second half's heavy tests start exactly at n // 2
    k = max(0, len(items) // 2 - len(halves[0]))
    items[:] = halves[0] + rest[:k] + halves[1] + rest[k:]


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


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """A tiny randomly initialised sentence-transformers model (see helpers.build_tiny_sentence_transformer)."""
    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny"))
