"""`amrsim` command line: run pipelines (as Prefect flows), inspect and query the warehouse, evaluate encoders."""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from amrsim.cli_common import ConfigOpt, refuse_out_over_input, warehouse_root, write_out
from amrsim.cli_deploy import deploy_command
from amrsim.cli_evaluate import evaluate_app, report_command
from amrsim.cli_results import results_app
from amrsim.cli_score import score_command
from amrsim.cli_train import explain_command, train_command
from amrsim.errors import AmrsimError, ConfigError, RunFailed

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Multilingual sentence similarity with AMR: pipelines over a Delta warehouse.")
bench_app = typer.Typer(no_args_is_help=True, help="GPU throughput benchmarks of the translation and parsing models.")
app.add_typer(bench_app, name="bench")
metrics_app = typer.Typer(no_args_is_help=True, help="AMR graph metrics: Smatch, fine-grained aspects, WLK, WWLK.")
app.add_typer(metrics_app, name="metrics")

app.add_typer(evaluate_app, name="evaluate")
app.add_typer(results_app, name="results")
app.command("report")(report_command)
app.command("train")(train_command)
app.command("explain")(explain_command)
app.command("deploy")(deploy_command)
app.command("score")(score_command)


def _parse_overrides(pairs: list[str] | None) -> dict[str, Any]:
    from amrsim.config import load_yaml_value

    out: dict[str, Any] = {}
    for item in pairs or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set '{item}': expected key=value (e.g. encode.batch_size=32)")
        try:
            out[key.strip()] = load_yaml_value(value)
        except yaml.YAMLError as e:
            raise ConfigError(f"--set '{item}': the value is not valid YAML ({str(e).splitlines()[0]})") from None
    return out


def _prefect_env(run_dir: Path) -> None:
    """Prefect state under the project's run dir; settings for the temporary server unless one is configured."""
    os.environ.setdefault("PREFECT_HOME", str(run_dir / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)  # its SQLite file needs the directory
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # a local Ray's C++ crash handler would take SIGTERM from this process and abort it (exit 134) before the run
    # could stop its server and workers
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    # Prefect's 20 s default is too short on a busy 2-core machine (its server imports ~10 s of modules)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # the temporary server lives for one run: its UI and scheduling services only slow its start
    for service in ("UI", "SERVICES_SCHEDULER", "SERVICES_LATE_RUNS", "SERVICES_FOREMAN", "SERVICES_TRIGGERS",
                    "SERVICES_PAUSE_EXPIRATIONS", "SERVICES_CANCELLATION_CLEANUP", "SERVICES_REPOSSESSOR"):
        os.environ.setdefault(f"PREFECT_SERVER_{service}_ENABLED", "false")


def _say_stopping(signum: int) -> None:
    import signal

    print(f"\namrsim run: {signal.Signals(signum).name} received, stopping the run (again to force)",
          file=sys.stderr, flush=True)


def _say_stopped(signum: int, stopped: int) -> None:
    import signal

    print(f"amrsim run: stopped by {signal.Signals(signum).name} ({stopped} child processes ended); tables keep "
          f"their last whole commit, and a rerun computes only what is missing", file=sys.stderr, flush=True)


@app.command()
def run(pipeline: Annotated[str | None, typer.Argument(help="pipeline name (default: the config's default)")] = None,
        config: ConfigOpt = "pipelines.yaml",
        set_: Annotated[list[str] | None, typer.Option("--set", help="override key=value in the pipeline")] = None,
        verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Prefect's logs on the terminal instead of "
                                                                      "<run_dir>/logs/prefect.log")] = False,
        ) -> None:
    """Run a pipeline end to end (refresh-dataset -> train -> evaluate) as a Prefect flow."""
    from amrsim.config import load_config
    from amrsim.procs import SignalStop

    t0 = time.perf_counter()
    overrides = _parse_overrides(set_)
    cfg = load_config(config, overrides=overrides, pipeline=pipeline)
    name, _ = cfg.pipeline(pipeline)
    _prefect_env(cfg.run_dir)
    log_path = cfg.run_dir / "logs" / "prefect.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    from flows.runtime import TemporaryServer, drain_prefect_logs, log_prefect_to_file

    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_SETTINGS_PATH", str(log_prefect_to_file(log_path)))
    # Ctrl-C / SIGTERM: this process, its server and its workers end within seconds (exit 130 / 143)
    with SignalStop(announce=_say_stopping, before_exit=_say_stopped), log_path.open("ab") as log:
        log.write(f"\n=== amrsim run {name} (pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')})\n".encode())
        log.flush()
        server = None
        if not os.environ.get("PREFECT_API_URL"):  # a configured server is used as is
            timeout = float(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])
            server = TemporaryServer(log, timeout)
            server.start()  # it boots while Prefect and the flows are imported here
        try:
            _run_flow(name, cfg, overrides, server, t0)
        except Exception as e:
            if verbose:
                raise
            log.write("".join(traceback.format_exception(e)).encode())  # the terminal gets one line
            log.flush()
            if isinstance(e, AmrsimError):
                e.add_note(f"Prefect's log: {log_path}")
                raise
            raise RunFailed(f"{type(e).__name__}: {e} (traceback in {log_path}; --verbose shows it here)") from e
        finally:
            if server is not None:
                drain_prefect_logs()
                server.stop()


