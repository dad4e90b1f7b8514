"""Stage bodies the Prefect tasks call: each reads the warehouse, computes only missing keys, records lineage."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import polars as pl

from amrsim.config import PIVOT_LANG, AugmentConfig, LoadedConfig, ParseConfig, StsEvalConfig, TranslateConfig
from amrsim.encoders import model_id, run_name
from amrsim.encoders.cache import TABLE as EMBEDDINGS
from amrsim.encoders.cache import embed_sentences, read_embeddings
from amrsim.errors import ConfigError
from amrsim.evaluate.results import EVAL, RESULTS, row_key, score_rows, store_results
from amrsim.evaluate.sts import cross_encoder_sts, evaluate_sts, is_cross_encoder, result_key, select_pairs
from amrsim.translate import translation_key
from amrsim.warehouse.keys import config_hash, content_key
from amrsim.warehouse.lineage import StageRun, record_stage
from amrsim.warehouse.schemas import AMR_METRIC_COLUMNS, SCHEMAS
from amrsim.warehouse.store import OK, Warehouse

if TYPE_CHECKING:
    from amrsim.augment import Scorer


def encode_stage(wh: Warehouse, cfg: LoadedConfig, pipeline: str, dataset: str, encoder: str, run_id: str,
                 on_progress: Callable[[int], None] | None = None) -> StageRun:
    """Embed every ok sentence of a dataset with one encoder (cached by content key)."""
    enc_cfg = cfg.project.pipelines[pipeline].encode
    assert enc_cfg is not None
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=f"encode:{encoder}", dataset=dataset,
                   config_hash=config_hash({"model": model_id(encoder, wh.models_root)}))
    with record_stage(wh, run):
        run.input_versions = {"sentences": wh.version(dataset, "sentences")}
        sentences = wh.read(dataset, "sentences", columns=["key", "text", "status"]).filter(pl.col("status") == OK)
        run.rows_in = sentences.height
        run.rows_computed, run.rows_failed = embed_sentences(
            wh, dataset, encoder, sentences, batch_size=enc_cfg.batch_size, device=enc_cfg.device,
            on_progress=on_progress)
        if run.rows_computed:
            run.outputs.append(EMBEDDINGS)
        run.rows_out = run.rows_computed
    return run


def sts_stage(wh: Warehouse, pipeline: str, sts: StsEvalConfig, run_id: str,
              datasets: list[str] | None = None, encoders: list[str] | None = None,
              batch_size: int = 64, device: str = "auto",
              translate: dict[str, Any] | None = None) -> tuple[StageRun, pl.DataFrame]:
    """STS for every (dataset, encoder, split, language pair); results already in the warehouse are reused. A
    cross-encoder (pear:...) scores the pairs directly instead of comparing embeddings. `translate` (language ->
    TranslatorSpec): an encoder that parses (mse_amr) translates sentences of those languages into English first."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage="evaluate:sts", dataset=EVAL,
                   config_hash=config_hash(sts))
    frames = []
    with record_stage(wh, run):
        existing = wh.read(EVAL, RESULTS)
        for dataset in datasets or sts.datasets:
            pairs = wh.read(dataset, "pairs")
            texts = wh.read(dataset, "sentences", columns=["key", "text"])
            run.input_versions[f"{dataset}.pairs"] = wh.version(dataset, "pairs")
            run.input_versions[f"{dataset}.embeddings"] = wh.version(dataset, EMBEDDINGS)
            for encoder in encoders or sts.encoders:
                for split in sts.splits:
                    for lang_pair in sts.lang_pairs:
                        chosen = select_pairs(pairs, split, lang_pair)
                        if chosen.height < 2:
                            continue
                        run.rows_in += 1
                        key = result_key(encoder, dataset, split, lang_pair,
                                         (chosen["sentence1_key"] + "|" + chosen["sentence2_key"]).to_list(),
                                         wh.models_root)
                        wanted = [row_key("sts", run_name(encoder, wh.models_root), dataset, split, lang_pair, m, [key])
                                  for m in ("spearman", "pearson")]
                        done = existing.filter(pl.col("key").is_in(wanted))
                        if done.height == len(wanted):
                            frames.append(done)
                            continue
                        needed = pl.concat([chosen.select(key="sentence1_key"), chosen.select(key="sentence2_key")])
                        sentences = texts.join(needed.unique(), on="key", how="semi")
                        if is_cross_encoder(encoder, wh.models_root):  # scores each pair from its texts: no vectors
                            scores = cross_encoder_sts(wh, dataset, encoder, split, lang_pair, chosen, sentences,
                                                       batch_size=batch_size, device=device)
                        else:
                            embed_sentences(wh, dataset, encoder, sentences, batch_size=batch_size, device=device,
                                            translate=translate)
                            scores = evaluate_sts(wh, dataset, encoder, split, lang_pair, chosen)
                        rows = score_rows(scores, run_id, run.config_hash, [key], wh.models_root)
                        frames.append(rows)
                        store_results(wh, rows)
                        run.rows_computed += 1
        if run.rows_computed:
            run.outputs.append(RESULTS)
        run.rows_out = len(frames)
    # diagonal: rows read back from an older table (a column added later sits last, or is missing) meet new ones
    table = pl.concat(frames, how="diagonal_relaxed") if frames else existing.clear()
    return run, table


