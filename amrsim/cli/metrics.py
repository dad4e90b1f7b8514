"""`amrsim metrics score` (every aspect of every graph pair of a file) and `amrsim metrics corpus` (corpus Smatch)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand

import amrsim.console
from amrsim.cli.common import JsonOpt, check_out, emit_json, input_path, out_metadata, write_out
from amrsim.console import console, frame_table, progress_bar
from amrsim.errors import AmrsimError, ConfigError, InputError
from amrsim.files import file_format

if TYPE_CHECKING:
    import click

# polars, the readers and the metrics engine are imported inside the commands: `amrsim --help` does not need them.

MAX_SAMPLES = 100_000

metrics_app = typer.Typer(no_args_is_help=True, help="AMR graph metrics: Smatch, fine-grained aspects, WLK, WWLK.")
ASPECTS_HELP = "comma-separated subset of {} (default: all; an aspect named twice is scored once)"


class _ScoreCommand(TyperCommand):
    """`metrics score`: its --aspects help lists the aspects of the registry (`amrsim.metrics.aspects.ASPECTS`), read
    when the help is shown, so the engine is not imported when `amrsim` starts."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from amrsim.metrics.aspects import ASPECTS

        for param in self.params:
            if param.name == "aspects":
                param.help = ASPECTS_HELP.format(", ".join(ASPECTS))
        super().format_help(ctx, formatter)


def _graph_pairs(file: Path, file2: Path | None, columns: tuple[str, str], keep: list[str]):
    """The graph pairs of one table (`columns` + `keep`), or of two PENMAN files paired graph by graph (`__line`:
    the pair's number)."""
    from amrsim.ingest.readers import read_graph_pairs, read_rows

    input_path(file, "--file")
    if file2 is not None:
        input_path(file2, "--file2")
    if file2 is None:  # a kept graph column is read once
        return read_rows(file, file_format(file, default="jsonl"), [*columns, *(c for c in keep if c not in columns)],
                         text_columns=list(columns))
    for path in (file, file2):
        if file_format(path) is not None:
            raise ConfigError(f"--file2 pairs two PENMAN files graph by graph; {path} is a {file_format(path)} "
                              "table: give one table with both graph columns as --file, without --file2")
    if keep:
        raise ConfigError("--keep names columns of a table; two PENMAN files have none")
    return read_graph_pairs(file, file2, columns)  # (+ __start1/__start2: where each graph starts)


def _kept_columns(keep: str, written: list[str]) -> list[str]:
    """The --keep columns in their order. One named twice, one the output holds already (`written`: key, line, the
    score columns) or one named like the reader's own columns (`__line`) is refused: a row keeps its own values."""
    names = [c.strip() for c in keep.split(",") if c.strip()]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ConfigError(f"--keep: column '{name}' is named twice")
        if name in written:
            raise ConfigError(f"--keep: column '{name}' is one metrics score writes itself ({', '.join(written)}); "
                              f"rename it in the input to keep it")
        if name.startswith("__"):
            raise ConfigError(f"--keep: column '{name}': names starting with '__' are the reader's own")
    return names


