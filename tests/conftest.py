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

