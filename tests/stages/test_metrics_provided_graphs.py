"""Graphs given in the input are kept per pair: a sentence given different graphs in different rows keeps each, every
pair is scored on the graphs its own row gave, a refresh computes nothing, and an older warehouse (one provided
graph per sentence) is refused by the metrics stage until ingest rewrites it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from functools import partial

import polars as pl
import pytest
from deltalake import write_deltalake

from amrsim.config import DatasetConfig
from amrsim.errors import WarehouseError
from amrsim.metrics.engine import MetricsOptions, score_pairs
from amrsim.stages import metric_graph_pairs, metrics_stage
from amrsim.stages.ingest import ingest_tables
from amrsim.warehouse.keys import content_key

WANT = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
WANT_NOT = "(w / want-01 :polarity - :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
WANT_GIRL = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 (g2 / girl)))"
DOGS2 = "(d / dog :quant 2)"
BOY = "The boy wants to go."  # given WANT_NOT in pair a, WANT in pair b

HEADER = ["idx", "gold", "sentence1", "sentence2", "amr1", "amr2"]
ROWS = [
    ["a", "1.0", BOY, "The boy wants the girl to go.", WANT_NOT, WANT_GIRL],  # first: the old layout kept WANT_NOT
    ["b", "5.0", BOY, "He wants to go.", WANT, WANT],  # its two graphs are equal: Smatch 1.0
    ["c", "2.0", "Broken graph.", BOY, "(a / b", WANT],  # a graph that fails to read: a failed metrics row
    ["d", "0.0", "No graph.", "Two dogs.", "", DOGS2],  # an empty graph: a failed amr row, the pair is not scored
]
OPTIONS = MetricsOptions(aspects=("smatch", "negation"), vectors="random", extra={"parser": "provided"})
SCORE = partial(score_pairs, options=OPTIONS)


def dataset(path) -> DatasetConfig:
    return DatasetConfig(path=str(path), kind="pairs", split="test",
                         columns={"id": "idx", "score": "gold", "amr1": "amr1", "amr2": "amr2"})


def metrics_of(wh, name="bam") -> dict[str, dict]:
    rows = wh.read(name, "amr_metrics").sort("item_id")
    assert rows["item_id"].is_unique().all(), "one metrics row per pair here"
    return {r["item_id"]: r for r in rows.iter_rows(named=True)}


def versions(wh, name="bam") -> dict[str, int | None]:
    return {t: wh.version(name, t) for t in ("sentences", "pairs", "amr", "amr_metrics")}


def test_a_sentence_keeps_each_graph_and_every_pair_is_scored_on_its_own(wh, write_tsv):
    path = write_tsv("pairs.tsv", HEADER, ROWS)
    ingest_tables(wh, "bam", dataset(path), path, "r0")
    pairs = wh.read("bam", "pairs").sort("item_id")
    amr = wh.read("bam", "amr")
    boy = amr.filter(pl.col("sentence_key") == pairs["sentence1_key"][0])
    assert sorted(boy["penman"].to_list()) == sorted([WANT, WANT_NOT])  # both kept
    assert amr.filter(pl.col("penman") == WANT).height == 2  # one row per (sentence, graph): BOY and "He wants ..."
    given = {r["item_id"]: r for r in pairs.join(amr.select(amr1_key="key", amr1="penman"), on="amr1_key")
             .join(amr.select(amr2_key="key", amr2="penman"), on="amr2_key").iter_rows(named=True)}
    assert [(given[i]["amr1"], given[i]["amr2"]) for i in "abcd"] == [(r[4], r[5]) for r in ROWS]
    assert amr.filter(pl.col("status") == "failed")["error"].to_list() == ["empty graph"]

    run = metrics_stage(wh, "p", "bam", OPTIONS, "r1", SCORE)
    assert (run.rows_in, run.rows_computed, run.rows_failed) == (3, 3, 1)  # d: no ok graph for sentence1
    m = metrics_of(wh)
    assert m["b"]["smatch_f1"] == pytest.approx(1.0) and m["b"]["negation"] == 1.0  # not WANT_NOT vs WANT
    assert m["a"]["negation"] == 0.0 and m["a"]["smatch_f1"] < 1.0
    assert m["c"]["status"] == "failed" and m["c"]["error"].startswith("amr1: ")
    assert m["b"]["key"] == OPTIONS.pair_key(WANT, WANT)  # the metrics row is keyed by the pair's own graphs
    graphs = {r["item_id"]: (r["amr1"], r["amr2"]) for r in metric_graph_pairs(wh, "bam", "provided").iter_rows(
        named=True)}
    assert graphs == {"a": (WANT_NOT, WANT_GIRL), "b": (WANT, WANT), "c": ("(a / b", WANT)}

    # a refresh with unchanged inputs computes and commits nothing
    before = versions(wh)
    assert ingest_tables(wh, "bam", dataset(path), path, "r2").rows_computed == 0
    again = metrics_stage(wh, "p", "bam", OPTIONS, "r3", SCORE)
    assert (again.rows_in, again.rows_computed, again.outputs) == (3, 0, [])
    assert versions(wh) == before
    lineage = wh.read("meta", "lineage").filter(pl.col("run_id") == "r1")
    assert json.loads(lineage["input_versions"][0]) == {"pairs": before["pairs"], "amr": before["amr"]}


def test_a_graph_changed_in_the_file_rescores_that_pair_alone(wh, write_tsv):
    path = write_tsv("pairs.tsv", HEADER, ROWS)
    ingest_tables(wh, "bam", dataset(path), path, "r0")
    metrics_stage(wh, "p", "bam", OPTIONS, "r1", SCORE)
    old_b = metrics_of(wh)["b"]
    edited = [r[:] for r in ROWS]
    edited[0][4] = WANT  # pair a now gives BOY the graph pair b gives it
    path = write_tsv("pairs.tsv", HEADER, edited)
    ingest_tables(wh, "bam", dataset(path), path, "r2")
    amr = wh.read("bam", "amr")
    assert WANT_NOT not in amr["penman"].to_list()  # no row gives it any more: ingest removed it
    pairs = wh.read("bam", "pairs").sort("item_id")
    assert pairs["amr1_key"][0] == pairs["amr1_key"][1]  # a and b now name one graph row
    run = metrics_stage(wh, "p", "bam", OPTIONS, "r3", SCORE)
    assert run.rows_computed == 1
    m = metrics_of(wh)
    assert sorted(m) == ["a", "b", "c"]  # a's row for its old graphs is gone: no pair has them
    assert m["a"]["negation"] == 1.0 and m["b"]["key"] == old_b["key"]


def test_parsed_graphs_stay_one_per_sentence(wh, write_tsv):
    """Graphs of a parser are the sentence's: pairs without graph columns have null graph keys and keep their key."""
    path = write_tsv("pairs.tsv", HEADER[:4], [r[:4] for r in ROWS])
    ds = DatasetConfig(path=str(path), kind="pairs", split="test", columns={"id": "idx", "score": "gold"})
    ingest_tables(wh, "plain", ds, path, "r0")
    pairs = wh.read("plain", "pairs").sort("item_id")
    assert pairs["amr1_key"].is_null().all() and pairs["amr2_key"].is_null().all()
    assert not wh.exists("plain", "amr")
    row = pairs.row(0, named=True)
    texts = sorted({"sentence1": row["sentence1"], "sentence2": row["sentence2"]}.items())
    assert row["key"] == content_key("pairs", "a", "test", [("sentence1", "en"), ("sentence2", "en")], texts, 1.0)


