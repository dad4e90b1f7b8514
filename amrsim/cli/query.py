"""`amrsim query`: DuckDB SQL over the warehouse tables."""

from __future__ import annotations

from typing import Annotated

import typer

from amrsim.cli.common import ConfigOpt, JsonOpt, emit_json, warehouse_root
from amrsim.console import console, frame_table
from amrsim.errors import AmrsimError

# duckdb and the warehouse (polars) are imported inside the command: `amrsim --help` does not need them.


def query(sql: Annotated[str, typer.Argument(help="SQL over views named <dataset>.<table> and pair_metrics")],
          config: ConfigOpt = "pipelines.yaml",
          limit: Annotated[int, typer.Option(min=0, help="rows to print (DuckDB stops after them)")] = 50,
          allow_external: Annotated[bool, typer.Option(
              "--allow-external", help="let the SQL use DuckDB's file functions (read_csv, COPY TO, ATTACH, ...) "
                                       "with your file permissions; off by default")] = False,
          json_: JsonOpt = False) -> None:
    """Run DuckDB SQL over every warehouse table (views `<dataset>.<table>`, e.g. sample_sts.pairs) and the analyst
    view `pair_metrics` (one row per scored pair: dataset, split, languages, gold score, every aspect). The SQL can
    read only those views unless --allow-external is given."""
    import duckdb

    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.query import query as run_query

    try:  # one row past the limit says whether there are more, without running the whole query
        frame = run_query(Warehouse(warehouse_root(config)), sql, limit=limit + 1, allow_external=allow_external)
    except duckdb.Error as e:
        raise AmrsimError(f"query failed: {str(e).splitlines()[0]}") from None
    more = frame.height > limit
    if json_:  # rows as objects keyed by column; `columns` keeps their order (and exists for zero rows)
        emit_json({"columns": frame.columns, "rows": frame.head(limit).to_dicts(), "truncated": more})
        return
    console.print(frame_table(frame.head(limit), f"first {limit} rows" if more else f"{frame.height} rows",
                              float_digits=4, as_rounded=True))  # round(value, 2) in the SQL shows 2 decimals
    if more:
        console.print(f"the first {limit} rows of more (--limit shows more)")


