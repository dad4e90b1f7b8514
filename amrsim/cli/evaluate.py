"""`amrsim evaluate {sts,bitext,transfer,aspects,suite,ood}` and `amrsim report`: every result goes to
warehouse/eval/results (reused when its inputs are unchanged) and is printed as a table."""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import Annotated

import typer

from amrsim.cli.common import (
    ConfigOpt,
    JsonOpt,
    emit_json,
    evaluation_document,
    input_path,
    print_scores,
    shown_values,
    warehouse_root,
)
from amrsim.console import console, frame_table
from amrsim.errors import AmrsimError, ConfigError, WarehouseError
from amrsim.files import TABLE_FORMATS, file_format, header_columns

# The config, the warehouse (polars), the encoders (torch) and the evaluations are imported inside the commands:
# `amrsim --help` does not need them.

evaluate_app = typer.Typer(no_args_is_help=True, help="Evaluate encoders (results go to warehouse/eval/results).")

EncoderOpt = Annotated[str, typer.Option(help="minilm, muse, hf:<id|path>[#mean|#cls] or <method>:<run id|latest>")]
BatchOpt = Annotated[int, typer.Option(min=1)]
DeviceOpt = Annotated[str, typer.Option(help="auto, cpu or cuda")]

_S1 = ("sentence1", "sentence_A", "sentence_a", "s1")
_S2 = ("sentence2", "sentence_B", "sentence_b", "s2")
_SCORE = ("score", "relatedness_score", "similarity", "label", "gold")


def sentence_langs(value: str) -> tuple[str, str]:
    """--lang 'de' -> ('de', 'de'); 'es-en' -> ('es', 'en'): sentence 1 Spanish, sentence 2 English. Two
    language codes joined by '-' are a pair; one tag (en-US) is both sentences' language."""
    from amrsim.ingest.normalise import normalise_lang

    parts = value.strip().split("-")
    if len(parts) == 2 and all(re.fullmatch(r"[A-Za-z]{2,3}", p) and normalise_lang(p) for p in parts):
        return normalise_lang(parts[0]) or parts[0], normalise_lang(parts[1]) or parts[1]
    code = normalise_lang(value)
    if code is None:
        raise ConfigError(f"--lang '{value}': not a language code; use e.g. en, de, or es-en (sentence 1 Spanish, "
                          f"sentence 2 English)")
    return code, code


def _pick(header: list[str], given: str | None, candidates: tuple[str, ...]) -> str:
    if given:
        return given
    return next((c for c in candidates if c in header), candidates[0])


def _warehouse(config: str, encoder: str | None = None):
    """The warehouse, after checking the encoder name resolves (unknown names list the known ones)."""
    from amrsim.encoders import model_id
    from amrsim.warehouse import Warehouse

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    wh = Warehouse(warehouse_root(config))
    if encoder is not None:
        try:
            model_id(encoder, wh.models_root)
        except ValueError as e:
            raise ConfigError(f"--encoder: {e}") from None
    return wh


def _check_dataset(name: str) -> str:
    """A --dataset value, checked before any path is built from it."""
    from amrsim.config import dataset_name_error

    if problem := dataset_name_error(name):
        raise ConfigError(f"--dataset: {problem}")
    return name


def _lang_files(items: list[str] | None, option: str) -> dict[str, Path]:
    """['de=path', ...] -> {'de': Path}; each file must exist."""
    from amrsim.langs import LANG_HINT, lang_code

    out: dict[str, Path] = {}
    for item in items or []:
        lang, sep, path = item.partition("=")
        if not sep or not lang or not path:
            raise ConfigError(f"{option} '{item}': expected LANG=PATH (e.g. {option} de=stsb_de_test.tsv)")
        code = lang_code(lang).code
        if code is None:
            raise ConfigError(f"{option} '{item}': '{lang}' is not a language code ({LANG_HINT})")
        out[code] = input_path(path, option)
    return out