@metrics_app.command("score", cls=_ScoreCommand)
def metrics_score(
        file: Annotated[Path, typer.Option(help="JSONL(.gz), Parquet, TSV or CSV with amr1/amr2 columns; with "
                                                "--file2, a PENMAN file of the first graphs")],
        out: Annotated[Path, typer.Option(help="Parquet file to write (rows already in it are reused)")],
        file2: Annotated[Path | None, typer.Option(help="a PENMAN file of the second graphs, paired graph by graph "
                                                        "with --file (graphs separated by blank lines, as smatch -f)")]
        = None,
        aspects: Annotated[str | None, typer.Option(help=ASPECTS_HELP.format("the aspects"))] = None,
        convention: Annotated[str, typer.Option(help="Smatch triples: amr (root concept in TOP) | smatch (1.0.4)")]
        = "amr",
        dereify: Annotated[bool, typer.Option(help="collapse reified nodes (have-mod-91 -> :mod) before the "
                                                   "Smatch family and set aspects")] = False,
        counting: Annotated[str, typer.Option(help="set aspects' values: set (each once per graph) | multiset (every "
                                                   "occurrence, as amr-evaluation)")] = "set",
        vectors: Annotated[str, typer.Option(help="node vectors: minilm | random | file:<glove.txt>")] = "minilm",
        keep: Annotated[str, typer.Option(help="comma-separated input columns copied to the output")] = "",
        workers: Annotated[int | None, typer.Option(min=1, help="processes, at most 4 per usable core (default: "
                                                                "chosen by the work: one for small files, all cores "
                                                                "where they pay off)")] = None,
        seed: Annotated[int, typer.Option(help="seed of Smatch restarts and random vectors")] = 0,
        json_: JsonOpt = False) -> None:
    """Score every graph pair of a file; one row per pair with status/error, written atomically to --out."""
    import polars as pl

    from amrsim.metrics.aspects import ASPECTS
    from amrsim.metrics.engine import (
        MetricsOptions,
        PairScorer,
        aspect_columns,
        check_vectors,
        max_workers,
    )

    check_out(out, "metrics score", file=file, file2=file2)
    if workers is not None and workers > max_workers():
        raise ConfigError(f"--workers {workers}: at most {max_workers()} (4 per usable core); more processes only "
                          "share the cores")
    # an aspect named twice is scored once, as `metrics corpus --aspects` counts it
    chosen = tuple(dict.fromkeys(a.strip() for a in aspects.split(","))) if aspects else tuple(ASPECTS)
    try:
        options = MetricsOptions(aspects=chosen, convention=convention, dereify=dereify, counting=counting,
                                 vectors=vectors, seed=seed)
        opened = time.perf_counter()
        check_vectors(options)  # before any pair is read or scored: a bad --vectors fails here, --out untouched
        opened = time.perf_counter() - opened  # loading, reported with the engine's own
    except ValueError as e:
        raise ConfigError(f"metrics score: {e}") from None
    # the columns scoring adds to a row, typed (nothing is loaded for an empty frame)
    produced = PairScorer(options, workers=1).score_columns([], []).schema
    extra = _kept_columns(keep, ["key", "line", *produced])
    frame = (_graph_pairs(file, file2, ("amr1", "amr2"), extra).drop("__start1", "__start2", strict=False)
             .rename({"__line": "line"}))
    unusable = (frame.filter(pl.col("__error").is_not_null()).select("line", __why="__error")  # a cell not text
                if frame["__error"].null_count() < frame.height else None)
    graphs = frame["amr1"].to_list(), frame["amr2"].to_list()  # made once: for the keys and for the scorer
    # a row whose graph cell is not text has no content key: its failure is its own, never reused by another row
    frame = frame.with_columns(pl.Series("key", options.pair_keys(*graphs), pl.String)).with_columns(
        key=pl.when(pl.col("__error").is_null()).then("key")).drop("__error")
    try:  # check_out made sure an existing --out carries this command's marker
        done = pl.read_parquet(out) if out.is_file() and out.stat().st_size else None
    except (pl.exceptions.PolarsError, OSError) as e:  # marked, but damaged since: never replace it
        raise AmrsimError(f"--out {out}: exists and is not a Parquet file of earlier results "
                          f"({str(e).splitlines()[0]}); remove it or write to another file") from None
    if done is not None and "key" in done.columns:
        todo = frame.filter(pl.col("key").is_null() | ~pl.col("key").is_in(done["key"].implode()))
    else:
        todo, done = frame, None
    t0 = time.perf_counter()
    # a pair's aspects take about 2 ms, a fraction of an encoded row's time: a bar from 4x the rows' threshold
    with (progress_bar(frame.height, f"metrics score {file.name}", unit="pairs",
                       least=4 * amrsim.console.PROGRESS_LEAST) as advance,
          PairScorer(options, workers=workers, on_progress=advance) as scorer):
        advance.plan(todo.height, frame.height - todo.height)  # rows of earlier results are not scored again
        # keys computed above, not again
        scored = (scorer(todo, graphs if todo.height == frame.height else None) if todo.height else None)
        workers_used = scorer.pool_size() if scorer.used_pool else 1
        where = f"{workers_used} worker processes" if scorer.used_pool else "in-process"
        loading = scorer.loading_seconds  # node vectors and imports, once per process: not the pairs' rate
    seconds = time.perf_counter() - t0 - loading
    loading += opened
    # Each row is the input row's own key, line and kept columns, in file order, and its key's scores: only the
    # score columns are shared by key (a pair given twice, rows of earlier results); nothing else of a scored or
    # earlier row is taken, so no row gets another row's values.
    parts = [p.select("key", *(pl.col(c).cast(t) if c in p.columns else pl.lit(None, t).alias(c)
                               for c, t in produced.items()))
             for p in (done, scored) if p is not None]
    by_key = (pl.concat([pl.DataFrame(schema={"key": pl.String, **produced}), *parts])
              .filter(pl.col("key").is_not_null()).unique("key", keep="first", maintain_order=True))
    result = frame.select("key", "line", *extra).join(by_key, on="key", how="left", maintain_order="left")
    if unusable is not None:
        result = result.join(unusable, on="line", how="left", maintain_order="left").with_columns(
            status=pl.when(pl.col("__why").is_null()).then(pl.col("status")).otherwise(pl.lit("failed")),
            error=pl.coalesce("__why", "error")).drop("__why")
    write_out(out, lambda path: result.write_parquet(path, metadata=out_metadata("metrics score")))
    failed = int((result["status"] == "failed").sum())
    means = result.filter(pl.col("status") == "ok").select(
        [pl.col(c).mean().round(4) for c in aspect_columns(chosen)])
    if means.height:
        console.print(frame_table(means.transpose(include_header=True, header_name="aspect",
                                                  column_names=["mean"]), "mean over ok pairs", 4))
    if json_:
        emit_json({"pairs": frame.height, "computed": todo.height, "reused": frame.height - todo.height,
                   "failed": failed, "out": out.resolve(), "means": means.to_dicts()[0] if means.height else {},
                   "pairs_per_second": round(todo.height / seconds, 1) if todo.height and seconds > 0 else None,
                   "workers": workers_used, "loading_seconds": round(loading, 2)})
        return
    rate = f"{todo.height / seconds:.0f} pairs/s, {where}" if todo.height and seconds > 0 else "nothing to compute"
    if todo.height and loading >= 0.05:
        rate += f"; {loading:.1f} s loading node vectors and libraries first"
    console.print(f"{frame.height} pairs: {todo.height} computed ({rate}), {frame.height - todo.height} reused, "
                  f"{failed} failed -> {out}")


