"""`amrsim parse`: sentences of a file into AMR graphs (optionally translated into English first)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from amrsim.cli.common import check_out, input_path, write_out
from amrsim.console import console, progress_bar
from amrsim.errors import ConfigError, InputError
from amrsim.files import file_format, header_columns

# The parsers, translators, readers and config (spaCy, torch, polars, pydantic) are imported inside the command:
# `amrsim --help` does not need them.


def _read_sentences(path: Path, want_amr: bool) -> tuple[list[str], list[str | None], list[str | None]]:
    """Sentences (and graphs, for --backend provided) from JSONL(.gz)/TSV/CSV with a sentence|snt column, or a
    plain text file with one sentence per line; and per row the reader's reason when a cell is not text (a JSONL
    number or list), which is that row's failure."""
    from amrsim.ingest.readers import read_rows

    fmt = file_format(path, {".jsonl": "jsonl", ".tsv": "tsv", ".csv": "csv"}, default="lines")
    header = ["sentence"] if fmt == "lines" else header_columns(path, fmt)
    column = next((c for c in ("sentence", "snt") if c in header), None)
    if column is None:
        raise InputError(str(path), "needs a 'sentence' or 'snt' column")
    want_amr = want_amr and fmt != "lines"
    if want_amr and "amr" not in header:
        raise InputError(str(path), "--backend provided needs an 'amr' column")
    columns = [column, "amr"] if want_amr else [column]
    rows = read_rows(path, fmt, columns, text_columns=columns)
    return ([s or "" for s in rows[column]], rows["amr"].to_list() if want_amr else [None] * rows.height,
            rows["__error"].to_list())


def _translate_to_english(model: str, lang: str, sentences: list[str], device: str
                          ) -> tuple[list[str | None], list[str | None]]:
    """English translation (None when it failed) and the failure's reason, per sentence; a model that does not
    load is a config error naming it."""
    from amrsim.translate.run import TranslatorSpec, translator_for

    with progress_bar(len(sentences), f"translate {lang}->en with {model}") as advance:
        try:
            translator = translator_for(TranslatorSpec(model, device=device))
        except (OSError, ValueError) as e:
            raise ConfigError(f"--translate '{model}' ({lang}->en): {e}") from None
        results = translator.translate(sentences, on_progress=advance)
    return [r.text for r in results], [r.error for r in results]


def _parse_section(backend: str, **options: Any) -> Any:
    """The options as a pipeline's `parse` section, validated by it; a bad value is a ConfigError naming it."""
    from pydantic import ValidationError

    from amrsim.config import ParseConfig

    try:
        return ParseConfig(backend=backend, **options)
    except ValidationError as e:
        err = e.errors()[0]
        option = f"--{str(err['loc'][0]).replace('_', '-')} {err['input']!r}" if err["loc"] else f"--backend {backend}"
        raise ConfigError(f"{option}: {err['msg'].removeprefix('Value error, ')}") from None


def _checked_graphs(graphs: list[str | None]) -> list[Any]:
    """Graphs given in the input as parse results: each one that does not read fails with the reason."""
    from amrsim.amr.backends import ParseResult
    from amrsim.amr.graph import AMRError, parse

    results = []
    for g in graphs:
        try:
            parse(g or "")
            results.append(ParseResult(g))
        except AMRError as e:
            results.append(ParseResult.failed(str(e)))
    return results


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
    from amrsim.amr.backends import BACKENDS, PIVOT_LANG, PROVIDED, ParseResult
    from amrsim.amr.parsing import linearized_column, parser_for
    from amrsim.langs import normalise_lang
    from amrsim.warehouse import OK

    check_out(out, "parse", file=file)
    input_path(file, "--file")
    if backend not in BACKENDS:
        raise ConfigError(f"--backend '{backend}': use one of {sorted(BACKENDS)}")
    if translate is not None and (backend == PROVIDED or lang == PIVOT_LANG):
        raise ConfigError(f"--translate: translates --lang into English for parsing; it does not apply to "
                          f"{'--backend provided' if backend == PROVIDED else 'English sentences'}")
    parse_lang = PIVOT_LANG if translate is not None else lang
    langs = BACKENDS[backend].langs
    if backend != PROVIDED and parse_lang not in langs:
        code = normalise_lang(lang)
        if code is None:  # a suggestion built from it would name a model that cannot exist
            raise ConfigError(f"--lang '{lang[:40]}': not a language code; use e.g. de, es or zh")
        raise ConfigError(f"--lang '{lang}': backend {backend} parses {list(langs)}; translate into English "
                          f"first: --translate Helsinki-NLP/opus-mt-{code.split('-')[0]}-en (or a model directory)")
    if model_dir is not None:
        input_path(model_dir, "--model-dir", directory=True)
    if linearize not in ("paper", "pointer", "none"):
        raise ConfigError(f"--linearize '{linearize}': use paper, pointer or none")
    section = _parse_section(backend, langs=[parse_lang] if backend != PROVIDED else [], batch_size=batch_size,
                             model_dir=str(model_dir) if model_dir else None, device=device)
    sentences, given, unreadable = _read_sentences(file, want_amr=backend == PROVIDED)
    t0 = time.perf_counter()
    english: list[str | None] = []
    why: list[str | None] = []
    if translate is not None:
        english, why = _translate_to_english(translate, lang, sentences, device)
    if backend == PROVIDED:
        results = _checked_graphs(given)
    else:
        # the rows that translated are parsed; the others fail with the translation's reason
        ok = [i for i, t in enumerate(english) if t is not None] if translate is not None else []
        with progress_bar(len(sentences) if translate is None else len(ok), f"parse {file.name} ({backend})"
                          ) as advance:
            parser = parser_for(section.parser_specs()[parse_lang])  # (a bar from the start: loading takes seconds)
            graphs = parser.parse(sentences if translate is None else [english[i] or "" for i in ok],
                                  on_progress=advance)
        if translate is None:
            results = graphs
        else:
            parsed = dict(zip(ok, graphs, strict=True))
            results = [parsed.get(i) or ParseResult.failed(f"translation failed: {why[i]}")
                       for i in range(len(sentences))]
    # a cell that is not text fails with the reader's reason, not as the empty text it was read as
    results = [r if reason is None else ParseResult.failed(reason)
               for r, reason in zip(results, unreadable, strict=True)]
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
    failed = sum(r.status != OK for r in results)
    rate = f"{len(sentences) / seconds:.0f} sentences/s" if sentences and seconds else "no sentences"
    console.print(f"{len(sentences)} sentences: {len(sentences) - failed} parsed, {failed} failed ({rate}) -> {out}")
