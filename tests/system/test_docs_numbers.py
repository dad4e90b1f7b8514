"""Numbers the docs quote from a script are that script's output today: a change that moves them fails here until
the docs are regenerated (run the script, paste its tables)."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.helpers import ROOT


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_sample_phenomena_tables_in_metrics_md_and_readme():
    """docs/metrics.md quotes `benchmarks/sample_phenomena.py`'s two tables verbatim; README.md's example table
    quotes the same example rows (words in bold there)."""
    script = _module("sample_phenomena")
    scored = script.score_sample()
    metrics_md = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    tables = [script.phenomenon_table(scored), script.example_table(scored)]
    for table in tables:
        for line in table.splitlines():
            assert line in metrics_md, f"docs/metrics.md lacks the script's line: {line}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8").replace("**", "")
    for line in tables[1].splitlines()[2:]:  # the example rows, without the phenomenon's name
        cells = [c.strip() for c in line.strip("|").split("|")]
        quoted = "| " + " | ".join(cells[1:]) + " |"
        assert quoted in readme, f"README.md lacks the example row: {quoted}"
    # the prose beside the table quotes the role swap's mean SRL
    role_swap = next(line for line in tables[0].splitlines() if line.startswith("| role swap"))
    srl = re.search(r"`srl` (\d\.\d\d)", role_swap).group(1)
    assert f"SRL aspect\n({srl})" in metrics_md or f"SRL aspect ({srl})" in metrics_md