def _run_flow(name: str, cfg: Any, overrides: dict[str, Any], server: Any, t0: float) -> None:
    from amrsim.report import console, frame_table, summary_table
    from amrsim.stages import results_table
    from flows.demo import demo  # Prefect is imported only here: the library stays Prefect-free

    if server is not None:
        server.wait_ready()
    out = demo(name, str(cfg.path), overrides or None)
    results = results_table(out["results"])
    if results.height:
        console.print(frame_table(results, f"STS (x100) - pipeline '{name}'"))
    from amrsim.cli_evaluate import print_scores

    for title, rows in (out.get("tables") or {}).items():
        print_scores(rows, f"{title} - pipeline '{name}'")
    for note in out.get("notes") or []:
        console.print(note)
    console.print(summary_table(out["stages"], f"Run {out['run_id']} summary"))
    if out.get("report"):
        console.print(f"report: {out['report']}")
    computed = sum(int(s["computed"]) for s in out["stages"])
    console.print(f"{computed} rows computed; warehouse: {cfg.warehouse_root}; "
                  f"{time.perf_counter() - t0:.1f}s. Query it: amrsim query \"SELECT * FROM eval.results\"")


@app.command()
def status(config: ConfigOpt = "pipelines.yaml") -> None:
    """Tables with versions, row counts and failed rows, and the last stage runs."""
    import polars as pl

    from amrsim.report import console, frame_table
    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.lineage import last_runs
    from amrsim.warehouse.store import BrokenTable

    wh = Warehouse(warehouse_root(config))
    rows, broken = [], []
    for dataset, table in wh.tables():
        try:  # one damaged table is reported by name; the others are still listed
            rows.append({"table": f"{dataset}.{table}", "version": wh.version(dataset, table),
                         "rows": wh.count(dataset, table), "failed": wh.count(dataset, table, status="failed"),
                         "status": "ok"})
        except BrokenTable as e:
            rows.append({"table": f"{dataset}.{table}", "version": None, "rows": None, "failed": None,
                         "status": "broken"})
            broken.append(str(e))
    if not rows:
        console.print(f"warehouse {wh.root} is empty: run `amrsim run` first")
        return
    console.print(frame_table(pl.DataFrame(rows), f"Warehouse {wh.root}"))
    for error in broken:
        console.print(f"broken: {error}", markup=False, highlight=False, soft_wrap=True)
    try:
        runs = last_runs(wh, 12)
    except BrokenTable:
        return  # listed above
    if runs.height:
        view = runs.select("started_at", "run_id", "stage", "dataset", "table", "rows_computed", "rows_failed",
                           pl.col("seconds").round(2), "status")
        console.print(frame_table(view.with_columns(pl.col("started_at").dt.strftime("%Y-%m-%d %H:%M:%S")),
                                  "Last stage runs"))


@app.command()
def query(sql: Annotated[str, typer.Argument(help="SQL over views named <dataset>.<table>")],
          config: ConfigOpt = "pipelines.yaml",
          limit: Annotated[int, typer.Option(min=0, help="rows to print (DuckDB stops after them)")] = 50,
          allow_external: Annotated[bool, typer.Option(
              "--allow-external", help="let the SQL use DuckDB's file functions (read_csv, COPY TO, ATTACH, ...) "
                                       "with your file permissions; off by default")] = False) -> None:
    """Run DuckDB SQL over every warehouse table (views `<dataset>.<table>`, e.g. sample_sts.pairs). The SQL can
    read only those views unless --allow-external is given."""
    import duckdb

    from amrsim.report import console, frame_table
    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.query import query as run_query

    try:  # one row past the limit says whether there are more, without running the whole query
        frame = run_query(Warehouse(warehouse_root(config)), sql, limit=limit + 1, allow_external=allow_external)
    except duckdb.Error as e:
        raise AmrsimError(f"query failed: {str(e).splitlines()[0]}") from None
    more = frame.height > limit
    console.print(frame_table(frame.head(limit), f"first {limit} rows" if more else f"{frame.height} rows",
                              float_digits=4))
    if more:
        console.print(f"the first {limit} rows of more (--limit shows more)")