def results_table(rows: pl.DataFrame) -> pl.DataFrame:
    """Wide view for printing: one row per (dataset, split, lang pair, model), spearman and pearson columns."""
    if not rows.height:
        return rows
    return (rows.pivot(on="metric", index=["dataset", "split", "lang_pair", "model", "n"], values="value",
                       aggregate_function="first")
            .sort(["dataset", "split", "lang_pair", "model"]))


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
    import tempfile

    from amrsim.warehouse.query import scan_connection

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
    import json
    from dataclasses import asdict

    from amrsim.warehouse.query import existing_keys

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
            scored = score_batches(todo.drop("key"))
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


PARSE_TODO_SCHEMA = {"key": pl.String, "sentence_key": pl.String, "lang": pl.String, "parser": pl.String,
                     "pivot_lang": pl.String, "pivot_source": pl.String, "parsed_text": pl.String,
                     "parse_lang": pl.String, "reason": pl.String}
GIVEN = "given"  # amr.pivot_source of a graph parsed from the English source the input gave


def machine_english(wh: Warehouse, dataset: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    """`translations` rows by key (text, status, error, model), for the English translations wanted."""
    if not keys or not wh.exists(dataset, "translations"):
        return {}
    rows = wh.read(dataset, "translations", columns=["key", "text", "status", "error", "model"]).filter(
        pl.col("key").is_in(keys))
    return {r["key"]: r for r in rows.iter_rows(named=True)}


def parse_todo(wh: Warehouse, dataset: str, parse: ParseConfig, parser_id: str,
               translate: TranslateConfig | None = None) -> pl.DataFrame:
    """One row per ok sentence: the text actually parsed: the sentence; for a language without a parser, its given
    English source, else its English machine translation by the model `translate.to_english` names. A row that
    cannot be parsed carries the reason; its key says why, so a source that appears later gets a new key."""
    sentences = wh.read(dataset, "sentences", columns=["key", "lang", "text", "status"]).filter(pl.col("status") == OK)
    direct = parse.direct_langs()
    parallel = wh.read(dataset, "parallel").filter((pl.col("status") == OK) & (pl.col("source_lang") == PIVOT_LANG))
    english = dict(zip(parallel["target_key"].to_list(), parallel["source"].to_list(), strict=True))
    to_english = translate.to_english if translate is not None and parse.pivot else {}
    wanted = {key: english_translation_key(key, lang, translate)  # type: ignore[arg-type]
              for key, lang in zip(sentences["key"], sentences["lang"], strict=True)
              if lang not in direct and lang in to_english and key not in english}
    machine = machine_english(wh, dataset, list(wanted.values()))
    rows = []
    for key, lang, text in zip(sentences["key"], sentences["lang"], sentences["text"], strict=True):
        parsed, parse_lang, pivot, source, reason, why = None, None, None, None, None, ()
        if lang in direct:
            parsed, parse_lang = text, lang
        elif not parse.pivot:
            reason = f"no {parse.backend} parser for '{lang}' (pivot: false)"
        elif PIVOT_LANG not in direct:
            pivot, reason = PIVOT_LANG, f"no {parse.backend} parser for '{lang}' nor for English to pivot through"
        elif key in english:
            parsed, parse_lang, pivot, source = english[key], PIVOT_LANG, PIVOT_LANG, GIVEN
        elif key in wanted:
            pivot, source, row = PIVOT_LANG, to_english[lang], machine.get(wanted[key])
            if row is not None and row["status"] == OK:
                parsed, parse_lang, why = row["text"], PIVOT_LANG, (wanted[key],)
            elif row is not None:
                why = (wanted[key], "translation failed")
                reason = f"English translation of this '{lang}' sentence by {source} failed: {row['error']}"
            else:
                why = (wanted[key], "not translated")
                reason = (f"no English translation of this '{lang}' sentence by {source} yet (translate.to_english."
                          f"{lang}): run the translate stage")
        else:
            pivot, why = PIVOT_LANG, ("no English source",)
            reason = (f"no {parse.backend} parser for '{lang}' and no English source: give one (parallel columns) "
                      f"or set translate.to_english.{lang} to a model (e.g. Helsinki-NLP/opus-mt-{lang}-en)")
        rows.append({"key": content_key("amr", key, parser_id, pivot or "", parse.linearize, *why),
                     "sentence_key": key, "lang": lang, "parser": parser_id, "pivot_lang": pivot,
                     "pivot_source": source, "parsed_text": parsed, "parse_lang": parse_lang, "reason": reason})
    return pl.DataFrame(rows, schema=PARSE_TODO_SCHEMA)


def parse_stage(wh: Warehouse, pipeline: str, dataset: str, parse: ParseConfig, parser_id: str, run_id: str,
                parse_batches: Callable[[pl.DataFrame], pl.DataFrame],
                translate: TranslateConfig | None = None) -> StageRun:
    """AMR graphs for a dataset's sentences lacking one from this parser; `parse_batches` may distribute.
    `translate` (the pipeline's translate stage for this dataset) names the machine translations to pivot through.
    A sentence's earlier graphs from this parser with another key (another source text, model or setting) are
    removed once the new ones are in, so each sentence keeps one graph per parser."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=f"parse:{parser_id}", dataset=dataset,
                   config_hash=config_hash({"parse": parse.model_dump(mode="json"),
                                            "to_english": translate.to_english if translate else {},
                                            "settings": [translate.num_beams, translate.max_length]
                                            if translate else []}))
    with record_stage(wh, run):
        run.input_versions = {t: wh.version(dataset, t) for t in ("sentences", "parallel", "translations")}
        todo = parse_todo(wh, dataset, parse, parser_id, translate)
        current = todo.select("key", "sentence_key")
        run.rows_in = todo.height
        # parsers are deterministic per sentence: a failed row would fail again, so failed keys count as done
        todo = todo.filter(~pl.col("key").is_in(list(wh.keys(dataset, "amr", ok_only=False))))
        unparsable = todo.filter(pl.col("reason").is_not_null()).select(
            pl.exclude("reason"), pl.lit(None, pl.String).alias("penman"), pl.lit("failed").alias("status"),
            pl.col("reason").alias("error"), pl.lit(None, pl.Float64).alias("seconds"),
            pl.lit(None, pl.String).alias("linearized"))
        runnable = todo.filter(pl.col("reason").is_null()).drop("reason")
        # one commit per chunk: a crash loses at most the chunk in flight, and the rerun parses only the rest
        chunks = [unparsable] if unparsable.height else []
        chunks += [runnable.slice(i, parse.commit_rows) for i in range(0, runnable.height, parse.commit_rows)]
        for i, chunk in enumerate(chunks):
            rows = chunk if i == 0 and unparsable.height else parse_batches(chunk)
            wh.upsert(dataset, "amr", rows.drop("parse_lang", strict=False))
            if "amr" not in run.outputs:
                run.outputs.append("amr")
            run.rows_computed += rows.height
            run.rows_failed += rows.filter(pl.col("status") != OK).height
        if parser_id != "provided" and wh.exists(dataset, "amr"):  # graphs given in the input belong to ingest
            stored = wh.read(dataset, "amr", columns=["key", "sentence_key", "parser"]).filter(
                (pl.col("parser") == parser_id) & pl.col("sentence_key").is_in(current["sentence_key"].to_list()))
            stale = stored.filter(~pl.col("key").is_in(current["key"].to_list()))["key"].to_list()
            if wh.delete_keys(dataset, "amr", stale) and "amr" not in run.outputs:
                run.outputs.append("amr")
        run.rows_out = run.rows_computed
    return run


TRANSLATION_TODO_SCHEMA = {"key": pl.String, "source_key": pl.String, "source_lang": pl.String,
                           "target_lang": pl.String, "source": pl.String, "model": pl.String}


def translate_stage(wh: Warehouse, pipeline: str, dataset: str, tr: TranslateConfig, run_id: str,
                    translate_batches: Callable[[pl.DataFrame], pl.DataFrame]) -> StageRun:
    """`translations` rows: copied from the dataset's parallel table (backend provided) or generated (marian), and
    English translations of the `to_english` languages' sentences (marian) for the parse stage to parse."""
    run = StageRun(run_id=run_id, pipeline=pipeline, stage=f"translate:{tr.backend}", dataset=dataset,
                   config_hash=config_hash(tr))
    with record_stage(wh, run):
        done = wh.keys(dataset, "translations")  # failed translations (e.g. out of memory) are retried
        copied = pl.DataFrame()
        generate: list[dict[str, str]] = []
        sentences = None
        if tr.backend == "marian" or tr.to_english:
            run.input_versions["sentences"] = wh.version(dataset, "sentences")
            sentences = wh.read(dataset, "sentences", columns=["key", "lang", "text", "status"]).filter(
                pl.col("status") == OK)
        if tr.backend == "provided":
            run.input_versions["parallel"] = wh.version(dataset, "parallel")
            par = wh.read(dataset, "parallel").filter(pl.col("source_lang") == tr.source_lang)
            run.rows_in += par.height
            copied = par.select(
                pl.struct("source_key", "target_lang", "target").map_elements(
                    lambda r: content_key("translation", r["source_key"], r["target_lang"], "provided", r["target"]),
                    return_dtype=pl.String).alias("key"),
                "source_key", "source_lang", "target_lang", "source", pl.col("target").alias("text"),
                pl.lit("provided").alias("model"), pl.lit(None, pl.String).alias("flags"), "status", "error",
                pl.lit(None, pl.Float64).alias("seconds"))
            copied = copied.filter(~pl.col("key").is_in(list(done)))
        elif sentences is not None:
            src = sentences.filter(pl.col("lang") == tr.source_lang)
            generate += [{"key": translation_key(k, t, tr.models[t], tr.num_beams, tr.max_length), "source_key": k,
                          "source_lang": tr.source_lang, "target_lang": t, "source": text, "model": tr.models[t]}
                         for t in tr.targets for k, text in zip(src["key"], src["text"], strict=True)]
        if tr.to_english and sentences is not None:
            foreign = sentences.filter(pl.col("lang").is_in(list(tr.to_english)))
            generate += [{"key": english_translation_key(k, lang, tr), "source_key": k, "source_lang": lang,
                          "target_lang": PIVOT_LANG, "source": text, "model": tr.to_english[lang]}
                         for k, lang, text in zip(foreign["key"], foreign["lang"], foreign["text"], strict=True)]
        todo = pl.DataFrame(generate, schema=TRANSLATION_TODO_SCHEMA)
        run.rows_in += todo.height
        todo = todo.filter(~pl.col("key").is_in(list(done)))
        frames = [f for f in (copied, translate_batches(todo) if todo.height else None) if f is not None and f.height]
        rows = pl.concat(frames, how="diagonal_relaxed") if frames else todo
        if rows.height:
            wh.upsert(dataset, "translations", rows)
            run.outputs.append("translations")
            run.rows_computed = rows.height
            run.rows_failed = rows.filter(pl.col("status") != OK).height
        run.rows_out = run.rows_computed
    return run


def english_translation_key(sentence_key: str, lang: str, tr: TranslateConfig) -> str:
    """The content key of a sentence's English translation with the model `tr` names for its language."""
    return translation_key(sentence_key, PIVOT_LANG, tr.to_english[lang], tr.num_beams, tr.max_length)


def cross_encoder_scorer(wh: Warehouse, name: str, keys: list[str], sentences: pl.DataFrame) -> Scorer:
    """A trained cross-encoder (pear:...) as the kNN weak labeller of the sentences `keys` index; its name carries
    the resolved run, so a newer `pear:latest` gives new row keys and relabels."""
    from amrsim.augment import CallableScorer
    from amrsim.encoders import load_encoder

    try:
        model = load_encoder(name, device="auto", models_root=wh.models_root)
    except ValueError as exc:
        raise ConfigError(f"augment.scorer: {exc}") from None
    if not callable(getattr(model, "score", None)):
        raise ConfigError(f"augment.scorer '{name}' is not a cross-encoder (it embeds sentences); use 'cosine' "
                          "or a trained PEAR model such as pear:latest")
    text_of = dict(zip(sentences["key"].to_list(), sentences["text"].to_list(), strict=True))
    texts = [text_of[k] for k in keys]

    def score(pairs: list[tuple[int, int]]) -> Any:
        return model.score([texts[i] for i, _ in pairs], [texts[j] for _, j in pairs])

    return CallableScorer(f"cross-encoder:{model.model_id}", score)


def augment_stage(wh: Warehouse, pipeline: str, dataset: str, aug: AugmentConfig, run_id: str) -> StageRun:
    """Silver pairs for a pairs dataset: each pool sentence's k nearest neighbours by the bi-encoder, weak-labelled,
    gold pairs left out. Rows depend on the whole pool, so their keys include its digest; an unchanged pool
    rewrites nothing (embeddings come from the cache)."""
    from amrsim.augment import CosineScorer, augment_pairs

    run = StageRun(run_id=run_id, pipeline=pipeline, stage=f"augment:{aug.encoder}", dataset=dataset,
                   config_hash=config_hash(aug))
    with record_stage(wh, run):
        run.input_versions = {"pairs": wh.version(dataset, "pairs"), "sentences": wh.version(dataset, "sentences")}
        pairs = wh.read(dataset, "pairs").filter(pl.col("status") == OK)
        labelled = set(zip(pairs["sentence1_key"].to_list(), pairs["sentence2_key"].to_list(), strict=True))
        pool = pairs.filter((pl.col("lang1") == aug.lang) & (pl.col("lang2") == aug.lang))
        if aug.splits is not None:
            pool = pool.filter(pl.col("split").is_in(aug.splits))
        keys = sorted(set(pool["sentence1_key"].to_list()) | set(pool["sentence2_key"].to_list()))
        run.rows_in = len(keys)
        if len(keys) < 2:
            frame = pl.from_arrow(SCHEMAS["augmented_pairs"].empty_table())
        else:
            sentences = wh.read(dataset, "sentences", columns=["key", "text"]).filter(pl.col("key").is_in(keys))
            embed_sentences(wh, dataset, aug.encoder, sentences)
            vectors = read_embeddings(wh, dataset, aug.encoder, keys)
            scorer = (CosineScorer(aug.encoder) if aug.scorer == "cosine"
                      else cross_encoder_scorer(wh, aug.scorer, keys, sentences))
            frame = augment_pairs(keys, vectors, aug.k, labelled, aug.index, scorer)
            pool_digest = content_key("pool", model_id(aug.encoder, wh.models_root), keys)
            frame = frame.with_columns(pl.col("key").map_elements(lambda k: content_key(pool_digest, k),
                                                                  return_dtype=pl.String))
        added, removed = wh.sync(dataset, "augmented_pairs", frame)
        run.rows_computed = added
        run.rows_failed = frame.filter(pl.col("status") != OK).height
        run.rows_out = frame.height
        if added or removed:
            run.outputs.append("augmented_pairs")
    return run
