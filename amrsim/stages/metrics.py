"""The metrics stage: AMR metrics of every graph pair of a dataset, streamed through DuckDB and committed in
chunks."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import polars as pl

from amrsim.amr.backends import PROVIDED
from amrsim.errors import WarehouseError
from amrsim.metrics.aspects import ASPECTS
from amrsim.metrics.engine import METRICS_VERSION, aspect_schema
from amrsim.stages.ingest import older_graph_layout
from amrsim.warehouse import OK, Warehouse, config_hash
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.query import scan_connection


def check_graph_layout(wh: Warehouse, dataset: str, parser: str) -> None:
    """Refuse a dataset whose provided graphs were ingested one per sentence (an older amrsim): a pair there may
    read another pair's graph of the same sentence. Ingesting it again rewrites it in the current layout."""
    if parser == PROVIDED and older_graph_layout(wh, dataset):
        raise WarehouseError(
            f"{dataset}: its provided graphs were ingested by an older amrsim, one graph per sentence, so a pair "
            f"could be scored on another pair's graph of the same sentence. Ingest it again (`amrsim run "
            f"<pipeline>`, or the refresh-dataset flow): the pairs then name their own graphs (amr1_key, amr2_key), "
            f"and the next metrics run scores the pairs whose graphs changed and drops the rows no pair uses")


# the pairs' graphs (provided: each pair's own, by amr key; a parser's: each sentence's, by sentence key)
_GRAPHS = {
    PROVIDED: ("SELECT key AS graph, penman FROM amr WHERE status = 'ok' AND parser = $parser",
               "amr1_key", "amr2_key"),
    "parsed": ("SELECT sentence_key AS graph, arg_min(penman, key) AS penman FROM amr "
               "WHERE status = 'ok' AND parser = $parser GROUP BY sentence_key", "sentence1_key", "sentence2_key"),
}
GRAPH_PAIRS = """
WITH g AS ({graphs}),
j AS (SELECT p.key AS pair_key, p.item_id, p.split, p.sentence1_key, p.sentence2_key, p.score,
             g1.penman AS amr1, g2.penman AS amr2, md5(g1.penman || chr(31) || g2.penman) AS graphs_md5
      FROM pairs p JOIN g g1 ON g1.graph = p.{side1} JOIN g g2 ON g2.graph = p.{side2}
      WHERE p.status = 'ok')
"""
GRAPH_PAIRS_ALL = "SELECT pair_key, item_id, split, sentence1_key, sentence2_key, score, amr1, amr2 FROM j"
# a pair is done when a row of these options has its graphs (md5 of both texts: the content key's inputs)
GRAPH_PAIRS_TODO = """
SELECT j.* EXCLUDE (amr1, amr2), d.graphs_md5 IS NOT NULL AS done,
       CASE WHEN d.graphs_md5 IS NULL THEN j.amr1 END AS amr1, CASE WHEN d.graphs_md5 IS NULL THEN j.amr2 END AS amr2
FROM j LEFT JOIN (SELECT DISTINCT graphs_md5 FROM m WHERE options = $options) d ON d.graphs_md5 = j.graphs_md5
"""
# rows of these options whose graphs no current pair has (the graph or the pair changed, or is gone); rows written
# before graphs_md5 existed cannot tell and stay. Rows of an earlier metrics version, whatever their options, were
# computed by code whose scores are superseded: they go too.
STALE_METRICS = """
SELECT m.key FROM m WHERE (m.options = $options AND m.graphs_md5 IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM j WHERE j.graphs_md5 = m.graphs_md5))
  OR coalesce(TRY_CAST(json_extract(m.options, '$.metrics_version') AS INTEGER), 1) < $version
"""

# rows of these options whose recorded pair has those graphs no more (its score or texts changed: a new pair key;
# or it went) while another current pair has them: that pair's columns, the first by key, replace the recorded ones
MOVED_PAIRS = """
, f AS (SELECT graphs_md5, min(pair_key) AS pair_key FROM j GROUP BY graphs_md5)
SELECT m.key, j.pair_key, j.item_id, j.split, j.sentence1_key, j.sentence2_key, j.score
FROM m JOIN f ON f.graphs_md5 = m.graphs_md5 JOIN j ON j.pair_key = f.pair_key AND j.graphs_md5 = f.graphs_md5
WHERE m.options = $options AND NOT EXISTS (SELECT 1 FROM j AS c WHERE c.graphs_md5 = m.graphs_md5
                                           AND c.pair_key = m.pair_key)
"""
PAIR_COLUMNS = ["pair_key", "item_id", "split", "sentence1_key", "sentence2_key", "score"]