@metrics_app.command("score")
def metrics_score(
        file: Annotated[Path, typer.Option(help="JSONL(.gz), Parquet, TSV or CSV with amr1/amr2 columns")],
        out: Annotated[Path, typer.Option(help="Parquet file to write (rows already in it are reused)")],
        aspects: Annotated[str | None, typer.Option(help="comma-separated subset (default: all)")] = None,
        convention: Annotated[str, typer.Option(help="Smatch triples: amr (root concept in TOP) | smatch (1.0.4)")]
        = "amr",
        vectors: Annotated[str, typer.Option(help="node vectors: minilm | random | file:<glove.txt>")] = "minilm",
        keep: Annotated[str, typer.Option(help="comma-separated input columns copied to the output")] = "",
        workers: Annotated[int | None, typer.Option(min=1, help="processes (default: chosen by the work: one for "
                                                                "small files, all cores where they pay off)")] = None,
        seed: Annotated[int, typer.Option(help="seed of Smatch restarts and random vectors")] = 0) -> None:
    """Score every graph pair of a file; one row per pair with status/error, written atomically to --out."""
    import polars as pl

    from amrsim.ingest.readers import read_rows
    from amrsim.metrics.engine import ALL_ASPECTS, MetricsOptions, aspect_columns, score_pairs_parallel
    from amrsim.report import console, frame_table

    refuse_out_over_input(out, file=file)
    chosen = tuple(a.strip() for a in aspects.split(",")) if aspects else ALL_ASPECTS
    try:
        options = MetricsOptions(aspects=chosen, convention=convention, vectors=vectors, seed=seed)
    except ValueError as e:
        raise ConfigError(f"metrics score: {e}") from None
    fmt = next((f for s, f in ((".tsv", "tsv"), (".csv", "csv"), (".parquet", "parquet"), (".jsonl", "jsonl"))
                if s in file.name), "jsonl")
    extra = [c.strip() for c in keep.split(",") if c.strip()]
    frame = read_rows(file, fmt, ["amr1", "amr2", *extra], text_columns=["amr1", "amr2"]).rename({"__line": "line"})
    unusable = frame.filter(pl.col("__error").is_not_null()).select("line", why="__error")  # a graph cell not text
    frame = frame.drop("__error")
    frame = frame.with_columns(pl.Series("key", options.pair_keys(frame["amr1"], frame["amr2"]), pl.String))
    try:
        done = pl.read_parquet(out) if out.is_file() else None
    except (pl.exceptions.PolarsError, OSError) as e:  # never replace a file that is not earlier results
        raise AmrsimError(f"--out {out}: exists and is not a Parquet file of earlier results "
                          f"({str(e).splitlines()[0]}); remove it or write to another file") from None
    if done is not None and "key" in done.columns:
        todo = frame.filter(~pl.col("key").is_in(done["key"].implode()))
    else:
        todo, done = frame, None
    t0 = time.perf_counter()
    scored = score_pairs_parallel(todo.drop("key"), options, workers=workers) if todo.height else None
    seconds = time.perf_counter() - t0
    parts = [p for p in (done, scored) if p is not None]
    result = frame.select("key", "line").join(pl.concat(parts, how="diagonal_relaxed").drop("line", strict=False)
                                              .unique("key", keep="last"), on="key", how="left")
    if unusable.height:
        result = result.join(unusable, on="line", how="left").with_columns(
            status=pl.when(pl.col("why").is_null()).then(pl.col("status")).otherwise(pl.lit("failed")),
            error=pl.coalesce("why", "error")).drop("why")
    write_out(out, result.drop("amr1", "amr2", strict=False).write_parquet)
    failed = result.filter(pl.col("status") == "failed").height
    means = result.filter(pl.col("status") == "ok").select(
        [pl.col(c).mean().round(4) for c in aspect_columns(chosen)])
    if means.height:
        console.print(frame_table(means.transpose(include_header=True, header_name="aspect",
                                                  column_names=["mean"]), "mean over ok pairs", 4))
    rate = f"{todo.height / seconds:.0f} pairs/s" if todo.height and seconds else "nothing to compute"
    console.print(f"{frame.height} pairs: {todo.height} computed ({rate}), {frame.height - todo.height} reused, "
                  f"{failed} failed -> {out}")