@evaluate_app.command("sts")
def evaluate_sts_cmd(
        encoder: EncoderOpt,
        file: Annotated[Path, typer.Option(help="TSV/CSV/JSONL/Parquet with two sentences and a gold score")],
        sentence1_col: Annotated[str | None, typer.Option(help="default: sentence1 or sentence_A")] = None,
        sentence2_col: Annotated[str | None, typer.Option(help="default: sentence2 or sentence_B")] = None,
        score_col: Annotated[str | None, typer.Option(help="default: score or relatedness_score")] = None,
        lang: Annotated[str, typer.Option(
            help="language of both sentences (de), or of sentence 1 and sentence 2 (es-en); lang1/lang2 (or lang) "
                 "columns of the file override it row by row")] = "en",
        translation: Annotated[list[str] | None, typer.Option(
            help="LANG=PATH: a row-aligned file of the same pairs in LANG (stsb_multi_mt); repeatable")] = None,
        lang_pairs: Annotated[str | None, typer.Option(
            help="comma-separated, e.g. de-de,en-de (sentence1 lang-sentence2 lang); default: every language pair "
                 "of the file's rows, and for each translation L: L-L and LANG-L")] = None,
        split: Annotated[str | None, typer.Option(help="default: train/dev/test from the file name, else all")] = None,
        dataset: Annotated[str | None, typer.Option(
            help="warehouse dataset name (default: file_<file stem>_<hash of its path>, docs/pipeline.md)")] = None,
        translate: Annotated[list[str] | None, typer.Option(
            help="LANG=MODEL: a MarianMT model (hub id such as Helsinki-NLP/opus-mt-es-en, or a directory) "
                 "translating LANG into English for an encoder that parses (mse_amr:...); repeatable")] = None,
        batch_size: BatchOpt = 64, device: DeviceOpt = "auto", config: ConfigOpt = "pipelines.yaml",
        json_: JsonOpt = False) -> None:
    """Spearman and Pearson (x100) of cosine similarity vs gold, monolingual and cross-lingual; embeddings cached.
    A cross-encoder (pear:...) scores each pair directly."""
    from amrsim.config import StsEvalConfig, validation_line
    from amrsim.langs import lang_code
    from amrsim.stages.evaluate import ingest_one_off, one_off_pairs, results_table, sts_stage
    from amrsim.warehouse.lineage import new_run_id

    fmt = file_format(input_path(file, "--file"))
    if fmt is None:
        suffixes = list(TABLE_FORMATS)
        raise ConfigError(f"--file {file}: evaluate sts reads {', '.join(suffixes[:-1])} or {suffixes[-1]} files, "
                          f"optionally gzipped (.tsv.gz)")
    if dataset is not None:
        _check_dataset(dataset)
    wh = _warehouse(config, encoder)
    lang1, lang2 = (lang_code(side).code or side for side in sentence_langs(lang))  # en-US: rows and pairs say en
    given_pairs = None
    if lang_pairs:  # checked (and normalised: deu-eng is de-en) before anything is read or written
        try:
            given_pairs = StsEvalConfig(lang_pairs=[p.strip() for p in lang_pairs.split(",")]).lang_pairs
        except ValueError as e:
            raise ConfigError(f"--lang-pairs: {validation_line(e)}") from None
    translators = _translators(translate, device)
    header = header_columns(file, fmt)
    columns = {"sentence1": _pick(header, sentence1_col, _S1), "sentence2": _pick(header, sentence2_col, _S2),
               "score": _pick(header, score_col, _SCORE)}
    columns |= {c: c for c in ("lang", "lang1", "lang2") if c in header}  # per-row languages
    translations = _lang_files(translation, "--translation")
    try:  # the file as a dataset of its own (name, split from its name), never a pipeline's
        name, split, ds = one_off_pairs(file, columns, lang1, lang2, translations, split, dataset)
    except ValueError as e:
        raise ConfigError(f"--file {file}: {validation_line(e)}") from None
    run_id = new_run_id()
    ingest_one_off(wh, name, ds, file, run_id)
    pairs = (given_pairs if given_pairs else
             [*_file_lang_pairs(wh, name, split), *(p for tl in translations for p in (f"{tl}-{tl}", f"{lang1}-{tl}"))])
    try:
        sts = StsEvalConfig(encoders=[encoder], datasets=[name], splits=[split],
                            lang_pairs=list(dict.fromkeys(p.strip() for p in pairs)))
    except ValueError as e:
        raise ConfigError(f"--file {file}: {validation_line(e)}") from None
    try:
        _, rows = sts_stage(wh, "cli", sts, run_id, batch_size=batch_size, device=device, translate=translators)
    except WarehouseError as e:  # a sentence without a vector: say which rows failed and why
        raise AmrsimError(f"{file}: {failed_embeddings(wh, name, encoder) or e}") from None
    table = results_table(rows)
    if not table.height:
        raise AmrsimError(f"{file}: fewer than 2 valid pairs to evaluate in {', '.join(pairs)}")
    missing = [p for p in pairs if p not in set(table["lang_pair"].to_list())]
    notes = [f"no pairs (fewer than 2) for language pair(s): {', '.join(missing)}"] if missing else []
    if json_:
        emit_json(evaluation_document("evaluate sts", rows, notes))
        return
    console.print(frame_table(shown_values(table, ["spearman", "pearson"]), f"STS (x100) {file.name}"))
    for note in notes:
        console.print(note)


