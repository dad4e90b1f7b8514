"""Reading bitext evaluation files: Tatoeba (a two-column TSV whose header names the languages, or LASER's two
line-aligned text files) and BUCC (`id<TAB>sentence` files and the gold `src_id<TAB>tgt_id` alignment). The mining
and its scores are `amrsim.evaluate.bitext`'s."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from amrsim.errors import InputError
from amrsim.langs import lang_code


def _read_lines(path: str | Path) -> list[str]:
    """The file's lines, split on "\\n" only (a sentence may hold other Unicode line separators), the line
    terminator (\\n or \\r\\n) removed and nothing else; a UTF-8 BOM is dropped."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except OSError as e:
        raise InputError(str(path), f"cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"not UTF-8 ({e.reason})", line=data[: e.start].count(b"\n") + 1) from None
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":  # the last line's terminator
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _fields(path: str | Path, line: str, lineno: int, what: str) -> tuple[str, str]:
    """Split one line on tabs (no quoting: a '"' is text); anything but exactly two fields is an error."""
    parts = line.split("\t")
    if len(parts) != 2:
        raise InputError(str(path), f"expected 2 tab-separated {what}, found {len(parts)}", line=lineno)
    return parts[0], parts[1]


def read_bitext(path: str | Path) -> tuple[str, str, list[str], list[str]]:
    """(src_lang, tgt_lang, src, tgt) from a row-aligned two-column TSV whose header names the languages
    (`deu\\teng`), as the shared Tatoeba files are; row i of one column translates row i of the other."""
    lines = _read_lines(path)
    if not lines:
        raise InputError(str(path), "empty file: expected a header naming the two languages, then rows")
    src_lang, tgt_lang = _fields(path, lines[0], 1, "language names in the header")
    if lang_code(src_lang.strip()).code is None or lang_code(tgt_lang.strip()).code is None:
        raise InputError(str(path), f"the header must name the two languages (e.g. 'deu<TAB>eng'), got "
                                    f"{lines[0]!r}: a file without that header would lose its first pair", line=1)
    if len(lines) == 1:
        raise InputError(str(path), "header only: no sentence pairs")
    src: list[str] = []
    tgt: list[str] = []
    for lineno, line in enumerate(lines[1:], start=2):
        s, t = _fields(path, line, lineno, "columns")
        src.append(s)
        tgt.append(t)
    return src_lang.strip(), tgt_lang.strip(), src, tgt


def read_bitext_pair(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """(src, tgt) from two line-aligned plain-text files with one sentence per line (LASER's original
    `tatoeba.deu-eng.deu` / `.eng` layout); the languages are not in the files, so the caller names them."""
    src, tgt = _read_lines(src_path), _read_lines(tgt_path)
    for path, lines in ((src_path, src), (tgt_path, tgt)):
        if not lines:
            raise InputError(str(path), "empty file: expected one sentence per line")
    if len(src) != len(tgt):
        raise InputError(str(src_path), f"has {len(src)} lines but {tgt_path} has {len(tgt)} lines; "
                         "line-aligned files must have the same number of lines")
    return src, tgt


def read_bucc_sentences(path: str | Path) -> tuple[list[str], list[str]]:
    """(ids, sentences) from a BUCC `id\\tsentence` file (`de-000001\\tSatz.`); ids must be unique."""
    lines = _read_lines(path)
    if not lines:
        raise InputError(str(path), "empty file: expected id<TAB>sentence lines")
    ids: list[str] = []
    sentences: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        sid, sentence = _fields(path, line, lineno, "fields (id, sentence)")
        if sid in seen:
            raise InputError(str(path), f"duplicate id {sid!r} (first on line {seen[sid]})", line=lineno)
        seen[sid] = lineno
        ids.append(sid)
        sentences.append(sentence)
    return ids, sentences


def read_gold_alignment(path: str | Path, src_ids: Sequence[str], tgt_ids: Sequence[str]) -> set[tuple[int, int]]:
    """Gold pairs as (source row, target row) indices into `src_ids` / `tgt_ids`, from a BUCC gold file holding
    `src_id\\ttgt_id` per line (`de-000081\\ten-000123`). An empty file gives an empty set (F1 then undefined)."""
    src_pos = {sid: i for i, sid in enumerate(src_ids)}
    tgt_pos = {tid: i for i, tid in enumerate(tgt_ids)}
    gold: set[tuple[int, int]] = set()
    for lineno, line in enumerate(_read_lines(path), start=1):
        sid, tid = _fields(path, line, lineno, "ids (source, target)")
        if sid not in src_pos:
            raise InputError(str(path), f"unknown source id {sid!r}", line=lineno)
        if tid not in tgt_pos:
            raise InputError(str(path), f"unknown target id {tid!r}", line=lineno)
        gold.add((src_pos[sid], tgt_pos[tid]))
    return gold
