"""Issue 51, hostile input to ingest: language tags that name no language, sentences of only invisible characters
and CSV files that escape quotes with a backslash fail with a reason naming what is wrong; failed rows are kept
(never stored as ok) and named in one warning line per dataset; the other rows are read as usual."""

from __future__ import annotations

import polars as pl
import pytest

from amrsim.config import DatasetConfig
from amrsim.errors import InputError
from amrsim.ingest import read_dataset
from amrsim.stages.ingest import ingest_tables
from amrsim.text import blank, empty_reason

LANG_COLUMNS = ["id", "sentence1", "sentence2", "score", "lang1", "lang2"]


def _pairs(path, **kw) -> DatasetConfig:
    return DatasetConfig(path=str(path), kind="pairs", columns={"id": "id", "lang1": "lang1", "lang2": "lang2"}, **kw)


@pytest.mark.parametrize("code, meaning", [("und", "undetermined"), ("zxx", "no linguistic content"),
                                           ("mul", "multiple languages"), ("mis", "uncoded languages"),
                                           ("und-Latn", "undetermined"), ("qaa", "private use")])
def test_a_tag_that_names_no_language_fails_its_row_saying_what_it_means(write_tsv, code, meaning):
    path = write_tsv("langs.tsv", LANG_COLUMNS, [["a", "A dog runs.", "Ein Hund rennt.", "4.5", "en", "de"],
                                                 ["b", "A cat sleeps.", "Eine Katze.", "4.0", "en", code],
                                                 ["c", "A bird sings.", "Ein Vogel singt.", "4.2", "en", "de"]])
    pairs = read_dataset(_pairs(path), path)["pairs"].sort("source_line")
    assert pairs["status"].to_list() == ["ok", "failed", "ok"]
    assert pairs["error"][1] == (f"language code '{code}' ({meaning}) names no language; give the text's language "
                                 "(an ISO 639 code such as en, de, es, zh)")
    assert "unknown language code" not in pairs["error"][1]


def test_a_pipeline_language_that_names_no_language_is_refused_saying_so():
    with pytest.raises(ValueError, match=r"language code 'und' \(undetermined\) names no language"):
        DatasetConfig(path="x.tsv", kind="pairs", lang="und")


def test_ingest_warns_once_per_dataset_with_the_count_and_the_first_reason(write_tsv, wh):
    path = write_tsv("langs.tsv", LANG_COLUMNS, [["a", "A dog runs.", "Ein Hund rennt.", "4.5", "en", "de"],
                                                 ["b", "A cat sleeps.", "Eine Katze.", "4.0", "en", "zxx"],
                                                 ["c", "A bird sings.", "\u200b", "4.2", "en", "de"],
                                                 ["d", "A fish swims.", "Ein Fisch.", "4.1", "en", "de"]])
    run = ingest_tables(wh, "d", _pairs(path), path, "r1")
    assert (run.rows_in, run.rows_failed) == (4, 2)
    assert run.notes == [f"warning: dataset 'd': 2 of 4 rows failed (kept with status 'failed'); the first: "
                         f"{path}:3: language code 'zxx' (no linguistic content) names no language; give the text's "
                         f"language (an ISO 639 code such as en, de, es, zh)"]
    assert run.summary()["notes"] == run.notes and run.summary()["failed"] == 2
    stored = wh.read("d", "pairs").sort("source_line")
    assert stored["status"].to_list() == ["ok", "failed", "failed", "ok"]  # kept, never dropped
    clean = write_tsv("clean.tsv", LANG_COLUMNS, [["a", "A dog runs.", "Ein Hund rennt.", "4.5", "en", "de"]])
    assert "notes" not in ingest_tables(wh, "e", _pairs(clean), clean, "r2").summary()


@pytest.mark.parametrize("text", ["\u200b", "\u200c\u200d", "\u2060", "\ufeff", " \u200b \u00ad ", "\u180e",
                                  "\u3164", "\u200b\x07"])
def test_a_sentence_of_only_invisible_characters_fails_like_an_empty_one(write_tsv, text):
    path = write_tsv("zw.tsv", LANG_COLUMNS, [["a", "A dog runs.", "A dog is running.", "4.5", "en", "en"],
                                              ["b", text, "A cat sleeps.", "4.0", "en", "en"],
                                              ["c", "A w\u200bord.", "Soft\u00adhyphen.", "3.0", "en", "en"]])
    tables = read_dataset(_pairs(path), path)
    pairs = tables["pairs"].sort("source_line")
    assert pairs["status"].to_list() == ["ok", "failed", "ok"]  # visible text with a zero-width character stays ok
    assert pairs["error"][1] == "empty sentence1 (only invisible characters)"
    assert text.strip() not in tables["sentences"]["text"].to_list()