def _translators(items: list[str] | None, device: str) -> dict:
    """['es=Helsinki-NLP/opus-mt-es-en', 'de=./opus-de-en'] -> {language: TranslatorSpec}; a directory must exist."""
    from amrsim.files import looks_like_path
    from amrsim.ingest.normalise import normalise_lang
    from amrsim.translate.run import TranslatorSpec

    out = {}
    for item in items or []:
        lang, sep, model = item.partition("=")
        code = normalise_lang(lang)
        if not sep or not model or code is None:
            raise ConfigError(f"--translate '{item}': expected LANG=MODEL (e.g. --translate "
                              f"es=Helsinki-NLP/opus-mt-es-en)")
        if looks_like_path(model) or Path(model).expanduser().exists():
            path = Path(model).expanduser().resolve()
            if not path.is_dir():
                raise ConfigError(f"--translate '{item}': model directory not found ({path})")
            model = str(path)
        out[code] = TranslatorSpec(model, device=device)
    return out


def failed_embeddings(wh, dataset: str, encoder: str) -> str | None:
    """'N sentences have no vector: "text" (lang): why; ...' for an encoder's failed rows of a dataset."""
    import polars as pl

    from amrsim.encoders import model_id

    failed = wh.read(dataset, "embeddings", columns=["sentence_key", "model_id", "status", "error"]).filter(
        (pl.col("model_id") == model_id(encoder, wh.models_root)) & (pl.col("status") != "ok"))
    if not failed.height:
        return None
    sentences = wh.read(dataset, "sentences", columns=["key", "lang", "text"])
    rows = failed.join(sentences, left_on="sentence_key", right_on="key").sort("text")
    shown = "; ".join(f"{t[:40]!r} ({lg}): {e}" for t, lg, e in zip(rows["text"][:3], rows["lang"][:3],
                                                                      rows["error"][:3], strict=True))
    return f"{failed.height} sentence(s) have no {encoder} vector: {shown}{'; ...' if failed.height > 3 else ''}"


def _file_lang_pairs(wh, dataset: str, split: str) -> list[str]:
    """The (sentence 1, sentence 2) language pairs of a dataset's ok rows, most rows first."""
    import polars as pl

    pairs = wh.read(dataset, "pairs", columns=["lang1", "lang2", "status", "split"]).filter(pl.col("status") == "ok")
    if split != "all":
        pairs = pairs.filter(pl.col("split") == split)
    counted = pairs.group_by("lang1", "lang2").len().sort("len", "lang1", "lang2", descending=[True, False, False])
    return [f"{a}-{b}" for a, b in zip(counted["lang1"], counted["lang2"], strict=True)]


