"""Fine-grained aspects on hand-made graph pairs (scores computed by hand), and the batch engine's contract."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from amrsim.amr.graph import parse
from amrsim.metrics.aspects import GraphView, aspect_scores, set_f1
from amrsim.metrics.engine import ALL_ASPECTS, MetricsOptions, score_pairs, score_pairs_parallel, worker_pool
from tests.helpers import ROOT, shared

WANT = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
WANT_NOT = "(w / want-01 :polarity - :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
WANT_GIRL = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 (g2 / girl)))"
CAT_DOG = "(c / chase-01 :ARG0 (c2 / cat) :ARG1 (d / dog))"
DOG_CAT = "(c / chase-01 :ARG0 (d / dog) :ARG1 (c2 / cat))"
DOGS3 = "(d / dog :quant 3)"
DOGS2 = "(d / dog :quant 2)"
MERKEL = ('(v / visit-01 :ARG0 (p / person :name (n / name :op1 "Merkel")) '
          ':ARG1 (c / city :name (n2 / name :op1 "Paris")))')
SIEMENS = ('(v / visit-01 :ARG0 (p / company :name (n / name :op1 "Siemens")) '
           ':ARG1 (c / city :name (n2 / name :op1 "Paris")))')


def no_vectors(label: str):
    return None


def scores(a: str, b: str, aspects=("smatch", "unlabeled", "no_wsd", "concepts", "frames", "named_entities",
                                     "negation", "wikification", "reentrancies", "srl", "quant_sim", "root_sim",
                                     "max_indegree_sim", "max_outdegree_sim", "max_degree_sim")) -> dict[str, float]:
    return aspect_scores(GraphView.read(parse(a)), GraphView.read(parse(b)), aspects, no_vectors)


def test_set_f1_is_vacuous_when_both_empty():
    assert set_f1([], []) == 1.0 and set_f1(["a"], []) == 0.0
    assert set_f1(["a", "b"], ["b", "c", "d"]) == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))


def test_identical_graphs_score_one_everywhere():
    for g in (WANT, CAT_DOG, MERKEL, DOGS3):
        assert all(v == pytest.approx(1.0) for v in scores(g, g).values()), g


def test_negation_added():
    s = scores(WANT, WANT_NOT)
    assert s["negation"] == 0.0  # {} vs {want-01}
    # 7 triples (3 instances, TOP, 3 relations) all matched; the negated graph has 8: P=1, R=7/8
    assert s["smatch_precision"] == pytest.approx(1.0) and s["smatch_recall"] == pytest.approx(7 / 8)
    assert s["smatch_f1"] == pytest.approx(2 * 7 / 8 / (1 + 7 / 8))
    assert s["concepts"] == 1.0 and s["reentrancies"] == 1.0 and s["srl"] == 1.0


def test_roles_swapped():
    s = scores(CAT_DOG, DOG_CAT)
    # best alignment keeps 3 instances + TOP, no relation: 4 of 6 triples each side
    assert s["smatch_f1"] == pytest.approx(4 / 6)
    assert s["srl"] == pytest.approx(4 / 6)  # subgraph: 3 instances + TOP + 2 ARG edges, relations lost
    assert s["unlabeled"] == pytest.approx(1.0)  # without labels the graphs are the same
    assert s["concepts"] == 1.0 and s["root_sim"] == 1.0


def test_quantity_changed():
    s = scores(DOGS3, DOGS2)
    assert s["quant_sim"] == 0.0 and s["smatch_f1"] == pytest.approx(2 / 3)
    assert scores(DOGS3, "(d / dog)")["quant_sim"] == 0.0
    assert scores("(d / dog)", "(c / cat)")["quant_sim"] == 1.0  # neither has a quantity


def test_named_entity_changed():
    s = scores(MERKEL, SIEMENS)
    # as in amr-evaluation, the aspect compares the types of named things: {person, city} vs {company, city}
    assert s["named_entities"] == pytest.approx(0.5)
    assert s["concepts"] == pytest.approx(set_f1(["visit-01", "person", "name", "city"],
                                                 ["visit-01", "company", "name", "city"]))
    assert s["smatch_f1"] < 1.0 and s["frames"] == 1.0


def test_reentrancy_removed():
    s = scores(WANT, WANT_GIRL)
    assert s["reentrancies"] == 0.0  # one graph has a re-entrant node, the other none
    assert scores(CAT_DOG, DOG_CAT)["reentrancies"] == 1.0  # neither has one: vacuous
    # max in-degree: boy (2 parents) in WANT; in WANT_GIRL boy, go-02 and girl tie at 1 and the first (boy) wins
    assert s["max_indegree_sim"] == 1.0 and s["max_outdegree_sim"] == 1.0
    # with a different root concept the vector-free fallback is exact match
    assert scores(WANT, "(w / need-01 :ARG0 (b / boy))")["root_sim"] == 0.0


def test_engine_rows_never_crash_the_batch():
    bad = ["(a / b", "", "# ::snt only metadata\n", "(x / a :ARG0 (x / b))", "(a / b :ARG0 zz)"]
    frame = pl.DataFrame({"amr1": [WANT, *bad, "(x / 北京)"], "amr2": [WANT_NOT] * (len(bad) + 1) + ["(x / 北京)"]})
    out = score_pairs(frame, MetricsOptions(aspects=("smatch", "concepts", "wlk"), vectors="random"))
    assert out.height == frame.height and out["status"].to_list() == ["ok"] + ["failed"] * len(bad) + ["ok"]
    assert all(e.startswith("amr1: ") for e in out["error"].to_list()[1:-1])
    assert out["smatch_f1"][-1] == pytest.approx(1.0) and out["wlk"][-1] == pytest.approx(1.0)
    assert out["key"].n_unique() == out.height


def test_unknown_aspect_is_rejected():
    with pytest.raises(ValueError, match="unknown aspect"):
        MetricsOptions(aspects=("smatch", "vibes"))


@pytest.mark.slow
def test_all_aspects_on_real_pairs_and_cli_is_incremental(tmp_path):
    path = shared("amr_bamboo", "bamboo_sts_main_test.jsonl.gz")
    lines = gzip.open(path, "rt", encoding="utf-8").read().splitlines()[:40]
    small = tmp_path / "pairs.jsonl.gz"
    small.write_bytes(gzip.compress("\n".join(lines).encode()))
    out = tmp_path / "scores.parquet"
    cmd = [sys.executable, "-m", "amrsim.cli", "metrics", "score", "--file", str(small), "--out", str(out),
           "--keep", "gold,idx", "--vectors", "random", "--workers", "1"]
    first = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    table = pl.read_parquet(out)
    assert table.height == 40 and set(table["status"]) == {"ok"}
    for col in ("smatch_f1", "wlk", "root_sim", "quant_sim", "srl", "reentrancies", "negation"):
        assert table[col].is_between(0.0, 1.0 + 1e-9).all(), col
    assert (table["wwlk"] <= 1.0 + 1e-9).all()  # 1 - Wasserstein distance: can fall below 0 for unlike graphs
    gold = np.array([json.loads(x)["gold"] for x in lines], dtype=float)
    assert np.corrcoef(table["smatch_f1"].to_numpy(), gold)[0, 1] > 0.2
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert again.returncode == 0 and "0 computed" in again.stdout and "40 reused" in again.stdout
    assert pl.read_parquet(out).equals(table)


@pytest.mark.slow
def test_process_pool_gives_the_same_rows_as_one_process():
    frame = pl.DataFrame({"amr1": [WANT, CAT_DOG, DOGS3, "(a / b", MERKEL, WANT_GIRL, DOGS2],
                          "amr2": [WANT_NOT, DOG_CAT, DOGS2, WANT, SIEMENS, WANT, DOGS3]})
    options = MetricsOptions(aspects=("smatch", "srl", "wlk", "wwlk", "root_sim"), vectors="random")
    with worker_pool(2, options) as pool:
        parallel = score_pairs_parallel(frame, options, pool=pool, batch_size=2)
    single = score_pairs(frame, options)
    assert parallel.drop("seconds").equals(single.drop("seconds"))
    assert parallel["status"].to_list().count("failed") == 1


def test_all_aspects_are_covered():
    assert set(ALL_ASPECTS) >= {"smatch", "wlk", "wwlk", "root_sim", "reentrancies"}


def test_metrics_stage_reads_provided_graphs_and_is_incremental(wh, tmp_path):
    from functools import partial

    from amrsim.config import DatasetConfig
    from amrsim.stages import metrics_stage
    from amrsim.stages.ingest import ingest_tables

    rows = [{"idx": 0, "sentence1": "The boy wants to go.", "sentence2": "The boy does not want to go.",
             "gold": 2.0, "amr1": WANT, "amr2": WANT_NOT},
            {"idx": 1, "sentence1": "The cat chased the dog.", "sentence2": "The dog chased the cat.",
             "gold": 1.5, "amr1": CAT_DOG, "amr2": DOG_CAT},
            {"idx": 2, "sentence1": "Broken graph.", "sentence2": "Fine.", "gold": 0.0, "amr1": "(a / b",
             "amr2": DOGS2}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ds = DatasetConfig(path=str(path), kind="pairs", split="test",
                       columns={"id": "idx", "score": "gold", "amr1": "amr1", "amr2": "amr2"})
    ingest_tables(wh, "bam", ds, path, "r0")
    assert wh.read("bam", "amr").height == 6
    options = MetricsOptions(aspects=("smatch", "negation", "srl"), vectors="random")
    run = metrics_stage(wh, "p", "bam", options, "r1", partial(score_pairs, options=options))
    assert (run.rows_in, run.rows_computed, run.rows_failed) == (3, 3, 1)
    table = wh.read("bam", "amr_metrics").sort("item_id")
    assert table["negation"].to_list()[:2] == [0.0, 1.0]
    assert table["status"].to_list() == ["ok", "ok", "failed"] and "amr1: " in table["error"][2]
    assert table["score"].to_list() == [2.0, 1.5, 0.0] and table["wlk"].is_null().all()
    again = metrics_stage(wh, "p", "bam", options, "r2", partial(score_pairs, options=options))
    assert again.rows_computed == 0


def big_graph(n: int, concept_of) -> str:
    """A 300-node AMR: a chain of `:ARG1` edges with a `:mod` to the node two back (reentrancies)."""
    parts = []
    for i in range(n):
        mod = f" :mod x{i - 2}" if i >= 2 and i % 7 == 0 else ""
        parts.append(f"(x{i} / {concept_of(i)}{mod} :ARG1 ")
    return "".join(parts)[:-len(" :ARG1 ")] + ")" * n


def test_a_300_node_pair_is_scored_within_the_bound():
    g1 = big_graph(300, lambda i: f"c{i % 11}-01")
    g2 = big_graph(300, lambda i: f"c{(i * 5) % 13}-01")
    frame = pl.DataFrame({"amr1": [g1, g1], "amr2": [g2, g1]})
    out = score_pairs(frame, MetricsOptions(aspects=("smatch", "srl", "reentrancies", "wlk"), vectors="random"))
    assert out["status"].to_list() == ["ok", "ok"], out["error"].to_list()
    assert 0.0 < out["smatch_f1"][0] < 1.0 and out["smatch_f1"][1] == pytest.approx(1.0)


def test_metrics_stage_that_fails_mid_way_keeps_its_committed_chunks_and_the_rerun_scores_only_the_rest(wh,
                                                                                                        tmp_path):
    from functools import partial

    from amrsim.config import DatasetConfig
    from amrsim.stages import metrics_stage
    from amrsim.stages.ingest import ingest_tables
    from amrsim.synthetic import HEADER, write_pairs

    write_pairs(tmp_path / "pairs.tsv", 0, 25)
    ds = DatasetConfig(path=str(tmp_path / "pairs.tsv"), kind="pairs", score_range=(0, 5),
                       columns={c: c for c in HEADER})
    ingest_tables(wh, "syn", ds, tmp_path / "pairs.tsv", "r0")
    options = MetricsOptions(aspects=("smatch", "negation"), vectors="random")
    calls: list[int] = []

    def crashes_on_the_third_chunk(frame):
        calls.append(frame.height)
        if len(calls) == 3:
            raise RuntimeError("worker lost")
        return score_pairs(frame, options)

    with pytest.raises(RuntimeError, match="worker lost"):
        metrics_stage(wh, "p", "syn", options, "r1", crashes_on_the_third_chunk, commit_rows=10)
    assert calls == [10, 10, 5] and wh.read("syn", "amr_metrics").height == 20  # two whole chunks, one commit each
    assert wh.version("syn", "amr_metrics") == 1
    rerun = metrics_stage(wh, "p", "syn", options, "r2", partial(score_pairs, options=options), commit_rows=10)
    assert (rerun.rows_in, rerun.rows_computed) == (25, 5)
    whole = metrics_stage(_same_dataset_elsewhere(tmp_path, ds), "p", "syn", options, "r3",
                          partial(score_pairs, options=options), commit_rows=7)
    assert whole.rows_computed == 25
    cols = ["key", "pair_key", "smatch_f1", "negation", "status"]
    assert wh.read("syn", "amr_metrics").select(cols).sort("key").equals(
        _same_dataset_elsewhere(tmp_path, ds).read("syn", "amr_metrics").select(cols).sort("key"))


def _same_dataset_elsewhere(tmp_path, ds):
    """A second warehouse holding the same ingested dataset (created on first use)."""
    from amrsim.stages.ingest import ingest_tables
    from amrsim.warehouse import Warehouse

    other = Warehouse(tmp_path / "other")
    if not other.exists("syn", "pairs"):
        ingest_tables(other, "syn", ds, ds.path, "r0")
    return other


def test_a_refresh_skips_done_pairs_by_graphs_but_rescores_a_pair_whose_graph_changed(wh, tmp_path):
    from functools import partial

    import polars as pl
    from deltalake import write_deltalake

    from amrsim.config import DatasetConfig
    from amrsim.stages import metrics_stage
    from amrsim.stages.ingest import ingest_tables
    from amrsim.synthetic import HEADER, write_pairs

    write_pairs(tmp_path / "pairs.tsv", 0, 12)
    ds = DatasetConfig(path=str(tmp_path / "pairs.tsv"), kind="pairs", score_range=(0, 5),
                       columns={c: c for c in HEADER})
    ingest_tables(wh, "syn", ds, tmp_path / "pairs.tsv", "r0")
    options = MetricsOptions(aspects=("smatch",), vectors="random")
    score = partial(score_pairs, options=options)
    assert metrics_stage(wh, "p", "syn", options, "r1", score, commit_rows=5).rows_computed == 12
    assert wh.read("syn", "amr_metrics")["graphs_md5"].null_count() == 0

    # the parser now gives sentence 1 of pair p3 another graph (same amr row key): that pair alone is rescored
    pair = wh.read("syn", "pairs").filter(pl.col("item_id") == "p3")
    amr = wh.read("syn", "amr")
    changed = amr.filter(pl.col("sentence_key") == pair["sentence1_key"][0]).with_columns(
        pl.lit("(z / zebra)").alias("penman"))
    wh.upsert("syn", "amr", changed)
    rerun = metrics_stage(wh, "p", "syn", options, "r2", score, commit_rows=5)
    assert (rerun.rows_in, rerun.rows_computed) == (12, 1)
    p3 = wh.read("syn", "amr_metrics").filter(pl.col("item_id") == "p3")
    # the old graphs' row goes: no pair has those graphs any more (readers by split or sentence see one row)
    assert p3.height == 1 and wh.read("syn", "amr_metrics").height == 12

    # a table written before graphs_md5 existed: nothing is skipped by graphs, the content keys still find all done
    old = wh.read("syn", "amr_metrics").drop("graphs_md5")
    write_deltalake(str(wh.table_path("syn", "amr_metrics")), old.to_arrow(), mode="overwrite",
                    schema_mode="overwrite")
    assert metrics_stage(wh, "p", "syn", options, "r3", score, commit_rows=5).rows_computed == 0


def test_pair_keys_equal_pair_key_for_every_pair():
    options = MetricsOptions(aspects=("smatch", "wlk"), vectors="random", extra={"parser": "ud"})
    amr1, amr2 = [WANT, CAT_DOG, None, "ü (x"], [WANT_NOT, DOG_CAT, WANT, ""]
    expected = [options.pair_key(a or "", b or "") for a, b in zip(amr1, amr2, strict=True)]
    assert options.pair_keys(amr1, amr2) == expected


def test_small_input_runs_in_process_and_the_choice_follows_the_measured_cost():
    from amrsim.metrics.engine import PairScorer

    frame = pl.DataFrame({"amr1": [WANT, CAT_DOG, DOGS3], "amr2": [WANT_NOT, DOG_CAT, DOGS2]})
    options = MetricsOptions(aspects=("smatch",))
    with PairScorer(options, cores=2, idle_cores=2.0) as scorer:
        rows = scorer(frame)
        assert not scorer.used_pool and scorer._pool is None  # three cheap pairs: no worker processes
        per_pair = scorer._seconds_per_pair
        assert per_pair is not None and per_pair > 0  # measured while scoring them
        start = scorer.start_up_seconds()
        few, many = int(start / per_pair / 4), int(4 * start / per_pair) + 1
        assert not scorer.pool_pays_off(few) and scorer.pool_pays_off(many)
    assert rows.drop("seconds").equals(score_pairs(frame, options).drop("seconds"))
    with PairScorer(options, workers=1, cores=2, idle_cores=2.0) as one:
        one._seconds_per_pair = per_pair
        assert not one.pool_pays_off(10 * many)  # --workers 1 overrides
    with PairScorer(options, cores=2, idle_cores=1.0) as busy:
        busy._seconds_per_pair = per_pair
        assert not busy.pool_pays_off(10 * many)  # other jobs hold the second core: a worker would only share it


def test_a_pilot_that_finds_the_pool_pays_off_sends_the_rest_there(monkeypatch):
    """The automatic choice scores the first slice here, timed; when the rest pays off on the pool, only the rest
    goes there, and the rows are those of scoring every pair here."""
    from amrsim.metrics import engine

    frame = pl.DataFrame({"amr1": [WANT, CAT_DOG, DOGS3, MERKEL] * 10,
                          "amr2": [WANT_NOT, DOG_CAT, DOGS2, SIEMENS] * 10})
    options = MetricsOptions(aspects=("smatch", "concepts"), vectors="random")
    for name in ("PILOT_S", "POOL_START_S", "VECTORS_LOAD_S"):  # a pool that costs nothing to start: it pays off
        monkeypatch.setattr(engine, name, 0.0)
    sent, real = [], engine.PairScorer._on_pool
    monkeypatch.setattr(engine.PairScorer, "_on_pool", lambda self, a, b: sent.append(len(a)) or real(self, a, b))
    with engine.PairScorer(options, cores=2, idle_cores=2.0) as scorer:
        rows = scorer(frame)
        assert scorer.used_pool
    assert sent == [40 - engine.PILOT_SLICE]
    assert rows.drop("seconds").equals(score_pairs(frame, options).drop("seconds"))


def test_a_pilot_times_pairs_not_the_processs_first_loading(monkeypatch, tmp_path):
    """The node vectors (seconds to load) and POT's import are loaded before the pilot's clock starts: counted as the
    first pairs' cost, in a fresh process they made every file look dear enough for worker processes (a 1,379-pair
    file went to a pool at a third of the in-process rate)."""
    import functools
    import time

    from amrsim.metrics import engine
    from amrsim.metrics.vectors import load_node_vectors

    @functools.cache
    def slow_vectors(source: str, seed: int):  # loading costs half a CPU second, as MiniLM's matrix does
        t0 = time.thread_time()  # this thread's CPU time, never ahead of the wall clock (the process's is)
        while time.thread_time() - t0 < 0.5:
            pass
        return load_node_vectors("random", seed=seed)

    monkeypatch.setattr(engine, "_node_vectors", slow_vectors)
    engine._SCORERS.clear()
    options = MetricsOptions(aspects=("concepts", "root_sim"), vectors="random")
    frame = pl.DataFrame({"amr1": [WANT, CAT_DOG] * 8, "amr2": [DOG_CAT, WANT] * 8})  # other roots: vectors read
    with engine.PairScorer(options, cores=2, idle_cores=2.0) as scorer:
        rows = scorer(frame)
        assert not scorer.used_pool and rows["root_sim"].is_not_null().all()
        assert scorer._seconds_per_pair < 0.5 / frame.height  # the loading is in no pair's cost
        assert scorer.loading_seconds >= 0.5  # and is reported apart
    # the command's summary line gives the pairs' rate, and the loading apart
    from typer.testing import CliRunner

    from amrsim.cli import app

    slow_vectors.cache_clear()
    engine._SCORERS.clear()
    path, out = tmp_path / "pairs.jsonl", tmp_path / "scores.parquet"
    path.write_text("".join(json.dumps({"amr1": a, "amr2": b}) + "\n" for a, b in frame.iter_rows()), encoding="utf-8")
    result = CliRunner().invoke(app, ["metrics", "score", "--file", str(path), "--out", str(out), "--aspects",
                                      "concepts,root_sim", "--vectors", "random"])
    assert result.exit_code == 0, result.output
    assert "16 computed (" in result.output and "s loading node vectors and libraries first)" in result.output
    engine._SCORERS.clear()


def test_given_workers_use_one_pool_for_every_call():
    from amrsim.metrics.engine import PairScorer

    frame = pl.DataFrame({"amr1": [WANT, CAT_DOG, "(a / b", MERKEL], "amr2": [WANT_NOT, DOG_CAT, WANT, SIEMENS]})
    options = MetricsOptions(aspects=("smatch", "wlk"), vectors="random")
    with PairScorer(options, workers=2) as scorer:
        first = scorer(frame)
        pool = scorer._pool
        second = scorer(frame.reverse())
        assert scorer.used_pool and pool is not None and scorer._pool is pool  # started once, reused
    assert scorer._pool is None  # closed with the block
    single = score_pairs(frame, options).drop("seconds")
    assert first.drop("seconds").equals(single)
    assert second.drop("seconds").equals(single.reverse())


def test_metrics_score_cli_fails_a_graph_cell_that_is_not_a_string(tmp_path):
    from typer.testing import CliRunner

    from amrsim.cli import app

    path, out = tmp_path / "pairs.jsonl", tmp_path / "scores.parquet"
    rows = [{"amr1": WANT, "amr2": WANT_NOT, "idx": 1}, {"amr1": ["(w / want-01)"], "amr2": WANT, "idx": 2}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["metrics", "score", "--file", str(path), "--out", str(out), "--aspects", "smatch",
                                      "--vectors", "random", "--workers", "1", "--keep", "idx"])
    assert result.exit_code == 0, result.output
    table = pl.read_parquet(out).sort("line")
    assert "__error" not in table.columns and table["idx"].to_list() == ["1", "2"]
    assert table["status"].to_list() == ["ok", "failed"]
    assert table["error"][1] == "column 'amr1' holds a list, not a string"


def test_metrics_score_cli_fails_a_graph_cell_with_a_lone_surrogate(tmp_path):
    """A JSONL graph cell escaping half a surrogate pair is that pair's failed row (naming the column); the other
    pairs are scored and written."""
    from typer.testing import CliRunner

    from amrsim.cli import app

    path, out = tmp_path / "pairs.jsonl", tmp_path / "scores.parquet"
    lines = [json.dumps({"amr1": WANT, "amr2": WANT_NOT}),
             json.dumps({"amr1": WANT, "amr2": WANT.replace("boy", "boy@")}).replace("@", "\\ud800"),
             json.dumps({"amr1": WANT_GIRL, "amr2": WANT})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["metrics", "score", "--file", str(path), "--out", str(out), "--aspects", "smatch",
                                      "--vectors", "random", "--workers", "1"])
    assert result.exit_code == 0, result.output
    table = pl.read_parquet(out).sort("line")
    assert table["line"].to_list() == [1, 2, 3]
    assert table["status"].to_list() == ["ok", "failed", "ok"]
    assert table["error"][1] == "column 'amr2' holds a lone surrogate (\\ud800 at character 28), not valid Unicode text"
    assert table["smatch_f1"][0] is not None and table["smatch_f1"][2] is not None


def test_metrics_score_cli_writes_the_same_table_whether_rows_are_new_reused_or_repeated(tmp_path):
    """A fresh file whose pairs are all distinct is written straight from the scores; earlier results or a pair given
    twice go through the key join. Both give the same table: columns, order, types and values."""
    from typer.testing import CliRunner

    from amrsim.cli import app

    def run(rows: list[dict], out) -> pl.DataFrame:
        path = tmp_path / "pairs.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
        result = CliRunner().invoke(app, ["metrics", "score", "--file", str(path), "--out", str(out), "--aspects",
                                          "smatch", "--workers", "1", "--keep", "idx"])
        assert result.exit_code == 0, result.output
        return pl.read_parquet(out)

    rows = [{"amr1": a, "amr2": b, "idx": i} for i, (a, b) in
            enumerate([(WANT, WANT_NOT), (WANT_GIRL, WANT), (CAT_DOG, DOG_CAT), ("(a / b", WANT)])]
    fresh = run(rows, tmp_path / "a.parquet")
    assert fresh.columns[:2] == ["key", "line"] and fresh["status"].to_list() == ["ok", "ok", "ok", "failed"]
    assert run(rows, tmp_path / "a.parquet").equals(fresh)  # every row reused
    twice = run([*rows, rows[1]], tmp_path / "b.parquet")
    assert twice.head(4).drop("seconds").equals(fresh.drop("seconds"))
    assert twice.row(4, named=True) | {"line": 2} == twice.row(1, named=True)


def test_smatch_alone_gives_the_rows_of_the_general_loop(monkeypatch):
    """`--aspects smatch` takes its own loop (encodings kept, no dict per pair); its rows equal the general loop's,
    failures included, and a label table that starts over between two graphs changes nothing."""
    from amrsim.metrics import engine
    from amrsim.metrics import smatch as smatch_module

    amr1 = [WANT, WANT_NOT, CAT_DOG, "(a / b", None, MERKEL, WANT]
    amr2 = [WANT_GIRL, WANT, DOG_CAT, WANT, WANT, SIEMENS, "(x / y :ARG0 z)"]
    frame = pl.DataFrame({"amr1": amr1, "amr2": amr2})
    cols = ["key", "smatch_precision", "smatch_recall", "smatch_f1", "status", "error", "bounded"]
    alone = score_pairs(frame, MetricsOptions(aspects=("smatch",), convention="smatch")).select(cols)
    general = engine._score_columns(amr1, amr2, MetricsOptions(aspects=("smatch", "concepts"), convention="smatch"))
    assert alone.drop("key").equals(general.select(cols[1:]))
    assert alone["status"].to_list().count("failed") == 3
    engine._SCORERS.clear()
    monkeypatch.setattr(smatch_module, "MAX_LABELS", 0)  # every graph starts a new label table
    again = score_pairs(frame, MetricsOptions(aspects=("smatch",), convention="smatch")).select(cols)
    assert again.equals(alone)
    # a long file: the loop looks at the table once a slice (256 pairs) and starts over there (here: each time), and
    # the graph it kept from the pair before (WANT, in both pairs 255 and 256) is encoded again in the new table
    many = pl.DataFrame({"amr1": [WANT] * 1030, "amr2": [WANT_GIRL, CAT_DOG] * 515})
    monkeypatch.undo()
    engine._SCORERS.clear()
    expected = score_pairs(many, MetricsOptions(aspects=("smatch",), convention="smatch")).select(cols)
    monkeypatch.setattr(smatch_module, "MAX_LABELS", 0)
    engine._SCORERS.clear()
    assert score_pairs(many, MetricsOptions(aspects=("smatch",), convention="smatch")).select(cols).equals(expected)


def test_smatch_alone_gives_the_same_rows_on_any_threads_and_slices(monkeypatch):
    """Each slice is read, encoded and aligned in one C call on its threads, the pairs the C reader leaves (a text
    not ASCII, one it does not read, None) by the Python path: rows come out in input order, the same whatever the
    threads and slice size, failures included; a C call that raises fails its slice's pairs only, and the next slice
    is scored."""
    from amrsim.metrics import engine

    amr1 = [WANT, WANT_NOT, CAT_DOG, "(a / b", None, MERKEL, WANT, DOG_CAT, WANT_GIRL, "(c / café)", WANT]
    amr2 = [WANT_GIRL, WANT, DOG_CAT, WANT, WANT, SIEMENS, "(x / y :ARG0 z)", CAT_DOG, WANT, "(c / cafe)", "(c / café)"]
    options = MetricsOptions(aspects=("smatch",), convention="smatch")
    cols = ["smatch_precision", "smatch_recall", "smatch_f1", "status", "error", "bounded"]
    expected = engine._score_columns(amr1, amr2, MetricsOptions(aspects=("smatch", "concepts"),
                                                                convention="smatch")).select(cols)
    assert expected["status"].to_list().count("ok") == 8 and expected["smatch_f1"][10] < 1.0
    for size in (1, 2, 4, 256):
        monkeypatch.setattr(engine, "SMATCH_SLICE", size)
        for threads in (1, 2, 3):
            got = engine._score_columns(amr1, amr2, options, threads)
            assert got.select(cols).equals(expected), (size, threads)
            assert got["seconds"].min() >= 0.0
    monkeypatch.setattr(engine, "SMATCH_SLICE", 4)
    real = engine.align_texts

    def broken_second_slice(first, second, *args, **kw):  # the slice of pairs 4-7, the one with MERKEL
        if MERKEL in first:
            raise RuntimeError("search broke")
        return real(first, second, *args, **kw)

    monkeypatch.setattr(engine, "align_texts", broken_second_slice)
    got = engine._score_columns(amr1, amr2, options, 2)
    assert got.slice(4, 4)["error"].to_list() == ["RuntimeError: search broke"] * 4
    assert got.slice(4, 4)["status"].to_list() == ["failed"] * 4
    assert got.slice(0, 4).select(cols).equals(expected.slice(0, 4))
    assert got.slice(8, 3).select(cols).equals(expected.slice(8, 3))


def test_all_aspects_give_the_same_rows_on_threads(monkeypatch):
    """Each slice's Smatch-family searches run at once after its Python scoring, on other threads while later slices
    are scored (a few slices ahead): the rows are those of scoring each pair in turn (`_Scorer.score`, searches run
    one by one), in input order, on real pairs with failures among them, whatever the threads, slices and lookahead,
    from a fresh scorer."""
    from amrsim.metrics import engine

    path = shared("amr_bamboo", "bamboo_sts_main_test.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][:60]
    amr1 = [r["amr1"] for r in rows] + ["(a / b", None, WANT, "(a / b)"]
    amr2 = [r["amr2"] for r in rows] + [WANT, WANT, "(x / y :ARG0 z)", "(a / b)"]
    options = MetricsOptions(vectors="random")
    cols = [c for c in engine._score_columns([], [], options).columns if c != "seconds"]
    engine._SCORERS.clear()
    one_by_one = [engine._scorer(options).score(a, b) for a, b in zip(amr1, amr2, strict=True)]
    text = ("status", "error", "bounded")
    expected = pl.DataFrame({c: [row.get(c) for row in one_by_one] for c in cols},
                            schema={c: pl.String if c in text else pl.Float64 for c in cols})
    assert expected["status"].to_list().count("failed") == 3
    for size, ahead in ((128, 16), (7, 16), (7, 1), (1, 3)):
        monkeypatch.setattr(engine, "ASPECTS_SLICE", size)
        monkeypatch.setattr(engine, "SLICES_AHEAD", ahead)
        for threads in (1, 2, 3):
            engine._SCORERS.clear()
            got = engine._score_columns(amr1, amr2, options, threads)
            assert got.select(cols).equals(expected), (size, ahead, threads)
            assert got["seconds"].min() >= 0.0


def test_a_pilot_is_asked_between_slices_and_ends_scoring_where_it_says(monkeypatch):
    """`decide` is asked after each slice (a pilot's slices grow from PILOT_SLICE pairs): True ends scoring there,
    with the rows out so far, which are the first rows of the whole run; False goes on to the end and is not asked
    again. While it has not answered, no slice starts before the one before it is out (the process's CPU time is
    then the cost of the rows out); once it has, slices start ahead again. Both loops."""
    from amrsim.metrics import engine

    amr1 = [WANT, WANT_NOT, CAT_DOG, "(a / b", MERKEL, WANT, DOG_CAT, WANT_GIRL] * 5
    amr2 = [WANT_GIRL, WANT, DOG_CAT, WANT, SIEMENS, "(x / y :ARG0 z)", CAT_DOG, WANT] * 5
    monkeypatch.setattr(engine, "PILOT_SLICE", 2)
    monkeypatch.setattr(engine, "ASPECTS_SLICE", 8)
    monkeypatch.setattr(engine, "SMATCH_SLICE", 4)
    for options, sizes in ((MetricsOptions(aspects=("smatch", "concepts", "wlk"), vectors="random"),
                            [2, 6, 14, 22, 30, 38, 40]),
                           (MetricsOptions(aspects=("smatch",), convention="smatch"), list(range(4, 41, 4)))):
        whole = engine._score_columns(amr1, amr2, options, 2).drop("seconds")
        for answers in ([True], [None, None, True], [None, False], [False]):
            asked: list[int] = []

            def decide(done: int, answers=answers, asked=asked) -> bool | None:
                asked.append(done)
                return answers[len(asked) - 1]

            got = engine._score_columns(amr1, amr2, options, 2, decide).drop("seconds")
            assert asked == sizes[:len(answers)], (options.aspects, answers)
            assert got.equals(whole.head(sizes[len(answers) - 1] if answers[-1] else len(amr1)))
    # the order of the aspects loop's parts: one slice at a time while undecided, then SLICES_AHEAD ahead
    options = MetricsOptions(aspects=("smatch", "concepts"), vectors="random")
    parts, real = [], engine._score_slice
    monkeypatch.setattr(engine, "SLICES_AHEAD", 2)
    monkeypatch.setattr(engine, "_score_slice", lambda scorer, a, b, part: parts.append((part, len(a)))
                        or real(scorer, a, b, part))
    answers = iter([None, False])
    engine._score_columns(amr1, amr2, options, 2, lambda done: next(answers))
    assert parts[:8] == [("family", 2), ("rest", 2), ("family", 4), ("rest", 4), ("family", 8), ("family", 8),
                         ("family", 8), ("rest", 8)]


def test_aspect_searches_cut_or_failing_in_a_slice(monkeypatch):
    """A search its budget cut names its aspect in `bounded`, in the aspects' order; a pair whose tables do not fit
    in memory, or a slice whose batch of searches raises, fails those pairs only (the others and the next slice are
    scored)."""
    from amrsim.metrics import engine

    options = MetricsOptions(aspects=("concepts", "srl", "smatch", "unlabeled"), vectors="random")
    amr1, amr2 = [WANT, WANT_NOT, CAT_DOG, WANT], [WANT_GIRL, WANT, DOG_CAT, "(a / b"]
    real = engine.align_many
    monkeypatch.setattr(engine, "ASPECTS_SLICE", 2)

    def cut(first, second, **kw):
        return [r[:3] + (False,) + r[4:] for r in real(first, second, **kw)]

    monkeypatch.setattr(engine, "align_many", cut)
    got = engine._score_columns(amr1, amr2, options, 2)
    assert got["bounded"].to_list()[:3] == ["srl,smatch,unlabeled"] * 3 and got["status"][3] == "failed"

    cat_dog = engine._scorer(options).view(CAT_DOG)[1].encoded("triples").data

    def no_memory_for_cat_dog(first, second, **kw):  # its Smatch search only
        return [None if e1.data == cat_dog else r for e1, r in zip(first, real(first, second, **kw), strict=True)]

    monkeypatch.setattr(engine, "align_many", no_memory_for_cat_dog)
    got = engine._score_columns(amr1, amr2, options, 2)
    assert got["status"].to_list() == ["ok", "ok", "failed", "failed"]
    assert got["error"][2] == engine.SEARCH_OOM and got["concepts"][2] is None

    def broken(first, second, **kw):
        if len(first) > 4:  # the first slice's searches (the second has one pair and a failure)
            raise RuntimeError("search broke")
        return real(first, second, **kw)

    monkeypatch.setattr(engine, "align_many", broken)
    got = engine._score_columns(amr1, amr2, options, 2)
    assert got["error"].to_list()[:2] == ["RuntimeError: search broke"] * 2
    assert got["status"][2] == "ok" and got["smatch_f1"][2] is not None


def test_an_interrupted_aspects_loop_cancels_the_searches_queued_ahead(monkeypatch):
    """Ctrl-C while slices wait for their searches: the searches not yet started are cancelled, so the command stops
    after the one running, not after every slice of the window."""
    import threading
    import time as clock

    from amrsim.metrics import engine

    options = MetricsOptions(aspects=("smatch", "concepts"), vectors="random")
    amr1, amr2 = [WANT, CAT_DOG] * 6, [WANT_GIRL, DOG_CAT] * 6
    started = []
    release = threading.Event()
    real_search, real_slice = engine.align_many, engine._score_slice

    def slow(first, second, **kw):
        started.append(len(first))
        release.wait(5)
        return real_search(first, second, **kw)

    def interrupted(scorer, a, b, part):  # Ctrl-C in the other aspects of the first slice: six searches submitted
        if part == "rest":
            raise KeyboardInterrupt
        return real_slice(scorer, a, b, part)

    monkeypatch.setattr(engine, "ASPECTS_SLICE", 2)
    monkeypatch.setattr(engine, "align_many", slow)
    monkeypatch.setattr(engine, "_score_slice", interrupted)
    threading.Timer(0.5, release.set).start()
    t0 = clock.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        engine._score_columns(amr1, amr2, options, 2)
    assert len(started) == 1  # the slices queued behind the running search never started
    assert clock.perf_counter() - t0 < 4


@pytest.mark.slow
def test_a_pool_worker_ends_quietly_on_ctrl_c(capfd):
    """A terminal's Ctrl-C reaches the worker processes too: each ends by the signal's default action, without a
    KeyboardInterrupt traceback of its own (the command reports the stop once)."""
    import os
    import signal
    import time

    pool = worker_pool(1)
    try:
        pool.submit(time.sleep, 0).result()  # the worker has started and run its initializer
        (pid, process), = pool._processes.items()
        os.kill(pid, signal.SIGINT)
        # the pool's own thread may reap the worker first; its exit code shows on the process once it has
        deadline = time.monotonic() + 10
        while process.exitcode is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.exitcode == -signal.SIGINT
    finally:
        pool.shutdown(cancel_futures=True)
    assert "Traceback" not in capfd.readouterr().err


def test_a_pool_worker_ignores_sigint_where_the_command_does():
    """A command started in the background by a shell (or under nohup) ignores SIGINT and goes on; its workers
    inherit that and go on too, instead of dying under it (which failed the command with BrokenProcessPool)."""
    import os
    import signal
    import time

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        pool = worker_pool(1)
        try:
            pool.submit(time.sleep, 0).result()
            (pid, process), = pool._processes.items()
            os.kill(pid, signal.SIGINT)
            time.sleep(0.3)
            assert process.exitcode is None
            assert pool.submit(sum, [1, 2]).result(timeout=30) == 3  # the same worker, still serving
        finally:
            pool.shutdown(cancel_futures=True)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_pair_whose_other_aspects_fail_keeps_no_family_scores(monkeypatch):
    """The two parts of a row (Smatch family first, then the rest): a pair whose second part raises is a failed row
    with that error and no score of the first part, as when the whole row raised; its neighbours are scored."""
    from amrsim.metrics import aspects, engine
    from amrsim.metrics import wlk as wlk_module

    real = wlk_module.wlk

    def broken_for_cat_dog(g1, g2, **kw):
        if any(c == "cat" for _, _, c in g1.triples):
            raise RuntimeError("wlk broke")
        return real(g1, g2, **kw)

    monkeypatch.setattr(aspects, "wlk", broken_for_cat_dog)  # the name the WLK aspect's scorer calls
    options = MetricsOptions(aspects=("smatch", "unlabeled", "wlk"), vectors="random")
    for threads in (1, 2):
        engine._SCORERS.clear()
        got = engine._score_columns([WANT, CAT_DOG, WANT], [WANT_GIRL, DOG_CAT, WANT_NOT], options, threads)
        assert got["status"].to_list() == ["ok", "failed", "ok"]
        assert got["error"][1] == "RuntimeError: wlk broke"
        assert got.row(1, named=True)["smatch_f1"] is None and got.row(1, named=True)["unlabeled"] is None
        assert got["smatch_f1"][0] is not None and got["wlk"][2] is not None


def test_metrics_score_cli_dereifies_on_request(tmp_path):
    """`--dereify` collapses reified nodes before Smatch (a have-mod-91 graph then equals its :mod form), in the
    smatch-only C path and the all-aspects path alike; it is part of the rows' key, so an earlier file is not reused."""
    from typer.testing import CliRunner

    from amrsim.cli import app

    reified = "(s / sing-01 :ARG0 (b / bird) :ARG1-of (h / have-mod-91 :ARG2 (l / loud)))"
    plain = "(s / sing-01 :ARG0 (b / bird) :mod (l / loud))"
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"amr1": reified, "amr2": plain}) + "\n", encoding="utf-8")
    for aspects in ("smatch", "smatch,srl,concepts"):
        f1 = {}
        for flag in ([], ["--dereify"]):
            out = tmp_path / f"{aspects}{len(flag)}.parquet"
            result = CliRunner().invoke(app, ["metrics", "score", "--file", str(path), "--out", str(out),
                                              "--aspects", aspects, "--vectors", "random", "--workers", "1", *flag])
            assert result.exit_code == 0, result.output
            f1[bool(flag)] = pl.read_parquet(out)["smatch_f1"][0]
        assert f1[True] == 1.0 and f1[False] < 0.8
    assert MetricsOptions(dereify=True).pair_key(reified, plain) != MetricsOptions().pair_key(reified, plain)


def test_options_refuse_an_aspect_named_twice():
    with pytest.raises(ValueError, match="named twice: smatch"):
        MetricsOptions(aspects=("smatch", "concepts", "smatch"))


def test_check_vectors_reads_a_vectors_file_at_once(tmp_path):
    from amrsim.errors import InputError
    from amrsim.metrics.engine import check_vectors

    not_vectors = tmp_path / "notes.md"
    not_vectors.write_text("# notes\n\nsome words on a line\n")
    with pytest.raises(InputError, match="notes.md:3: not a vectors file"):
        check_vectors(MetricsOptions(aspects=("root_sim",), vectors=f"file:{not_vectors}"))
    check_vectors(MetricsOptions(aspects=("smatch",), vectors=f"file:{not_vectors}"))  # no aspect reads vectors
