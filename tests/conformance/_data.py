"""Loading the conformance data files (reference inputs and outputs, see SOURCES.md)."""

from __future__ import annotations

import gzip
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


def load_gz(name: str) -> dict:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return json.load(f)


def strip_comments(text: str) -> str:
    return "\n".join(line for line in text.strip().split("\n") if not line.lstrip().startswith("#")).strip()


class RealInputs:
    """The graphs a real-corpora pair id names in ../shared/data (files read once; benchmarks/conformance_real.py):
    ``lp-ud/<id>`` (amrsim's stored `ud` parse vs Little Prince gold <id>), ``lp-next/<id>`` (gold <id> vs the next
    sentence's gold), ``bamboo/<task>_main_<split>/<row>`` (a BAMBOO file's 0-based row). Comment lines dropped."""

    def __init__(self, shared: Path):
        self.shared = shared
        self._lp: list[dict] | None = None
        self._lp_index: dict[str, int] = {}
        self._bamboo: dict[str, list[dict]] = {}

    def lp(self) -> list[dict]:
        if self._lp is None:
            text = (self.shared / "amr_little_prince" / "little_prince_v3.0.jsonl").read_text(encoding="utf-8")
            self._lp = [json.loads(line) for line in text.splitlines() if line.strip()]
            self._lp_index = {r["id"]: n for n, r in enumerate(self._lp)}
        return self._lp

    def bamboo(self, name: str) -> list[dict]:
        if name not in self._bamboo:
            with gzip.open(self.shared / "amr_bamboo" / f"bamboo_{name}.jsonl.gz", "rt", encoding="utf-8") as f:
                self._bamboo[name] = [json.loads(line) for line in f]
        return self._bamboo[name]

    def pair(self, pair_id: str, stored_amr1: str | None = None) -> tuple[str, str]:
        """(amr1, amr2) of a pair id; lp-ud pairs take their stored parse as amr1."""
        kind, _, rest = pair_id.partition("/")
        if kind in ("lp-ud", "lp-next"):
            rows = self.lp()
            n = self._lp_index[rest]
            if kind == "lp-ud":
                if stored_amr1 is None:
                    raise ValueError(f"{pair_id}: the ud parse is stored in the data file, none given")
                return strip_comments(stored_amr1), strip_comments(rows[n]["amr"])
            return strip_comments(rows[n]["amr"]), strip_comments(rows[n + 1]["amr"])
        if kind == "bamboo":
            name, _, row = rest.rpartition("/")
            r = self.bamboo(name)[int(row)]
            return strip_comments(r["amr1"]), strip_comments(r["amr2"])
        raise ValueError(f"unknown pair id {pair_id!r}")
