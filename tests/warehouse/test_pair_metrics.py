"""The analyst view `pair_metrics` (amrsim/warehouse/analyst.py): one row per pair and metrics configuration, built by
the real ingest and metrics stages over BAMBOO pairs, equal row for row to an independent polars computation that
finds each pair's metrics row by its content key; with repeated graphs (two pairs, one `amr_metrics` row), a
dataset of two languages and a second parser. warehouse/README.md's query gives the per-split, per-language means."""

from __future__ import annotations

import gzip
import itertools
import json
import re

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from amrsim.config import DatasetConfig
from amrsim.metrics import metric_columns
from amrsim.metrics.engine import MetricsOptions, score_pairs
from amrsim.stages import ingest_tables, metrics_stage
from amrsim.warehouse import Warehouse, content_key
from amrsim.warehouse.analyst import view_columns
from amrsim.warehouse.query import query
from tests.helpers import ROOT, shared

README = ROOT / "warehouse" / "README.md"
# every aspect (random node vectors: nothing to load); the second dataset is also scored on a parser's graphs
PROVIDED = MetricsOptions(vectors="random", extra={"parser": "provided"})
UD = MetricsOptions(aspects=("smatch", "negation", "frames"), vectors="random", extra={"parser": "ud"})
OPTIONS = {"provided": PROVIDED, "ud": UD}
COLUMNS = {"id": "idx", "score": "gold", "amr1": "amr1", "amr2": "amr2"}