def graph_pairs_sql(parser: str, query: str) -> str:
    graphs, side1, side2 = _GRAPHS[PROVIDED if parser == PROVIDED else "parsed"]
    return GRAPH_PAIRS.format(graphs=graphs, side1=side1, side2=side2) + query


@contextmanager
def graph_pairs_connection(wh: Warehouse, dataset: str, parser: str,
                           memory_limit: str = "256MB") -> Iterator[duckdb.DuckDBPyConnection]:
    """DuckDB over the dataset's `pairs`, `amr` and `amr_metrics` (`m`) snapshots, for `graph_pairs_sql`: joins out
    of core, spilling beyond `memory_limit`. Refuses a dataset in the older graph layout."""
    check_graph_layout(wh, dataset, parser)
    with tempfile.TemporaryDirectory(prefix="amrsim-duckdb-") as spill:
        tables = {"pairs": (dataset, "pairs"), "amr": (dataset, "amr"), "m": (dataset, "amr_metrics")}
        columns = {"pairs": ["key", "item_id", "split", "sentence1_key", "sentence2_key", "score", "status",
                             "amr1_key", "amr2_key"],
                   "amr": ["key", "sentence_key", "penman", "status", "parser"],
                   "m": ["key", "pair_key", "graphs_md5", "options"]}
        con = scan_connection(wh, tables, memory_limit, spill, columns)
        try:
            yield con
        finally:
            con.close()


def metric_graph_pairs(wh: Warehouse, dataset: str, parser: str) -> pl.DataFrame:
    """Ok pairs whose two graphs from `parser` are ok, in the pairs table's order: item_id, split, keys, score, amr1,
    amr2. Provided graphs are the pair's own (its row's `amr1_key`/`amr2_key`); a parser's are its sentences'."""
    with graph_pairs_connection(wh, dataset, parser) as con:
        found = con.sql(graph_pairs_sql(parser, GRAPH_PAIRS_ALL), params={"parser": parser}).pl()
    order = wh.read(dataset, "pairs", columns=["key"]).select(pair_key="key")
    return order.join(found, on="pair_key", maintain_order="left")


def stream_graph_pairs(wh: Warehouse, dataset: str, parser: str, options_json: str, rows: int,
                       memory_limit: str = "256MB", stale: list[str] | None = None,
                       moved: list[pl.DataFrame] | None = None,
                       on_plan: Callable[[int, int], None] | None = None) -> Iterator[pl.DataFrame]:
    """`metric_graph_pairs` as a stream of frames of up to `rows` rows (order unspecified), plus `graphs_md5` and
    `done`: a metrics row of these options has the pair's graphs already (its graphs are then left out). Memory is
    bounded by `rows` and `memory_limit`, not by the table sizes. Once the stream is read to its end, `stale` (if
    given) holds the keys of the `amr_metrics` rows of these options that no current pair's graphs have, and
    `moved` (if given) a frame of the rows whose recorded pair is gone while another pair has their graphs (key and
    that pair's columns), as of the snapshot the stream read. `on_plan(todo, done)` is told the pairs to score and
    those done before the stream starts (a count over the same snapshot)."""
    with graph_pairs_connection(wh, dataset, parser, memory_limit) as con:
        params = {"parser": parser, "options": options_json}
        if on_plan is not None:
            # fetchall: a result left unfinished would keep the connection from the stream below
            [(total, done)] = con.execute(f"SELECT count(*), count(*) FILTER (WHERE done) FROM "
                                          f"({graph_pairs_sql(parser, GRAPH_PAIRS_TODO)})", params).fetchall()
            on_plan(total - done, done)
        reader = con.sql(graph_pairs_sql(parser, GRAPH_PAIRS_TODO), params=params).to_arrow_reader(rows)
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
        if stale is not None:  # the views read the snapshots registered above: rows committed since are not seen
            stale += [r[0] for r in con.execute(graph_pairs_sql(parser, STALE_METRICS),
                                                params | {"version": METRICS_VERSION}).fetchall()]
        if moved is not None:
            moved.append(con.sql(graph_pairs_sql(parser, MOVED_PAIRS), params=params).pl())