# -- a warehouse of the older layout: one provided graph per sentence, pairs without graph keys ------------------------

def _to_older_layout(wh, name: str) -> None:
    """Rewrite the dataset as amrsim wrote it before graphs were kept per pair, with the metrics it computed then: the
    first graph each sentence was given (key of the sentence alone), pairs keyed without their graphs, each pair
    scored on its sentences' first graphs."""
    pairs = wh.read(name, "pairs").drop("amr1_key", "amr2_key")
    pairs = pairs.with_columns(key=pl.Series([  # an ok row's key had no graphs in it
        content_key("pairs", r["item_id"], r["split"], [("sentence1", r["lang1"]), ("sentence2", r["lang2"])],
                    [("sentence1", r["sentence1"]), ("sentence2", r["sentence2"])], r["score"])
        if r["status"] == "ok" else r["key"] for r in pairs.iter_rows(named=True)]))
    amr = wh.read(name, "amr").drop("pivot_source")
    first: dict[str, dict] = {}
    for p in wh.read(name, "pairs").sort("source_line").iter_rows(named=True):
        for side in ("1", "2"):
            graph = amr.filter(pl.col("key") == p[f"amr{side}_key"]).row(0, named=True)
            first.setdefault(p[f"sentence{side}_key"], graph | {"key": content_key("amr", graph["sentence_key"],
                                                                                    "provided")})
    old_amr = pl.DataFrame(list(first.values()), schema=amr.schema)
    for table, frame in (("pairs", pairs), ("amr", old_amr)):
        write_deltalake(str(wh.table_path(name, table)), frame.to_arrow(), mode="overwrite", schema_mode="overwrite")
    ok = {k: g for k, g in first.items() if g["status"] == "ok"}
    scored = pairs.filter(pl.col("sentence1_key").is_in(list(ok)) & pl.col("sentence2_key").is_in(list(ok))).select(
        pair_key="key", item_id="item_id", split="split", sentence1_key="sentence1_key",
        sentence2_key="sentence2_key", score="score",
        amr1=pl.col("sentence1_key").replace_strict({k: g["penman"] for k, g in ok.items()}),
        amr2=pl.col("sentence2_key").replace_strict({k: g["penman"] for k, g in ok.items()}))
    scored = SCORE(scored.with_columns(
        key=pl.Series(OPTIONS.pair_keys(scored["amr1"], scored["amr2"])),
        graphs_md5=pl.Series([hashlib.md5(f"{a}\x1f{b}".encode()).hexdigest()
                              for a, b in zip(scored["amr1"], scored["amr2"], strict=True)])))
    scored = scored.drop("amr1", "amr2").with_columns(
        options=pl.lit(json.dumps(OPTIONS.key_fields(), sort_keys=True)),  # as the stage writes them
        **{c: pl.lit(None, pl.Float64) for c in ("smatch_precision", "smatch_recall", "unlabeled", "no_wsd",
                                                  "concepts", "frames", "named_entities", "wikification",
                                                  "reentrancies", "srl", "quant_sim", "root_sim", "max_indegree_sim",
                                                  "max_outdegree_sim", "max_degree_sim", "wlk", "wwlk")
           if c not in scored.columns},
        **({} if "bounded" in scored.columns else {"bounded": pl.lit(None, pl.String)}))
    wh.append(name, "amr_metrics", scored)


