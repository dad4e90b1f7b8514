"""amrsim.amr.graph.parse against penman 1.3.1 on the inputs of penman's own tests (data/penman_1.3.1.json)."""

from __future__ import annotations

import pytest

from amrsim.amr.graph import AMRError, parse
from tests.conformance._data import load, params

DATA = load("penman_1.3.1.json")


@pytest.mark.parametrize("case", params(DATA["decode"]))
def test_decode_like_penman(case):
    peer = case["peer"]
    if "convention" in case:
        assert case["amrsim_expected"] == {"raises": "AMRError"}
        assert "triples" in peer  # penman reads it: a real difference, not a shared rejection
        with pytest.raises(AMRError):
            parse(case["text"])
        return
    graph = parse(case["text"])
    assert graph.top == peer["top"]
    assert [list(t) for t in graph.triples] == peer["triples"]


@pytest.mark.parametrize("case", params(DATA["malformed"]))
def test_malformed_raises_amr_error(case):
    assert case["peer"]["raises"] == "DecodeError"
    with pytest.raises(AMRError):
        parse(case["text"])
