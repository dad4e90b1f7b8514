"""Golden outputs of the `ud` parser: every sentence of each corpus below parses to the PENMAN text (or the failure
reason) it parsed to when `tests/data/ud_golden.json` was generated.

The file was generated once, from the parser as it stood before its rules were split into handlers and its
lexicons moved to data files; it holds, per corpus, the SHA-256 of the sentence list (so a changed input is told
apart from a changed parser) and the first 12 hex digits of the SHA-256 of each output. Regenerate it
(`PYTHONPATH=. python -m tests.amr.test_ud_golden --write`) only when a rule change is meant to change outputs, and
say which outputs in the commit.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import ROOT, SHARED_DATA, TEST_DATA

GOLDEN = TEST_DATA / "ud_golden.json"
SAMPLE = ROOT / "amrsim" / "sample" / "sts_pairs.tsv"
FRENCH_STSB_LIMIT = 600  # sentences: enough to reach every French rule, cheap enough for every run


def _tsv_columns(path: Path, columns: tuple[str, ...]) -> list[str]:
    """The distinct non-empty values of the given columns, in order of first appearance (row by row)."""
    seen: dict[str, None] = {}
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            for col in columns:
                text = (row.get(col) or "").strip()
                if text:
                    seen.setdefault(text)
    return list(seen)


def _little_prince() -> list[str]:
    path = SHARED_DATA / "amr_little_prince" / "little_prince_v3.0.jsonl"
    with path.open(encoding="utf-8") as f:
        return [json.loads(line)["snt"] for line in f if line.strip()]


# corpus name -> (language, file it needs, sentence loader)
CORPORA: dict[str, tuple[str, Path, Callable[[], list[str]]]] = {
    "sample_en": ("en", SAMPLE, lambda: _tsv_columns(SAMPLE, ("sentence1", "sentence2"))),
    "sample_fr": ("fr", SAMPLE, lambda: _tsv_columns(SAMPLE, ("sentence1_fr", "sentence2_fr"))),
    "little_prince": ("en", SHARED_DATA / "amr_little_prince" / "little_prince_v3.0.jsonl", _little_prince),
    "stsb_en_dev": ("en", SHARED_DATA / "stsb_en" / "stsb_en_dev.tsv",
                    lambda: _tsv_columns(SHARED_DATA / "stsb_en" / "stsb_en_dev.tsv", ("sentence1", "sentence2"))),
    "stsb_fr_dev": ("fr", SHARED_DATA / "stsb_multi_mt" / "stsb_fr_dev.tsv",
                    lambda: _tsv_columns(SHARED_DATA / "stsb_multi_mt" / "stsb_fr_dev.tsv",
                                         ("sentence1", "sentence2"))[:FRENCH_STSB_LIMIT]),
}


def sentences_digest(sentences: list[str]) -> str:
    return hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()


def output_digest(result) -> str:
    text = result.penman if result.status == "ok" else f"failed: {result.error}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


_parsers: dict[str, object] = {}


def parser(lang: str):
    from amrsim.amr.ud import UDParser

    if lang not in _parsers:
        _parsers[lang] = UDParser(lang)
    return _parsers[lang]


def corpus_outputs(name: str) -> tuple[str, list[str]]:
    lang, _, load = CORPORA[name]
    sentences = load()
    return sentences_digest(sentences), [output_digest(r) for r in parser(lang).parse(sentences)]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("name", list(CORPORA))
def test_ud_outputs_match_golden_hashes(name):
    pytest.importorskip("spacy")
    lang, needs, _ = CORPORA[name]
    if not needs.exists():
        pytest.skip(f"{needs} is absent (../shared/data ships with the project's machines, not with a clone)")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))[name]
    try:
        digest, outputs = corpus_outputs(name)
    except OSError as e:  # the spaCy model package is not installed
        pytest.skip(f"spaCy {lang} model missing: {e}")
    assert digest == golden["sentences_sha256"], f"{name}: the input sentences changed, not the parser"
    assert len(outputs) == len(golden["outputs"])
    changed = [i for i, (got, want) in enumerate(zip(outputs, golden["outputs"], strict=True)) if got != want]
    sentences = CORPORA[name][2]()
    assert not changed, (f"{name}: {len(changed)} of {len(outputs)} outputs changed, first at #{changed[0]}: "
                         f"{sentences[changed[0]]!r} -> {parser(lang).parse([sentences[changed[0]]])[0]}")


def _write() -> None:
    golden = {}
    for name in CORPORA:
        digest, outputs = corpus_outputs(name)
        golden[name] = {"sentences_sha256": digest, "count": len(outputs), "outputs": outputs}
        print(f"{name}: {len(outputs)} sentences", file=sys.stderr)
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(golden, indent=0) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.amr.test_ud_golden --write  (regenerates tests/data/ud_golden.json)")
    _write()