def bamboo(n: int) -> list[dict]:
    with gzip.open(shared("amr_bamboo", "bamboo_sts_main_test.jsonl.gz"), "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in itertools.islice(f, n)]


def write_jsonl(path, rows: list[dict]):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def ud_graphs(wh: Warehouse, dataset: str, rows: list[dict]) -> None:
    """`amr` rows of a parser (`ud`) for the dataset's sentences, as the parse stage writes them: each sentence its
    first given graph; one sentence's graph failed (its pairs have no ud metrics)."""
    sentences = wh.read(dataset, "sentences")
    graph = {}
    for r in rows:
        graph.setdefault(r["sentence1"], r["amr1"])
        graph.setdefault(r["sentence2"], r["amr2"])
    frame = sentences.select(sentence_key="key", lang="lang", parsed_text="text").with_columns(
        penman=pl.col("parsed_text").replace_strict(graph, default=None), parser=pl.lit("ud"))
    failed = pl.col("parsed_text") == rows[1]["sentence1"]
    frame = frame.with_columns(
        key=pl.struct("sentence_key").map_elements(lambda s: content_key("amr", s["sentence_key"], "ud"), pl.String),
        status=pl.when(failed).then(pl.lit("failed")).otherwise(pl.lit("ok")),
        error=pl.when(failed).then(pl.lit("no graph")).otherwise(pl.lit(None, pl.String)),
        penman=pl.when(failed).then(None).otherwise(pl.col("penman")), pivot_lang=pl.lit(None, pl.String),
        linearized=pl.lit(None, pl.String), seconds=pl.lit(0.0))
    wh.append(dataset, "amr", frame)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    tmp = tmp_path_factory.mktemp("pair_metrics")
    wh = Warehouse(tmp / "warehouse")
    rows = bamboo(8)
    # bamboo_sts_test as the bamboo pipeline defines it, on 8 pairs plus one that repeats pair 0's graphs under
    # another id and gold score: two pairs, one amr_metrics row
    sts = write_jsonl(tmp / "sts.jsonl", [*rows, {**rows[0], "idx": 1000, "gold": 4.0}])
    ingest_tables(wh, "bamboo_sts_test", DatasetConfig(path=str(sts), kind="pairs", split="test", columns=COLUMNS),
                  sts, "r0")
    # two languages and two splits: each of 6 pairs in English and with a German sentence2 (another gold score);
    # the German pair gives the same graphs, so both share one amr_metrics row
    bi = []
    for i, r in enumerate(rows[:6]):
        split = "train" if i < 3 else "dev"
        bi.append({**r, "split": split, "lang1": "en", "lang2": "en"})
        bi.append({**r, "idx": f"{r['idx']}-de", "split": split, "lang1": "en", "lang2": "de",
                   "sentence2": f"(de) {r['sentence2']}", "gold": round(r["gold"] * 0.9, 2)})
    path = write_jsonl(tmp / "bi.jsonl", bi)
    ds = DatasetConfig(path=str(path), kind="pairs", columns={**COLUMNS, "split": "split", "lang1": "lang1",
                                                               "lang2": "lang2"})
    ingest_tables(wh, "bilingual", ds, path, "r0")
    ud_graphs(wh, "bilingual", bi)
    for dataset, options in (("bamboo_sts_test", PROVIDED), ("bilingual", PROVIDED), ("bilingual", UD)):
        metrics_stage(wh, "bamboo", dataset, options, "r1", lambda f, o=options: score_pairs(f, o))
    return wh


def expected(wh: Warehouse, dataset: str) -> pl.DataFrame:
    """The view's rows computed apart from it: each ok pair's graphs (provided: its own; ud: its sentences'), the
    metrics row found by its content key (graphs and options), not by the view's md5 join."""
    pairs = wh.read(dataset, "pairs").filter(pl.col("status") == "ok")
    amr = wh.read(dataset, "amr").filter(pl.col("status") == "ok")
    own = amr.filter(pl.col("parser") == "provided")
    provided = (pairs.join(own.select(amr1_key="key", amr1="penman"), on="amr1_key")
                .join(own.select(amr2_key="key", amr2="penman"), on="amr2_key").with_columns(parser=pl.lit("provided")))
    graph = amr.filter(pl.col("parser") != "provided").sort("key").unique(["sentence_key", "parser"], keep="first")
    parsed = (pairs.join(graph.select("parser", sentence1_key="sentence_key", amr1="penman"), on="sentence1_key")
              .join(graph.select("parser", sentence2_key="sentence_key", amr2="penman"),
                    on=["sentence2_key", "parser"]))
    graphs = pl.concat([provided, parsed.select(provided.columns)])
    graphs = graphs.with_columns(metrics_key=pl.struct("amr1", "amr2", "parser").map_elements(
        lambda g: OPTIONS[g["parser"]].pair_key(g["amr1"], g["amr2"]), pl.String))
    metrics = wh.read(dataset, "amr_metrics").drop("pair_key", "item_id", "split", "sentence1_key", "sentence2_key",
                                                   "score", "seconds", "graphs_md5")
    out = graphs.join(metrics.rename({"key": "metrics_key"}), on="metrics_key").with_columns(dataset=pl.lit(dataset))
    return out.rename({"key": "pair_key"}).select(view_columns())


def rows(frame: pl.DataFrame) -> list[dict]:
    return frame.sort("dataset", "pair_key", "parser").to_dicts()


def test_the_view_is_one_row_per_pair_and_configuration_as_computed_apart(warehouse):
    view = query(warehouse, "SELECT * FROM pair_metrics")
    assert view.columns == view_columns()
    assert [c for c in metric_columns() if c not in view.columns] == []  # every aspect the registry declares
    want = pl.concat([expected(warehouse, d) for d in ("bamboo_sts_test", "bilingual")])
    assert rows(view) == rows(want)
    counts = {f"{d}/{p}": n for d, p, n in view.group_by("dataset", "parser").len().iter_rows()}
    # 9 pairs; 12 pairs; 12 less the two pairs whose sentence's ud graph failed
    assert counts == {"bamboo_sts_test/provided": 9, "bilingual/provided": 12, "bilingual/ud": 10}

    # the trap it removes: amr_metrics holds one row per distinct graph pair, so pairs repeating graphs (pair 0
    # under another id, each German pair) are missing from it, and it has no languages
    metrics = {d: warehouse.read(d, "amr_metrics") for d in ("bamboo_sts_test", "bilingual")}
    assert metrics["bamboo_sts_test"].height == 8
    assert metrics["bilingual"].filter(pl.col("options").str.contains('"provided"')).height == 6
    assert "lang2" not in metrics["bilingual"].columns
    repeated = view.filter(pl.col("dataset") == "bamboo_sts_test").group_by("metrics_key").agg("item_id", "score")
    shared_row = repeated.filter(pl.col("item_id").list.len() == 2).row(0, named=True)
    assert sorted(shared_row["item_id"]) == ["0", "1000"] and sorted(shared_row["score"]) == [2.5, 4.0]
    ud = view.filter(pl.col("parser") == "ud")
    assert ud["wlk"].is_null().all() and ud["smatch_f1"].is_not_null().all()  # aspects not computed: null


def readme_section() -> str:
    return README.read_text(encoding="utf-8").split("\n## The analyst view\n", 1)[1].split("\n## ", 1)[0]


def readme_query() -> str:
    sql = re.findall(r'amrsim query "([^"]+)"', readme_section())
    assert sql, "warehouse/README.md's analyst view section lost its query"
    return sql[0]


def test_the_readme_query_gives_mean_smatch_per_split_and_language(warehouse):
    answer = query(warehouse, readme_query())
    per_pair = query(warehouse, "SELECT * FROM pair_metrics")
    want = (per_pair.filter((pl.col("status") == "ok") & (pl.col("parser") == "provided"))
            .group_by("dataset", "split", "lang1", "lang2")
            .agg(pairs=pl.len(), smatch_f1=pl.col("smatch_f1").mean().round(4))
            .sort("dataset", "split", "lang1", "lang2"))
    assert answer.rows() == want.rows()
    assert answer.columns == want.columns
    assert [r[:5] for r in answer.rows()] == [("bamboo_sts_test", "test", "en", "en", 9),
                                             ("bilingual", "dev", "en", "de", 3), ("bilingual", "dev", "en", "en", 3),
                                             ("bilingual", "train", "en", "de", 3),
                                             ("bilingual", "train", "en", "en", 3)]


def test_the_readme_python_block_reads_the_view(warehouse):
    blocks = re.findall(r"```python\n(.*?)```", readme_section(), re.S)
    assert len(blocks) == 1 and 'Warehouse("warehouse")' in blocks[0]
    namespace: dict = {}
    exec(compile(blocks[0].replace('Warehouse("warehouse")', f"Warehouse({str(warehouse.root)!r})"), str(README),
                 "exec"), namespace)
    means = query(warehouse, "SELECT * FROM pair_metrics WHERE status = 'ok' AND parser = 'provided'")
    want = means.group_by("dataset", "split", "lang1", "lang2").agg(pl.col("smatch_f1").mean())
    assert_frame_equal(namespace["per_split"], want.sort("dataset", "split", "lang1", "lang2"))


def test_a_row_written_before_graphs_md5_reaches_its_recorded_pair_once(warehouse, tmp_path):
    wh = Warehouse(tmp_path / "warehouse")
    for table in ("pairs", "amr", "amr_metrics"):
        wh.append("old", table, warehouse.read("bamboo_sts_test", table))
    metrics = wh.read("old", "amr_metrics")
    one = metrics.filter(pl.col("item_id") == "3")
    wh.upsert("old", "amr_metrics", one.with_columns(graphs_md5=pl.lit(None, pl.String)))
    view = query(wh, "SELECT item_id, smatch_f1 FROM pair_metrics ORDER BY item_id")
    before = query(warehouse, "SELECT item_id, smatch_f1 FROM pair_metrics WHERE dataset = 'bamboo_sts_test' "
                              "ORDER BY item_id")
    assert view.rows() == before.rows()


def test_without_the_aspect_declarations_the_view_says_what_to_load(warehouse, monkeypatch):
    import amrsim.warehouse.query as q

    monkeypatch.setattr(q, "declared_columns", lambda table: [])
    with pytest.raises(duckdb.Error, match=r"pair_metrics: the aspects' declarations are not loaded .*import "
                                           r"amrsim\.metrics"):
        query(warehouse, "SELECT count(*) FROM pair_metrics")
    assert query(warehouse, "SELECT count(*) AS n FROM bilingual.pairs")["n"][0] == 12  # the tables still read


def test_an_empty_warehouse_has_an_empty_view(wh):
    assert query(wh, "SELECT * FROM pair_metrics").columns == view_columns()