def test_an_older_warehouse_is_refused_until_ingest_rewrites_it(wh, write_tsv):
    path = write_tsv("pairs.tsv", HEADER, ROWS)  # a plain file: an unchanged one would be read from its end
    ingest_tables(wh, "bam", dataset(path), path, "r0")
    _to_older_layout(wh, "bam")
    assert metrics_of(wh)["b"]["negation"] == 0.0 and wh.count("bam", "amr_metrics") == 3  # b read a's graph of BOY
    with pytest.raises(WarehouseError, match=r"bam: its provided graphs were ingested by an older amrsim.*Ingest it "
                                             r"again \(`amrsim run <pipeline>`"):
        metrics_stage(wh, "p", "bam", OPTIONS, "r1", SCORE)
    with pytest.raises(WarehouseError, match="older amrsim"):
        metric_graph_pairs(wh, "bam", "provided")  # what training reads

    run = ingest_tables(wh, "bam", dataset(path), path, "r2")  # the same file: read whole, rewritten
    assert "read_from_line" not in json.loads(wh.read("meta", "lineage").filter(
        pl.col("run_id") == "r2")["input_versions"][0])
    assert run.rows_computed == len(ROWS) and set(run.outputs) >= {"pairs", "amr"}
    assert wh.read("bam", "pairs")["amr1_key"].null_count() == 0
    assert wh.read("bam", "amr").height == 7  # the old per-sentence rows are gone
    fixed = metrics_stage(wh, "p", "bam", OPTIONS, "r3", SCORE)
    # b and c (whose sentence2 is BOY) read WANT_NOT before; a's row is found by its content key
    assert (fixed.rows_computed, fixed.rows_failed) == (2, 1)
    m = metrics_of(wh)
    assert sorted(m) == ["a", "b", "c"] and m["b"]["smatch_f1"] == pytest.approx(1.0)  # b's wrong row was dropped
    assert metrics_stage(wh, "p", "bam", OPTIONS, "r4", SCORE).rows_computed == 0


