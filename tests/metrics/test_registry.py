"""Each AMR metric aspect is declared once (`amrsim.metrics.aspects.ASPECTS`): `ALL_ASPECTS`, the `amr_metrics`
schema, `metrics score --aspects`' help and the docs' list of aspects follow it, and an aspect registered in a test
alone reaches the metrics stage's table and `amrsim metrics score`'s output."""

from __future__ import annotations

import json
import re
from functools import partial

import polars as pl
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from amrsim.cli import app
from amrsim.config import DatasetConfig
from amrsim.metrics import ALL_ASPECTS, ASPECTS, Aspect, MetricsOptions, Pair, metric_columns, register, score_pairs
from amrsim.stages import metrics_stage
from amrsim.stages.ingest import ingest_tables
from amrsim.warehouse.schemas import SCHEMAS
from tests.helpers import ROOT

WANT = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
WANT_NOT = "(w / want-01 :polarity - :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
DOGS = "(d / dog :quant 2)"


def _node_ratio(p: Pair) -> dict[str, float]:
    """The toy aspect: the smaller graph's node count over the larger's."""
    n1, n2 = len(p.first.triples.variables), len(p.second.triples.variables)
    return {"toy_nodes": min(n1, n2) / max(n1, n2)}


TOY = Aspect("toy_nodes", (pa.field("toy_nodes", pa.float64()),), _node_ratio)


@pytest.fixture
def toy():
    """TOY registered for one test: the only place that names it."""
    before = dict(ASPECTS)
    register(TOY)
    yield TOY
    ASPECTS.clear()
    ASPECTS.update(before)


def test_what_derives_from_the_registry():
    assert ALL_ASPECTS == tuple(ASPECTS)
    own = SCHEMAS["amr_metrics"].names
    assert [c for c in own if c in metric_columns()] == metric_columns()
    assert [f for f in SCHEMAS["amr_metrics"] if f.name in metric_columns()] == [
        f for a in ASPECTS.values() for f in a.columns]
    help_text = CliRunner().invoke(app, ["metrics", "score", "--help"], env={"COLUMNS": "200"}).output
    assert all(name in help_text for name in ASPECTS)


def _doc_table() -> dict[str, list[str]]:
    """docs/metrics.md's table of aspects: aspect -> its columns."""
    lines = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| aspect | columns | what it compares |")
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = re.findall(r"`([^`]+)`", cells[1])
    return rows


def test_the_docs_list_every_aspect_and_column():
    assert _doc_table() == {name: list(a.column_names) for name, a in ASPECTS.items()}
    readme = (ROOT / "warehouse" / "README.md").read_text(encoding="utf-8")
    section = readme.split("### `<dataset>/amr_metrics`")[1].split("\n### ")[0]
    documented = set(re.findall(r"\w+", section))
    assert [c for c in metric_columns() if c not in documented] == []


def test_a_taken_name_or_column_is_refused():
    with pytest.raises(ValueError, match="registered already"):
        register(Aspect("wlk", (pa.field("other", pa.float64()),), _node_ratio))
    with pytest.raises(ValueError, match="smatch_f1, status taken"):
        register(Aspect("mine", (pa.field("smatch_f1", pa.float64()), pa.field("status", pa.float64())),
                        _node_ratio))
    assert "mine" not in ASPECTS


def test_a_registered_aspect_reaches_the_metrics_table(wh, tmp_path, toy):
    rows = [{"idx": 0, "sentence1": "The boy wants to go.", "sentence2": "The boy does not want to go.",
             "gold": 2.0, "amr1": WANT, "amr2": WANT_NOT},
            {"idx": 1, "sentence1": "The boy wants to go.", "sentence2": "Two dogs.", "gold": 0.5, "amr1": WANT,
             "amr2": DOGS}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ingest_tables(wh, "bam", DatasetConfig(path=str(path), kind="pairs", split="test",
                                           columns={"id": "idx", "score": "gold", "amr1": "amr1", "amr2": "amr2"}),
                  path, "r0")
    options = MetricsOptions(aspects=("smatch", "toy_nodes"), vectors="random")
    run = metrics_stage(wh, "p", "bam", options, "r1", partial(score_pairs, options=options))
    assert (run.rows_computed, run.rows_failed) == (2, 0)
    table = wh.read("bam", "amr_metrics").sort("item_id")
    assert table["toy_nodes"].to_list() == [1.0, pytest.approx(1 / 3)]
    assert table.columns.index("toy_nodes") < table.columns.index("options")  # with the other aspects' columns
    assert table["smatch_f1"][0] < 1.0 and table["wlk"].is_null().all()


def test_a_registered_aspect_reaches_metrics_score(tmp_path, toy):
    path, out = tmp_path / "pairs.jsonl", tmp_path / "scores.parquet"
    path.write_text("\n".join(json.dumps({"amr1": a, "amr2": b}) for a, b in [(WANT, WANT_NOT), (WANT, DOGS)]) + "\n")
    result = CliRunner().invoke(app, ["metrics", "score", "--file", str(path), "--out", str(out), "--aspects",
                                      "smatch,toy_nodes", "--vectors", "random", "--workers", "1"])
    assert result.exit_code == 0, result.output
    table = pl.read_parquet(out).sort("line")
    assert table["toy_nodes"].to_list() == [1.0, pytest.approx(1 / 3)]
    assert "toy_nodes" in result.output  # the means table
    help_text = CliRunner().invoke(app, ["metrics", "score", "--help"], env={"COLUMNS": "200"}).output
    assert "toy_nodes" in help_text