@metrics_app.command("corpus")
def metrics_corpus(
        file: Annotated[Path, typer.Option(help="JSONL(.gz), Parquet, TSV or CSV with a test and a gold graph column")],
        test_col: Annotated[str, typer.Option(help="column of the graphs scored (a parser's output)")] = "amr1",
        gold_col: Annotated[str, typer.Option(help="column of the gold graphs")] = "amr2",
        convention: Annotated[str, typer.Option(help="Smatch triples: smatch (1.0.4's, default) | amr")] = "smatch",
        samples: Annotated[int, typer.Option(min=0, help="bootstrap resamples (0: no interval)")] = 1000,
        confidence: Annotated[float, typer.Option(min=0.5, max=0.999, help="interval coverage")] = 0.95,
        seed: Annotated[int, typer.Option(help="seed of the bootstrap and of Smatch restarts")] = 0) -> None:
    """Corpus Smatch: micro-averaged P/R/F1 over every pair, with a seeded bootstrap interval of F1. An unreadable
    test graph counts as empty; an unreadable gold graph is an error naming its line."""
    from amrsim.errors import InputError
    from amrsim.ingest.readers import read_rows
    from amrsim.metrics.corpus import GoldGraphError, corpus_smatch
    from amrsim.report import console

    if convention not in ("smatch", "amr"):
        raise ConfigError(f"metrics corpus: --convention must be 'smatch' or 'amr', not '{convention}'")
    fmt = next((f for s, f in ((".tsv", "tsv"), (".csv", "csv"), (".parquet", "parquet"), (".jsonl", "jsonl"))
                if s in file.name), "jsonl")
    frame = read_rows(file, fmt, [test_col, gold_col])
    lines = frame["__line"].to_list() if "__line" in frame.columns else list(range(1, frame.height + 1))
    if not frame.height:
        raise InputError(str(file), "no graph pairs")
    try:
        result = corpus_smatch(frame[test_col].to_list(), frame[gold_col].to_list(), convention=convention,
                               seed=seed, samples=samples, confidence=confidence)
    except GoldGraphError as e:
        raise InputError(str(file), f"gold graph ({gold_col}) cannot be read: {e}", line=lines[e.index]) from None
    interval = (f", {100 * confidence:g}% bootstrap interval [{result.f1_low:.4f}, {result.f1_high:.4f}] "
                f"({samples} resamples, seed {seed})" if samples else "")
    console.print(f"Smatch P {result.precision:.4f}  R {result.recall:.4f}  F1 {result.f1:.4f}{interval}",
                  markup=False, highlight=False)
    console.print(f"{result.pairs} pairs, {result.failed} test graphs unreadable (counted as empty); triples "
                  f"matched {result.matched}, test {result.n1}, gold {result.n2}", markup=False, highlight=False)


def _read_sentences(path: Path, want_amr: bool) -> tuple[list[str], list[str | None]]:
    """Sentences (and graphs, for --backend provided) from JSONL(.gz)/TSV/CSV with a sentence|snt column, or a
    plain text file with one sentence per line."""
    import gzip
    import json

    from amrsim.errors import InputError

    if not path.is_file():
        raise InputError(str(path), "file not found")
    name = path.name.lower().removesuffix(".gz")
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"not UTF-8 ({e.reason} at byte {e.start})") from None
    if name.endswith(".jsonl"):
        records = []
        for i, line in enumerate(lines, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}:{i}", f"invalid JSON: {e.msg}") from None
    elif name.endswith((".tsv", ".csv")):
        sep = "\t" if name.endswith(".tsv") else ","
        header = lines[0].split(sep) if lines else []
        records = [dict(zip(header, line.split(sep), strict=False)) for line in lines[1:] if line.strip()]
        if not records:
            raise InputError(str(path), "no rows after the header" if lines else "empty file")
    else:
        return lines, [None] * len(lines)
    column = next((c for c in ("sentence", "snt") if records and c in records[0]), None)
    if column is None:
        raise InputError(str(path), "needs a 'sentence' or 'snt' column")
    if want_amr and "amr" not in records[0]:
        raise InputError(str(path), "--backend provided needs an 'amr' column")
    return ([str(r.get(column) or "") for r in records],
            [r.get("amr") for r in records] if want_amr else [None] * len(records))