def test_an_older_pairs_table_without_graphs_gains_the_columns_when_rows_are_added(wh, write_tsv):
    path = write_tsv("pairs.tsv", HEADER[:4], [r[:4] for r in ROWS[:2]])
    ds = DatasetConfig(path=str(path), kind="pairs", split="test", columns={"id": "idx", "score": "gold"})
    ingest_tables(wh, "plain", ds, path, "r0")
    old = wh.read("plain", "pairs").drop("amr1_key", "amr2_key")
    write_deltalake(str(wh.table_path("plain", "pairs")), old.to_arrow(), mode="overwrite", schema_mode="overwrite")
    metrics_stage(wh, "p", "plain", OPTIONS, "r1", SCORE)  # no provided graphs: nothing to refuse, nothing to score
    grown = write_tsv("pairs.tsv", HEADER[:4], [r[:4] for r in ROWS[:3]])
    assert ingest_tables(wh, "plain", ds, grown, "r2").rows_computed == 1  # appended (the file only grew)
    shrunk = write_tsv("pairs.tsv", HEADER[:4], [r[:4] for r in ROWS[1:3]])
    ingest_tables(wh, "plain", ds, shrunk, "r3")  # rows deleted and none added: a merge
    pairs = wh.read("plain", "pairs")
    assert sorted(pairs["item_id"]) == ["b", "c"] and pairs["amr1_key"].is_null().all()


def test_mse_amr_reads_a_pairs_own_graphs_and_a_sentence_its_smallest_keyed_one(wh, write_tsv):
    from amrsim.methods.mse_amr.data import sentence_graphs

    path = write_tsv("pairs.tsv", HEADER, ROWS)
    ingest_tables(wh, "bam", dataset(path), path, "r0")
    pairs = wh.read("bam", "pairs").sort("item_id")
    own = sentence_graphs(wh, "bam", "provided", keys=pairs["amr1_key"].to_list()[:2], by="key")
    assert own.ok[pairs["amr1_key"][0]][0] != own.ok[pairs["amr1_key"][1]][0]  # a and b: BOY's two graphs
    amr = wh.read("bam", "amr").filter(pl.col("sentence_key") == pairs["sentence1_key"][0]).sort("key")
    by_sentence = sentence_graphs(wh, "bam", "provided", keys=[pairs["sentence1_key"][0]])
    assert by_sentence.ok[pairs["sentence1_key"][0]][0] == sentence_graphs(
        wh, "bam", "provided", keys=[amr["key"][0]], by="key").ok[amr["key"][0]][0]


def test_s3bert_trains_on_each_pairs_own_graphs_and_metrics(wh, write_tsv):
    from amrsim.stages.train.s3bert import scored_pairs

    path = write_tsv("pairs.tsv", HEADER, ROWS)
    ingest_tables(wh, "bam", dataset(path), path, "r0")
    metrics_stage(wh, "p", "bam", OPTIONS, "r1", SCORE)
    rows, skipped = scored_pairs(wh, "bam", "test", ["en"], "provided", OPTIONS, ["smatch_f1", "negation"])
    by_text = {r["sentence2"]: r for r in rows.iter_rows(named=True)}
    assert (by_text["He wants to go."]["amr1"], by_text["He wants to go."]["smatch_f1"]) == (WANT, pytest.approx(1.0))
    assert by_text["The boy wants the girl to go."]["amr1"] == WANT_NOT
    assert skipped == {"failed pair rows": 0, "graph failed or missing": 1, "metrics failed or missing": 1}


def test_rows_of_an_earlier_metrics_version_are_recomputed_and_removed(wh, write_tsv):
    """Rows written by code of an earlier metrics version (their options carry no or a lower `metrics_version`) are
    not "done": the next run computes the pairs again under the current key and deletes those rows."""
    path = write_tsv("pairs.tsv", HEADER, ROWS)
    ingest_tables(wh, "bam", dataset(path), path, "r0")
    metrics_stage(wh, "p", "bam", OPTIONS, "r1", SCORE)
    current = wh.read("bam", "amr_metrics")
    old_options = json.dumps(asdict(OPTIONS), sort_keys=True)  # what version 1 wrote: no metrics_version
    older = current.with_columns(pl.lit(old_options).alias("options"),
                                 (pl.col("key") + "-v1").alias("key"), pl.lit(0.5).alias("smatch_f1"))
    wh.delete_keys("bam", "amr_metrics", current["key"].to_list())
    wh.append_new("bam", "amr_metrics", older)
    run = metrics_stage(wh, "p", "bam", OPTIONS, "r2", SCORE)
    assert run.rows_computed == 3  # every pair again: the old rows were not taken as done
    m = metrics_of(wh)  # one row per pair: the version-1 rows are gone
    assert m["b"]["smatch_f1"] == pytest.approx(1.0) and m["b"]["key"] == OPTIONS.pair_key(WANT, WANT)
    assert all(json.loads(r["options"])["metrics_version"] >= 2 for r in m.values())