def _expand(patterns: list[str]) -> list[Path]:
    files: list[Path] = []
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if not found:
            raise ConfigError(f"'{pattern}': no file matches ({Path(pattern).resolve()})")
        files += [input_path(f, "--file") for f in found]
    return files


@evaluate_app.command("bitext")
def evaluate_bitext_cmd(
        encoder: EncoderOpt,
        file: Annotated[list[str] | None, typer.Option(
            help="two-column row-aligned TSV whose header names the languages (tatoeba.deu-eng.tsv); a glob; "
                 "repeatable")] = None,
        src: Annotated[Path | None, typer.Option(help="or: a plain-text file, one sentence per line")] = None,
        tgt: Annotated[Path | None, typer.Option(help="its line-aligned translations")] = None,
        src_lang: Annotated[str | None, typer.Option(help="language of --src")] = None,
        tgt_lang: Annotated[str | None, typer.Option(help="language of --tgt")] = None,
        batch_size: BatchOpt = 64, device: DeviceOpt = "auto", config: ConfigOpt = "pipelines.yaml",
        json_: JsonOpt = False) -> None:
    """Tatoeba bitext retrieval: top-1 accuracy (x100) in both directions and their mean."""
    import polars as pl

    from amrsim.console import progress_bar
    from amrsim.stages.evaluate import bitext_eval
    from amrsim.warehouse.lineage import new_run_id

    pair = (src, tgt, src_lang, tgt_lang)
    if not file and not any(pair):
        raise ConfigError("give --file TSV (repeatable) or --src, --tgt, --src-lang and --tgt-lang")
    if any(pair) and not all(pair):
        raise ConfigError("two plain-text files need all of --src, --tgt, --src-lang and --tgt-lang")
    wh = _warehouse(config, encoder)
    run_id = new_run_id()
    files = _expand(file or [])
    frames = []
    # a directory of Tatoeba files is minutes of work: one bar (or a line every 10 s) over the files
    with progress_bar(len(files), f"evaluate bitext with {encoder}", unit="files", least=2) as advance:
        for f in files:
            frames.append(bitext_eval(wh, encoder, f, run_id, batch_size=batch_size, device=device))
            advance(1)
    if src is not None and tgt is not None and src_lang and tgt_lang:
        for path, option in ((src, "--src"), (tgt, "--tgt")):
            input_path(path, option)
        frames.append(bitext_eval(wh, encoder, src, run_id, batch_size=batch_size, device=device, tgt_path=tgt,
                                  langs=(src_lang, tgt_lang)))
    rows = pl.concat(frames, how="vertical_relaxed")
    means = rows.filter(pl.col("metric") == "accuracy")
    notes = ([f"mean accuracy over {means.height} language pairs: {means['value'].mean():.2f}"]
             if means.height > 1 else [])
    if json_:
        emit_json(evaluation_document("evaluate bitext", rows, notes))
        return
    print_scores(rows, "Bitext retrieval accuracy (x100)")
    for note in notes:
        console.print(note)