def test_an_invisible_translation_fails_its_variant_and_gives_no_parallel_row(write_tsv):
    path = write_tsv("t.tsv", ["id", "score", "sentence1", "sentence2", "s1_de", "s2_de"], [
        ["x", "5", "The dog runs.", "A dog is running.", "Der Hund rennt.", "Ein Hund rennt."],
        ["y", "1", "I eat.", "It rains.", "Ich esse.", "\u200b\u2060"]])
    ds = DatasetConfig(path=str(path), kind="pairs", columns={"id": "id"},
                       translations={"de": {"sentence1": "s1_de", "sentence2": "s2_de"}})
    tables = read_dataset(ds, path)
    failed = tables["pairs"].filter(pl.col("status") == "failed")
    assert failed["error"].to_list() == ["empty sentence2 (de, only invisible characters)"]
    assert "It rains." not in tables["parallel"]["source"].to_list()
    assert tables["pairs"].filter(pl.col("status") == "ok").height == 3


def test_from_pairs_fails_an_invisible_premise_and_never_takes_one_for_a_negative(write_tsv):
    path = write_tsv("nli.tsv", ["id", "sentence_A", "sentence_B", "label"], [
        ["1", "A man sleeps.", "A person rests.", "ENTAILMENT"],
        ["2", "\u200b", "A man runs.", "ENTAILMENT"],
        ["3", "A man sleeps.", "\ufeff", "CONTRADICTION"]])
    ds = DatasetConfig(path=str(path), kind="triples", columns={"id": "id"},
                       from_pairs={"sentence1": "sentence_A", "sentence2": "sentence_B", "label": "label",
                                   "fallback": "skip"})
    triples = read_dataset(ds, path)["triples"].sort("source_line")
    assert triples["status"].to_list() == ["failed", "failed"]
    # the one contradiction of line 2's premise is invisible: no triple is made of it
    assert triples["error"].to_list() == ["no contradiction for the premise in the file (from_pairs.fallback: skip)",
                                          "empty premise (sentence_A, only invisible characters)"]


def test_blank_tells_empty_from_invisible_and_reads_visible_text():
    assert blank(None) == blank("") == blank(" \t\n") == "empty"
    assert blank("\u200b") == blank("\ufeff \u2060") == "only invisible characters"
    assert blank("a\u200b") is None and blank("\u200bé") is None
    assert empty_reason("x", "sentence1") is None
    assert empty_reason("", "sentence1", "de") == "empty sentence1 (de)"


# ------------------------------------------------------------------------------------------- backslash-escaped CSV

CSV_HEADER = "id,sentence1,sentence2,score\n"


@pytest.mark.parametrize("row", [
    '3,"He said \\"hi\\" to me.",A greeting.,3.5\n',  # the rest of the field garbled into one field
    '3,"He said \\"hi, you\\" to me.",A greeting.,3.5\n',  # a comma inside: one field too many
    '3,"\\"Stop\\"",Halt.,3.5\n',  # the field is only a quoted word
    '3,"5\'10\\"",Tall.,3.5\n',  # a quote at the end of the field: RFC 4180 would run on past the line
])
def test_a_csv_with_backslash_escaped_quotes_is_refused_at_its_line(tmp_path, wh, row):
    path = tmp_path / "sts.csv"
    path.write_text(CSV_HEADER + '1,"A man, smiling, plays.",A man plays.,4.0\n2,A cat.,A cat sleeps.,3.0\n'
                    + row + "4,Dogs bark.,A dog barks.,4.5\n", encoding="utf-8")
    ds = DatasetConfig(path=str(path), kind="pairs", columns={"id": "id"})
    with pytest.raises(InputError) as e:
        ingest_tables(wh, "d", ds, path, "r1")
    assert str(e.value) == (f'{path}:4: backslash-escaped quote (\\") in a quoted field: CSV escapes a quote by '
                            f'doubling it (""); write the file with doubled quotes (or as TSV or JSONL)')
    assert not wh.exists("d", "pairs")  # nothing written, nothing stored as ok


def test_rfc_4180_quotes_and_backslashes_are_read_as_written(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text(CSV_HEADER + '1,"He said ""hi"" to me.",A greeting.,3.5\n'
                                 '2,"C:\\dir\\",A path.,1.0\n'
                                 '3,"a \\""b",He said \\"hi\\".,2.0\n', encoding="utf-8")
    pairs = read_dataset(DatasetConfig(path=str(path), kind="pairs", columns={"id": "id"}), path)["pairs"]
    pairs = pairs.sort("source_line")
    assert pairs["status"].to_list() == ["ok"] * 3
    assert pairs["sentence1"].to_list() == ['He said "hi" to me.', "C:\\dir\\", 'a \\"b']
    assert pairs["sentence2"][2] == 'He said \\"hi\\".'  # unquoted: a backslash and a quote are two characters


def test_a_rows_language_that_names_none_is_its_reason_once(write_tsv):
    """A `lang` cell applies to both sentences: its reason is given once, not once per sentence."""
    path = write_tsv("lang.tsv", ["sentence1", "sentence2", "score", "lang"],
                     [["A man plays.", "A man is playing.", "4.5", "und"], ["A dog.", "A cat.", "1.0", "en"]])
    ds = DatasetConfig(path=str(path), kind="pairs", columns={"lang": "lang"})
    pairs = read_dataset(ds, path)["pairs"].sort("source_line")
    assert pairs["status"].to_list() == ["failed", "ok"]
    assert pairs["error"][0] == ("language code 'und' (undetermined) names no language; give the text's language "
                                 "(an ISO 639 code such as en, de, es, zh)")
