"""`amrsim parse`: sentences of a file into AMR graphs (optionally translated into English first)."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Annotated

import typer

from amrsim.cli.common import refuse_out_over_input, write_out
from amrsim.console import console
from amrsim.errors import ConfigError, InputError
from amrsim.files import file_format

# The parsers, translators and config (spaCy, torch, pydantic) are imported inside the command: `amrsim --help`
# does not need them.


def _read_sentences(path: Path, want_amr: bool) -> tuple[list[str], list[str | None]]:
    """Sentences (and graphs, for --backend provided) from JSONL(.gz)/TSV/CSV with a sentence|snt column, or a
    plain text file with one sentence per line."""
    if not path.is_file():
        raise InputError(str(path), "file not found")
    fmt = file_format(path, {".jsonl": "jsonl", ".tsv": "tsv", ".csv": "csv"})
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"not UTF-8 ({e.reason} at byte {e.start})") from None
    if fmt == "jsonl":
        records = []
        for i, line in enumerate(lines, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}:{i}", f"invalid JSON: {e.msg}") from None
    elif fmt in ("tsv", "csv"):
        sep = "\t" if fmt == "tsv" else ","
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
    from amrsim.amr.backends import ParseResult
    from amrsim.amr.parsing import ParserSpec, linearized_column, parser_for
    from amrsim.config import PARSER_LANGS, PIVOT_LANG

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