def _translate_to_english(model: str, sentences: list[str], device: str) -> tuple[list[str | None], list[str | None]]:
    """English translation (None when it failed) and the failure's reason, per sentence; a model that does not
    load is a config error naming it."""
    from amrsim.translate.run import TranslatorSpec, translator_for

    try:
        translator = translator_for(TranslatorSpec(model, device=device))
    except (OSError, ValueError) as e:
        raise ConfigError(f"--translate '{model}': {e}") from None
    results = translator.translate(sentences)
    return [r.text for r in results], [r.error for r in results]


@app.command("parse")
def parse_command(
        file: Annotated[Path, typer.Option(help="JSONL(.gz)/TSV/CSV with a sentence or snt column, or a text file "
                                                "with one sentence per line")],
        out: Annotated[Path, typer.Option(help="JSONL to write: one object per input row (snt, amr, status, error)")],
        backend: Annotated[str, typer.Option(help="ud (spaCy rules) | amrlib (parse_xfm model) | provided (an amr "
                                                  "column, validated)")] = "ud",
        lang: Annotated[str, typer.Option(help="language of the sentences")] = "en",
        model_dir: Annotated[Path | None, typer.Option(help="amrlib: parse_xfm model directory")] = None,
        batch_size: Annotated[int | None, typer.Option(min=1, help="default: ud 1000, amrlib 16")] = None,
        device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
        linearize: Annotated[str, typer.Option(help="add a linearized field: paper | pointer | none")] = "none",
        translate: Annotated[str | None, typer.Option(
            help="MarianMT model (hub id such as Helsinki-NLP/opus-mt-de-en, or a directory) translating --lang into "
                 "English first; the English is parsed (translate-then-parse)")] = None,
) -> None:
    """Parse sentences into AMR graphs; every input row gets an output row, written atomically. Text in a language
    without a parser is translated into English first with --translate."""
    import json

    from amrsim.amr.backends import ParseResult
    from amrsim.amr.parsing import ParserSpec, linearized_column, parser_for
    from amrsim.config import PARSER_LANGS, PIVOT_LANG
    from amrsim.report import console

    refuse_out_over_input(out, file=file)
    if backend not in PARSER_LANGS:
        raise ConfigError(f"--backend '{backend}': use one of {sorted(PARSER_LANGS)}")
    if translate is not None and (backend == "provided" or lang == PIVOT_LANG):
        raise ConfigError(f"--translate: translates --lang into English for parsing; it does not apply to "
                          f"{'--backend provided' if backend == 'provided' else 'English sentences'}")
    parse_lang = PIVOT_LANG if translate is not None else lang
    if backend != "provided" and parse_lang not in PARSER_LANGS[backend]:
        raise ConfigError(f"--lang '{lang}': backend {backend} parses {list(PARSER_LANGS[backend])}; translate into "
                          f"English first: --translate Helsinki-NLP/opus-mt-{lang}-en (or a model directory)")
    if backend == "amrlib" and (model_dir is None or not model_dir.is_dir()):
        raise ConfigError(f"--model-dir: parse_xfm model directory not found ({model_dir})")
    if linearize not in ("paper", "pointer", "none"):
        raise ConfigError(f"--linearize '{linearize}': use paper, pointer or none")
    sentences, given = _read_sentences(file, want_amr=backend == "provided")
    t0 = time.perf_counter()
    english: list[str | None] = []
    why: list[str | None] = []
    if translate is not None:
        english, why = _translate_to_english(translate, sentences, device)
    if backend == "provided":
        from amrsim.amr.graph import AMRError, parse

        results = []
        for g in given:
            try:
                parse(g or "")
                results.append(ParseResult(g))
            except AMRError as e:
                results.append(ParseResult.failed(str(e)))
    else:
        spec = ParserSpec(backend, parse_lang, str(model_dir) if model_dir else None, batch_size, device=device)
        if translate is None:
            results = parser_for(spec).parse(sentences)
        else:  # parse the rows that translated; the others fail with the translation's reason
            ok = [i for i, t in enumerate(english) if t is not None]
            parsed = dict(zip(ok, parser_for(spec).parse([english[i] or "" for i in ok]), strict=True))
            results = [parsed.get(i) or ParseResult.failed(f"translation failed: {why[i]}")
                       for i in range(len(sentences))]
    seconds = time.perf_counter() - t0
    graphs, status = [r.penman for r in results], [r.status for r in results]
    lin = linearized_column(graphs, status, None if linearize == "none" else linearize)
    def write_jsonl(path: Path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for i, (snt, r, line) in enumerate(zip(sentences, results, lin, strict=True)):
                row = {"snt": snt, "amr": r.penman, "status": r.status, "error": r.error}
                if translate is not None:
                    row |= {"english": english[i], "translation_model": translate}
                if linearize != "none":
                    row["linearized"] = line
                f.write(json.dumps(row, ensure_ascii=False) + "\n")

    write_out(out, write_jsonl)
    failed = sum(s != "ok" for s in status)
    rate = f"{len(sentences) / seconds:.0f} sentences/s" if sentences and seconds else "no sentences"
    console.print(f"{len(sentences)} sentences: {len(sentences) - failed} parsed, {failed} failed ({rate}) -> {out}")


TINY = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 1000,
        "max_position_embeddings": 128}