@evaluate_app.command("bucc")
def evaluate_bucc_cmd(
        encoder: EncoderOpt,
        src_lang: Annotated[str, typer.Option(help="source language code (e.g. de)")],
        tgt_lang: Annotated[str, typer.Option(help="target language code (e.g. en)")],
        src_train: Annotated[Path, typer.Option(help="BUCC corpus: id<TAB>sentence per line")],
        tgt_train: Annotated[Path, typer.Option()],
        gold_train: Annotated[Path, typer.Option(help="gold alignment: src_id<TAB>tgt_id per line")],
        src_test: Annotated[Path, typer.Option()],
        tgt_test: Annotated[Path, typer.Option()],
        gold_test: Annotated[Path, typer.Option()],
        k: Annotated[int, typer.Option(min=1, help="neighbours in the ratio margin")] = 4,
        mode: Annotated[str, typer.Option(help="forward | backward | intersect | max")] = "max",
        dataset: Annotated[str, typer.Option(help="warehouse dataset for the embeddings and results")] = "bucc",
        batch_size: BatchOpt = 64, device: DeviceOpt = "auto", config: ConfigOpt = "pipelines.yaml",
        json_: JsonOpt = False) -> None:
    """BUCC-style mining with ratio-margin scores: threshold chosen on train by F1, precision/recall/F1 on test."""
    from amrsim.stages.evaluate import bucc_eval
    from amrsim.warehouse.lineage import new_run_id

    _check_dataset(dataset)
    wh = _warehouse(config, encoder)
    files = {"src_train": src_train, "tgt_train": tgt_train, "gold_train": gold_train, "src_test": src_test,
             "tgt_test": tgt_test, "gold_test": gold_test}
    for name, path in files.items():
        input_path(path, f"--{name.replace('_', '-')}")
    try:
        rows = bucc_eval(wh, encoder, files, src_lang, tgt_lang, new_run_id(), k, mode, dataset,
                         batch_size=batch_size, device=device)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if json_:
        emit_json(evaluation_document("evaluate bucc", rows))
        return
    print_scores(rows, f"BUCC mining {src_lang}-{tgt_lang} (x100; threshold = margin)")


@evaluate_app.command("aspects")
def evaluate_aspects_cmd(
        encoder: EncoderOpt,
        dataset: Annotated[str, typer.Option(help="warehouse dataset with an amr_metrics table")],
        split: Annotated[str | None, typer.Option(help="only pairs of this split")] = None,
        batch_size: BatchOpt = 64, device: DeviceOpt = "auto", config: ConfigOpt = "pipelines.yaml",
        json_: JsonOpt = False) -> None:
    """Spearman (x100) of the encoder's (aspect) similarity vs each AMR metric aspect (S3BERT Table 1)."""
    from amrsim.stages.evaluate import aspects_eval
    from amrsim.warehouse.lineage import new_run_id

    _check_dataset(dataset)
    wh = _warehouse(config, encoder)
    rows = aspects_eval(wh, encoder, dataset, new_run_id(), split, batch_size=batch_size, device=device)
    if json_:
        emit_json(evaluation_document("evaluate aspects", rows))
        return
    print_scores(rows, f"AMR aspects: Spearman (x100) - {dataset}")


@evaluate_app.command("transfer")
def evaluate_transfer_cmd(
        encoder: EncoderOpt,
        task: Annotated[str, typer.Option(help="sick_e, xnli, pawsx, mldoc, marc, or a name with --kind")],
        train: Annotated[Path, typer.Option(help="English training file")],
        dev: Annotated[list[str], typer.Option(help="LANG=PATH; C is chosen on all dev sets together; repeatable")],
        test: Annotated[list[str], typer.Option(help="LANG=PATH; one accuracy per language; repeatable")],
        kind: Annotated[str | None, typer.Option(help="single or pair, for a task amrsim does not know")] = None,
        batch_size: BatchOpt = 64, device: DeviceOpt = "auto", config: ConfigOpt = "pipelines.yaml",
        json_: JsonOpt = False) -> None:
    """SentEval-style transfer: logistic regression on frozen embeddings, trained on English, zero-shot elsewhere."""
    from amrsim.stages.evaluate import transfer_eval
    from amrsim.warehouse.lineage import new_run_id

    wh = _warehouse(config, encoder)
    input_path(train, "--train")
    try:
        rows, bad = transfer_eval(wh, encoder, task, train, _lang_files(dev, "--dev"), _lang_files(test, "--test"),
                                  new_run_id(), kind=kind, batch_size=batch_size, device=device)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    notes = [f"{path}: {len(left)} row(s) left out "
             f"({', '.join(f'line {b.line}: {b.reason}' for b in left[:3])}{', ...' if len(left) > 3 else ''})"
             for path, left in bad.items() if left]
    if json_:
        emit_json(evaluation_document("evaluate transfer", rows, notes))
        return
    print_scores(rows, f"Transfer {task}: accuracy (x100)")
    for note in notes:
        console.print(note)