def metrics_stage(wh: Warehouse, pipeline: str, dataset: str, options: Any, run_id: str,
                  score_batches: Callable[..., pl.DataFrame], commit_rows: int = 20_000,
                  on_progress: Callable[[int], None] | None = None,
                  on_plan: Callable[[int, int], None] | None = None) -> StageRun:
    """AMR metrics for every graph pair of a dataset lacking them; `score_batches` may distribute the work. Pairs
    stream through in chunks of `commit_rows`, each scored chunk one Delta commit: memory is held to a chunk plus
    DuckDB's join memory limit, and a crash loses at most the chunk in flight (a rerun computes only the rest).
    Progress: `on_plan(todo, done)` once the pairs are counted; `on_progress(pairs)` for the pairs settled without
    scoring, and given to `score_batches` as a keyword, which tells the pairs it scores."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="metrics", dataset=dataset,
                   config_hash=config_hash(options.key_fields()))
    # the options and the metrics' version, as the rows' keys hold them: rows of an earlier version are not "done"
    options_json = json.dumps(options.key_fields(), sort_keys=True)
    with record_stage(wh, run):
        run.input_versions = {"pairs": wh.version(dataset, "pairs"), "amr": wh.version(dataset, "amr")}
        parser = options.extra.get("parser", PROVIDED)
        stale: list[str] = []
        moved: list[pl.DataFrame] = []
        for chunk in stream_graph_pairs(wh, dataset, parser, options_json, commit_rows, stale=stale, moved=moved,
                                        on_plan=on_plan):
            run.rows_in += chunk.height
            # rows known done by (pair, graphs, options) skip hashing; the content key stays the test for the rest
            chunk = chunk.filter(~pl.col("done")).drop("done")
            if not chunk.height:
                continue
            pending = chunk.height  # planned as to score
            chunk = chunk.with_columns(pl.Series("key", options.pair_keys(chunk["amr1"], chunk["amr2"]), pl.String))
            chunk = chunk.unique("key", keep="first", maintain_order=True)
            # a failed pair failed on its graphs, which a rerun would not change: failed keys count as done. The
            # check sees this run's earlier commits too, so a key repeated across chunks is computed once.
            done = wh.existing_keys(dataset, "amr_metrics", chunk["key"].to_list())
            todo = chunk.filter(~pl.col("key").is_in(list(done))) if done else chunk
            if on_progress is not None and pending > todo.height:  # found scored already (failed, or repeated)
                on_progress(pending - todo.height)
            if not todo.height:
                continue
            # its key column is kept, not computed again
            scored = score_batches(todo, **({"on_progress": on_progress} if on_progress is not None else {}))
            scored = scored.with_columns(  # every registered aspect's columns: null where not computed
                pl.lit(options_json).alias("options"),
                *[pl.lit(None, t).alias(c) for c, t in aspect_schema(ASPECTS).items() if c not in scored.columns],
                *([] if "bounded" in scored.columns else [pl.lit(None, pl.String).alias("bounded")]))
            # an append (one commit), no merge against the whole table: it leaves out keys a concurrent run
            # committed since the check above, so only the rows it adds are counted
            added = wh.append_new(dataset, "amr_metrics", scored.drop("amr1", "amr2"))
            run.wrote("amr_metrics")
            run.rows_computed += added.num_rows
            run.rows_failed += added.num_rows - added.column("status").to_pylist().count(OK)
        # rows whose graphs no pair has any more (a changed graph or pair) go, so readers of the table by split or
        # sentence keys see the current pairs' metrics only
        run.wrote("amr_metrics", stale and wh.delete_keys(dataset, "amr_metrics", stale))
        run.wrote("amr_metrics", moved and moved[0].height and repoint(wh, dataset, moved[0]))
        run.rows_out = run.rows_computed
    return run


def repoint(wh: Warehouse, dataset: str, moved: pl.DataFrame) -> int:
    """Give the `amr_metrics` rows in `moved` (key + the pair columns) their current pair's columns (the gold score
    among them), scores unchanged, in one commit; returns the rows rewritten."""
    rows = wh.read(dataset, "amr_metrics").filter(pl.col("key").is_in(moved["key"].to_list()))
    rows = rows.drop(PAIR_COLUMNS).join(moved.unique("key"), on="key")
    return wh.upsert(dataset, "amr_metrics", rows)
