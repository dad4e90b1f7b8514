"""Loading the conformance data files (reference inputs and outputs, see SOURCES.md)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
TOL = 1e-6


@cache
def load(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def params(cases: list[dict]) -> list:
    """pytest parameters, one per case, named by the case id (and its convention, where amrsim deliberately
    differs)."""
    return [pytest.param(c, id=c["id"] + (f"[convention:{c['convention']}]" if "convention" in c else ""))
            for c in cases]