@evaluate_app.command("suite")
def evaluate_suite_cmd(
        encoder: EncoderOpt,
        pipeline: Annotated[str | None, typer.Option(help="whose `evaluate:` data to use (default pipeline)")] = None,
        batch_size: BatchOpt = 64, device: DeviceOpt = "auto", config: ConfigOpt = "pipelines.yaml",
        json_: JsonOpt = False) -> None:
    """Every evaluation the pipeline configures (sts, bitext, transfer, aspects) for one encoder, then the report."""
    from amrsim.config import load_config
    from amrsim.stages.evaluate import run_suite

    cfg = load_config(config, pipeline=pipeline)
    name, pipe = cfg.pipeline(pipeline)
    if not pipe.evaluate:
        raise ConfigError(f"{cfg.path}: pipeline '{name}' has no `evaluate:` section")
    wh = _warehouse(config, encoder)
    out = run_suite(wh, cfg.section(name), [encoder], batch_size=batch_size, device=device)
    if json_:
        import polars as pl

        rows = pl.concat(list(out.tables.values()), how="diagonal_relaxed") if out.tables else None
        emit_json(evaluation_document("evaluate suite", rows, out.notes,
                                      report=out.report.html if out.report is not None else None))
        return
    for title, rows in out.tables.items():
        print_scores(rows, title)
    for note in out.notes:
        console.print(note)
    if out.report is not None:
        console.print(f"report: {out.report.html}")


def _ood_encoders(items: list[str], splits: list[str] | None, base: str | None,
                  models_root: Path) -> tuple[dict[str, list[str]], dict[str, str | None]]:
    """--encoder [SPLIT=]NAME values -> encoders per protocol split (a bare name: every split) and each model's base
    (--base, else the base its model.json records, else minilm)."""
    from amrsim.encoders import base_for, model_id
    from amrsim.evaluate.ood import SPLITS, split_named

    per_split: dict[str, list[str]] = {}
    everywhere: list[str] = []
    for item in items:
        split, sep, name = item.partition("=")
        if not sep:
            everywhere.append(item)
            continue
        split_named(split)
        if not name:
            raise ConfigError(f"--encoder '{item}': expected SPLIT=NAME (e.g. --encoder loo-forums=pear:r1)")
        per_split.setdefault(split, []).append(name)
    for name in everywhere + [n for names in per_split.values() for n in names] + ([base] if base else []):
        try:
            model_id(name, models_root)
        except ValueError as e:
            raise ConfigError(f"--encoder: {e}") from None
    chosen = [split_named(s).name for s in splits] if splits else (
        list(SPLITS) if everywhere or not per_split else list(per_split))
    bases = {n: base or base_for(n, models_root) for n in everywhere + [x for v in per_split.values() for x in v]}
    bases = {n: (b if b != n else None) for n, b in bases.items()}
    out = {}
    for split in chosen:
        names = everywhere + per_split.get(split, [])
        if not names:
            continue
        extra = [b for b in (bases[n] for n in names) if b and b not in names]
        out[split] = list(dict.fromkeys(names + extra))
    for b in {b for b in bases.values() if b}:
        bases.setdefault(b, None)
    return out, bases


def ood_records(table) -> list[dict]:
    """The protocol's table for --json: snake_case fields; `below_base` a list of "in"/"ood" (empty when not below,
    null without a base to compare with)."""
    names = {"train -> ood": "description", "base in": "base_in", "base ood": "base_ood", "delta in": "delta_in",
             "delta ood": "delta_ood"}
    records = [{names.get(k, k): v for k, v in row.items()} for row in table.to_dicts()] if table.height else []
    for record in records:
        below = record["below_base"]
        record["below_base"] = None if below is None else [part for part in below.split(", ") if part]
    return records