def _bench_device(device: str, tiny: bool) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device on this machine; run it on a GPU machine, or use "
                          "--device cpu --tiny to check the mechanics")
    if device == "cpu" and not tiny:
        raise ConfigError("--device cpu times full-size models on a CPU, which says nothing about the GPU figure; "
                          "add --tiny to check the mechanics")


@bench_app.command("translate")
def bench_translate_command(
        device: Annotated[str, typer.Option(help="cuda | cuda:N | cpu (with --tiny)")] = "cuda",
        sentences: Annotated[int, typer.Option(min=1)] = 2000,
        batch_size: Annotated[int, typer.Option(min=1)] = 64,
        out_tokens: Annotated[int, typer.Option(min=1, help="fixed output length")] = 64,
        num_beams: Annotated[int, typer.Option(min=1)] = 4,
        tiny: Annotated[bool, typer.Option(help="a tiny config instead of opus-mt-en-de's")] = False) -> None:
    """Randomly initialised opus-mt-en-de-shaped MarianMT: batched vs one-at-a-time sentences/s."""
    import json

    from amrsim.translate.bench import bench_translate

    _bench_device(device, tiny)
    tiny_marian = TINY | {"pad_token_id": TINY["vocab_size"] - 1, "decoder_start_token_id": TINY["vocab_size"] - 1}
    out = bench_translate(device=device, n_sentences=sentences, batch_size=batch_size, out_tokens=out_tokens,
                          num_beams=num_beams, config_overrides=tiny_marian if tiny else None)
    print(json.dumps(out, indent=2, default=str))


@bench_app.command("parse")
def bench_parse_command(
        device: Annotated[str, typer.Option(help="cuda | cuda:N | cpu (with --tiny)")] = "cuda",
        size: Annotated[str, typer.Option(help="base | large (BART shapes of amrlib's parse_xfm models)")] = "base",
        sentences: Annotated[int, typer.Option(min=1)] = 1000,
        batch_size: Annotated[int, typer.Option(min=1)] = 32,
        out_tokens: Annotated[int, typer.Option(min=1, help="fixed output length (linearised graph tokens)")] = 128,
        num_beams: Annotated[int, typer.Option(min=1)] = 4,
        tiny: Annotated[bool, typer.Option(help="a tiny config instead of BART's")] = False) -> None:
    """Randomly initialised BART-base/large parse_xfm-shaped model: batched vs one-at-a-time sentences/s."""
    import json

    from amrsim.amr.bench import bench_parse

    if size not in ("base", "large"):
        raise ConfigError(f"--size '{size}': use base or large")
    _bench_device(device, tiny)
    out = bench_parse(device=device, size=size, n_sentences=sentences, batch_size=batch_size, out_tokens=out_tokens,
                      num_beams=num_beams, config_overrides=TINY if tiny else None)
    print(json.dumps(out, indent=2, default=str))


def main() -> None:
    from amrsim.secrets import install_log_redaction, redact

    install_log_redaction()  # Prefect ships log records to its API database: mask tokens before any is made
    try:
        app()
    except AmrsimError as e:
        notes = "".join(f" ({note})" for note in getattr(e, "__notes__", ()))
        print(f"error: {redact(str(e) + notes)}", file=sys.stderr)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
