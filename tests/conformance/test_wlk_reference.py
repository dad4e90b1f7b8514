"""Symbolic WLK (k=2) against the reference implementation's main_wlk.py (data/wlk_reference.json)."""

from __future__ import annotations

import pytest

from amrsim.metrics.wlk import wlk
from tests.conformance._data import TOL, load, params

DATA = load("wlk_reference.json")


@pytest.mark.parametrize("case", params(DATA["cases"]))
def test_wlk_against_reference(case):
    value = wlk(case["amr1"], case["amr2"], k=2)
    peer = case["peer"]["wlk_k2"]
    if "convention" in case:
        expected = case["amrsim_expected"]["wlk_k2"]
        assert value == pytest.approx(expected, abs=TOL)
        assert abs(expected - peer) > TOL
        return
    assert value == pytest.approx(peer, abs=TOL)
