"""The metrics stage: AMR metrics of every graph pair of a dataset, streamed through DuckDB and committed in
chunks."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import polars as pl

from amrsim.warehouse.keys import config_hash
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.query import existing_keys, scan_connection
from amrsim.warehouse.schemas import AMR_METRIC_COLUMNS
from amrsim.warehouse.store import OK, Warehouse


def metric_graph_pairs(wh: Warehouse, dataset: str, parser: str) -> pl.DataFrame:
    """Ok pairs whose two sentences have an ok graph from `parser`: item_id, split, keys, score, amr1, amr2."""
    pairs = wh.read(dataset, "pairs").filter(pl.col("status") == OK)
    graphs = wh.read(dataset, "amr").filter((pl.col("status") == OK) & (pl.col("parser") == parser))
    # the graph with the smallest amr key, as GRAPH_PAIRS_SQL's arg_min picks: training looks metrics up by the graphs
    graphs = graphs.sort("key").unique("sentence_key", keep="first").select("sentence_key", "penman")
    return (pairs.select(pair_key="key", item_id="item_id", split="split", sentence1_key="sentence1_key",
                         sentence2_key="sentence2_key", score="score")
            .join(graphs.rename({"sentence_key": "sentence1_key", "penman": "amr1"}), on="sentence1_key")
            .join(graphs.rename({"sentence_key": "sentence2_key", "penman": "amr2"}), on="sentence2_key"))


GRAPH_PAIRS_SQL = """
WITH g AS (SELECT sentence_key, arg_min(penman, key) AS penman FROM amr
           WHERE status = 'ok' AND parser = $parser GROUP BY sentence_key),
j AS (SELECT p.key AS pair_key, p.item_id, p.split, p.sentence1_key, p.sentence2_key, p.score,
             g1.penman AS amr1, g2.penman AS amr2, md5(g1.penman || chr(31) || g2.penman) AS graphs_md5
      FROM pairs p JOIN g g1 ON g1.sentence_key = p.sentence1_key JOIN g g2 ON g2.sentence_key = p.sentence2_key
      WHERE p.status = 'ok')
SELECT j.* EXCLUDE (amr1, amr2), d.pair_key IS NOT NULL AS done,
       CASE WHEN d.pair_key IS NULL THEN j.amr1 END AS amr1, CASE WHEN d.pair_key IS NULL THEN j.amr2 END AS amr2
FROM j LEFT JOIN (SELECT DISTINCT pair_key, graphs_md5 FROM m WHERE options = $options) d
  ON d.pair_key = j.pair_key AND d.graphs_md5 = j.graphs_md5
"""


def stream_graph_pairs(wh: Warehouse, dataset: str, parser: str, options_json: str, rows: int,
                       memory_limit: str = "256MB") -> Iterator[pl.DataFrame]:
    """`metric_graph_pairs` as a stream of frames of up to `rows` rows (order unspecified), plus `graphs_md5` and
    `done`: the pair already has a metrics row for these graphs and options (its graphs are then left out). DuckDB
    joins the tables out of core, so memory is bounded by `rows` and `memory_limit`, not by the table sizes."""
    with tempfile.TemporaryDirectory(prefix="amrsim-duckdb-") as spill:
        tables = {"pairs": (dataset, "pairs"), "amr": (dataset, "amr"), "m": (dataset, "amr_metrics")}
        columns = {"pairs": ["key", "item_id", "split", "sentence1_key", "sentence2_key", "score", "status"],
                   "amr": ["key", "sentence_key", "penman", "status", "parser"],
                   "m": ["pair_key", "graphs_md5", "options"]}
        con = scan_connection(wh, tables, memory_limit, spill, columns)
        try:
            reader = con.sql(GRAPH_PAIRS_SQL, params={"parser": parser, "options": options_json}).to_arrow_reader(rows)
            buffered: list[pl.DataFrame] = []
            size = 0
            for batch in reader:  # DuckDB hands out vectors of ~2048 rows: regroup them into `rows`-row frames
                frame = pl.from_arrow(batch)
                assert isinstance(frame, pl.DataFrame)
                buffered.append(frame)
                size += frame.height
                if size >= rows:
                    yield pl.concat(buffered)
                    buffered, size = [], 0
            if buffered:
                yield pl.concat(buffered)
        finally:
            con.close()


def metrics_stage(wh: Warehouse, pipeline: str, dataset: str, options: Any, run_id: str,
                  score_batches: Callable[[pl.DataFrame], pl.DataFrame], commit_rows: int = 20_000) -> StageRun:
    """AMR metrics for every graph pair of a dataset lacking them; `score_batches` may distribute the work. Pairs
    stream through in chunks of `commit_rows`, each scored chunk one Delta commit: memory is held to a chunk plus
    DuckDB's join memory limit, and a crash loses at most the chunk in flight (a rerun computes only the rest)."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="metrics", dataset=dataset,
                   config_hash=config_hash(asdict(options)))
    options_json = json.dumps(asdict(options), sort_keys=True)
    with record_stage(wh, run):
        run.input_versions = {"pairs": wh.version(dataset, "pairs"), "amr": wh.version(dataset, "amr")}
        parser = options.extra.get("parser", "provided")
        for chunk in stream_graph_pairs(wh, dataset, parser, options_json, commit_rows):
            run.rows_in += chunk.height
            # rows known done by (pair, graphs, options) skip hashing; the content key stays the test for the rest
            chunk = chunk.filter(~pl.col("done")).drop("done")
            if not chunk.height:
                continue
            chunk = chunk.with_columns(pl.Series("key", options.pair_keys(chunk["amr1"], chunk["amr2"]), pl.String))
            chunk = chunk.unique("key", keep="first", maintain_order=True)
            # a failed pair failed on its graphs, which a rerun would not change: failed keys count as done. The
            # check sees this run's earlier commits too, so a key repeated across chunks is computed once.
            done = existing_keys(wh, dataset, "amr_metrics", chunk["key"].to_list())
            todo = chunk.filter(~pl.col("key").is_in(list(done))) if done else chunk
            if not todo.height:
                continue
            scored = score_batches(todo)  # its key column is kept, not computed again
            scored = scored.with_columns(
                pl.lit(options_json).alias("options"),
                *[pl.lit(None, pl.Float64).alias(c) for c in AMR_METRIC_COLUMNS if c not in scored.columns],
                *([] if "bounded" in scored.columns else [pl.lit(None, pl.String).alias("bounded")]))
            # an append (one commit), no merge against the whole table: it leaves out keys a concurrent run
            # committed since the check above, so only the rows it adds are counted
            added = wh.append_new(dataset, "amr_metrics", scored.drop("amr1", "amr2"))
            if "amr_metrics" not in run.outputs:
                run.outputs.append("amr_metrics")
            run.rows_computed += added.num_rows
            run.rows_failed += added.num_rows - added.column("status").to_pylist().count(OK)
        run.rows_out = run.rows_computed
    return run