@metrics_app.command("corpus")
def metrics_corpus(
        file: Annotated[Path, typer.Option(help="JSONL(.gz), Parquet, TSV or CSV with a test and a gold graph column")],
        file2: Annotated[Path | None, typer.Option(help="a PENMAN file of gold graphs, paired graph by graph with "
                                                        "--file, a PENMAN file of test graphs (as smatch -f)")]
        = None,
        test_col: Annotated[str, typer.Option(help="column of the graphs scored (a parser's output)")] = "amr1",
        gold_col: Annotated[str, typer.Option(help="column of the gold graphs")] = "amr2",
        convention: Annotated[str, typer.Option(help="Smatch triples: smatch (1.0.4's, default) | amr")] = "smatch",
        dereify: Annotated[bool, typer.Option(help="collapse reified nodes (have-mod-91 -> :mod) first")] = False,
        aspects: Annotated[str | None, typer.Option(help="comma-separated aspects for a P/R/F table as amr-evaluation "
                                                         "prints it (all: every counted aspect)")] = None,
        counting: Annotated[str, typer.Option(help="with --aspects, set aspects' values: set (each once per graph) | "
                                                   "multiset (every occurrence, as amr-evaluation)")] = "set",
        samples: Annotated[int, typer.Option(min=0, help="bootstrap resamples (0: no interval)")] = 1000,
        confidence: Annotated[float, typer.Option(min=0.5, max=0.999, help="interval coverage")] = 0.95,
        seed: Annotated[int, typer.Option(help="seed of the bootstrap and of Smatch restarts (any integer; "
                                               "negative ones are taken modulo 2^64)")] = 0,
        json_: JsonOpt = False) -> None:
    """Corpus Smatch: micro-averaged P/R/F1 over every pair, with a seeded bootstrap interval of F1; with --aspects,
    the table of P/R/F1 per aspect. An unreadable test graph counts as empty; an unreadable gold graph is an error
    naming its line."""
    from amrsim.metrics.aspects import COUNTED_ASPECTS, COUNTINGS
    from amrsim.metrics.corpus import GoldGraphError, corpus_aspects, corpus_smatch

    if convention not in ("smatch", "amr"):
        raise ConfigError(f"metrics corpus: --convention must be 'smatch' or 'amr', not '{convention}'")
    chosen: list[str] = []
    if aspects is not None:
        chosen = list(COUNTED_ASPECTS) if aspects.strip() == "all" else [a.strip() for a in aspects.split(",")]
        unknown = [a for a in chosen if a not in COUNTED_ASPECTS]
        if unknown or not chosen:
            raise ConfigError(f"--aspects: unknown aspect {', '.join(map(repr, unknown)) or '(none given)'}; "
                              f"known: {', '.join(COUNTED_ASPECTS)} (or all)")
        chosen = list(dict.fromkeys(chosen))  # a repeated aspect is one row
    if counting not in COUNTINGS:
        raise ConfigError(f"--counting must be one of {', '.join(COUNTINGS)}, not '{counting}'")
    if samples > MAX_SAMPLES:  # each resample is a pass over every pair: 10^9 would run for days
        raise ConfigError(f"--samples {samples}: at most {MAX_SAMPLES} bootstrap resamples")
    frame = _graph_pairs(file, file2, (test_col, gold_col), [])
    lines = frame["__line"].to_list() if "__line" in frame.columns else list(range(1, frame.height + 1))
    if not frame.height:
        raise InputError(str(file), "no graph pairs")
    try:
        with progress_bar(frame.height, f"metrics corpus {file.name}", unit="pairs",
                          least=4 * amrsim.console.PROGRESS_LEAST) as advance:
            if chosen:
                table, failed = corpus_aspects(frame[test_col].to_list(), frame[gold_col].to_list(), chosen,
                                               convention=convention, counting=counting, seed=seed, dereify=dereify,
                                               on_progress=advance)
            else:
                result = corpus_smatch(frame[test_col].to_list(), frame[gold_col].to_list(), convention=convention,
                                       seed=seed, samples=samples, confidence=confidence, dereify=dereify,
                                       on_progress=advance)
        if chosen:
            _print_aspect_table(table, failed, frame.height, convention, counting, json_)
            return
    except GoldGraphError as e:
        if file2 is not None:  # the graph's own line in the gold file
            raise InputError(str(file2), f"gold graph {e.index + 1} cannot be read: {e}",
                             line=frame["__start2"][e.index]) from None
        raise InputError(str(file), f"gold graph ({gold_col}) cannot be read: {e}", line=lines[e.index]) from None
    if json_:
        emit_json({"precision": result.precision, "recall": result.recall, "f1": result.f1,
                   "f1_low": result.f1_low if samples else None, "f1_high": result.f1_high if samples else None,
                   "confidence": confidence, "samples": samples, "seed": seed, "convention": convention,
                   "pairs": result.pairs, "failed": result.failed, "matched": result.matched,
                   "test_triples": result.n1, "gold_triples": result.n2})
        return
    interval = (f", {100 * confidence:g}% bootstrap interval [{result.f1_low:.4f}, {result.f1_high:.4f}] "
                f"({samples} resamples, seed {seed})" if samples else "")
    console.print(f"Smatch P {result.precision:.4f}  R {result.recall:.4f}  F1 {result.f1:.4f}{interval}",
                  markup=False, highlight=False)
    console.print(f"{result.pairs} pairs, {result.failed} test graphs unreadable (counted as empty); triples "
                  f"matched {result.matched}, test {result.n1}, gold {result.n2}", markup=False, highlight=False)




def _print_aspect_table(table, failed: tuple[int, ...], pairs: int, convention: str, counting: str,
                        json_: bool) -> None:
    """amr-evaluation's corpus table: P, R, F per aspect from counts summed over the pairs."""
    import polars as pl

    if json_:
        emit_json({"pairs": pairs, "failed": len(failed), "convention": convention, "counting": counting,
                   "aspects": {t.aspect: {"precision": t.precision, "recall": t.recall, "f1": t.f1,
                                          "matched": t.matched, "test": t.test, "gold": t.gold} for t in table}})
        return
    frame = pl.DataFrame({"aspect": [t.aspect for t in table], "P": [t.precision for t in table],
                          "R": [t.recall for t in table], "F": [t.f1 for t in table],
                          "matched": [t.matched for t in table], "test": [t.test for t in table],
                          "gold": [t.gold for t in table]})
    console.print(frame_table(frame, f"{pairs} pairs, micro-averaged (convention {convention}, counting {counting})",
                              4))
    console.print(f"{len(failed)} test graphs unreadable (counted as empty)", markup=False, highlight=False)