def print_ood(table) -> None:
    """The protocol's table; a model scoring under its base is flagged in the last column."""
    import polars as pl

    if not table.height:
        console.print("out-of-distribution protocol: no results")
        return
    floats = [c for c, t in table.schema.items() if t == pl.Float64]
    shown = table.with_columns(
        *(pl.col(c).map_elements(lambda v: f"{v:+.2f}" if v is not None else "-", return_dtype=pl.String)
          .fill_null("-") if c.startswith("delta") else
          pl.col(c).map_elements(lambda v: f"{v:.2f}", return_dtype=pl.String).fill_null("-") for c in floats),
        pl.col("base").fill_null("-"),
        pl.when(pl.col("below_base").is_null()).then(pl.lit("-"))
          .when(pl.col("below_base") == "").then(pl.lit("no"))
          .otherwise(pl.lit("BELOW BASE: ") + pl.col("below_base")).alias("below base"),
    ).drop("below_base", "train -> ood")
    console.print(frame_table(shown, "Out-of-distribution protocol: STS Spearman (x100), in = test pairs of the "
                                     "training distribution, ood = held-out test pairs"))
    for split, what in table.select("split", "train -> ood").unique(maintain_order=True).iter_rows():
        console.print(f"{split}: {what}")


@evaluate_app.command("ood")
def evaluate_ood_cmd(
        encoder: Annotated[list[str], typer.Option(
            help="[SPLIT=]NAME: a model for one split (loo-forums=pear:r1) or, bare, for every split; repeatable")],
        base: Annotated[str | None, typer.Option(
            help="compare with this encoder (default: the base a trained model records, else minilm)")] = None,
        split: Annotated[list[str] | None, typer.Option(
            help="loo-captions, loo-forums, loo-news, stsb-to-sick, sick-to-stsb (default: every split named by "
                 "--encoder, or all); repeatable")] = None,
        pipeline: Annotated[str, typer.Option(help="pipeline naming the STSb and SICK source files")] = "ood",
        batch_size: BatchOpt = 64, device: DeviceOpt = "auto", config: ConfigOpt = "pipelines.yaml",
        json_: JsonOpt = False) -> None:
    """Out-of-distribution protocol: each model and its base on each split's in-distribution and held-out test pairs,
    side by side; a model below its base is flagged. Results go to eval/results (datasets ood_<split>)."""
    from amrsim.config import load_config
    from amrsim.encoders import run_name
    from amrsim.evaluate.ood import ood_table
    from amrsim.stages.evaluate import evaluate_ood
    from amrsim.warehouse.lineage import new_run_id

    cfg = load_config(config, pipeline=pipeline)
    name, _ = cfg.pipeline(pipeline)
    wh = _warehouse(config)
    encoders, bases = _ood_encoders(encoder, split, base, wh.models_root)
    bases = {run_name(m, wh.models_root): b and run_name(b, wh.models_root) for m, b in bases.items()}
    rows, notes = evaluate_ood(wh, cfg.section(name), encoders, new_run_id(), batch_size=batch_size, device=device)
    if json_:
        emit_json(evaluation_document("evaluate ood", rows, notes, comparison=ood_records(ood_table(rows, bases))))
        return
    print_ood(ood_table(rows, bases))
    for note in notes:
        console.print(note)


def report_command(
        out: Annotated[Path | None, typer.Option(help="directory (default: <warehouse>/reports)")] = None,
        config: ConfigOpt = "pipelines.yaml") -> None:
    """Render warehouse/eval/results as report.html (self-contained) and report.md with figures."""
    from amrsim.stages.evaluate import write_report

    paths = write_report(_warehouse(config), out)
    console.print(f"report: {paths.html}\nmarkdown: {paths.markdown} ({len(paths.figures)} figures)")
