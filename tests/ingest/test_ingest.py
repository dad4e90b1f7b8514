"""Ingest: every format, the column mapping, translations, failed rows with reasons, and file-level errors."""

from __future__ import annotations

import gzip
import json
import logging
import sys

import polars as pl
import pytest

from amrsim.config import DatasetConfig
from amrsim.errors import InputError
from amrsim.ingest import read_dataset
from amrsim.langs import normalise_lang
from amrsim.stages.ingest import ingest_tables

HEADER = ["id", "score", "sentence1", "sentence2"]
ROWS = [["a", "4.5", "A man plays a guitar.", "A man is playing the guitar."],
        ["b", "0.5", "A cat sleeps.", "The stock market fell."]]


def pairs_cfg(path, **kw) -> DatasetConfig:
    return DatasetConfig(path=str(path), kind="pairs", columns={"id": "id"}, **kw)


def ok_rows(tables, table="pairs") -> pl.DataFrame:
    return tables[table].filter(pl.col("status") == "ok")


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl", "jsonl.gz", "parquet"])
def test_every_format_gives_the_same_tables(tmp_path, fmt):
    path = tmp_path / f"pairs.{fmt}"
    records = [dict(zip(HEADER, r, strict=True)) for r in ROWS]
    if fmt == "tsv":
        path.write_text("\n".join("\t".join(r) for r in [HEADER, *ROWS]), encoding="utf-8")
    elif fmt == "csv":  # a comma inside a quoted field must survive
        records[0]["sentence1"] = "A man, smiling, plays a guitar."
        pl.DataFrame(records).write_csv(path)
    elif fmt.startswith("jsonl"):
        records[1]["score"] = 0.5  # numbers as JSON numbers
        text = "\n".join(json.dumps(r) for r in records) + "\n"
        path.write_bytes(gzip.compress(text.encode()) if fmt.endswith("gz") else text.encode())
    else:
        pl.DataFrame(records).with_columns(pl.col("score").cast(pl.Float64)).write_parquet(path)
    tables = read_dataset(pairs_cfg(path), path)
    pairs = ok_rows(tables)
    assert pairs.height == 2 and pairs["score"].to_list() == [4.5, 0.5]
    assert set(pairs["item_id"]) == {"a", "b"}
    assert tables["sentences"].height == 4
    assert pairs["sentence1"][0] == records[0]["sentence1"]


def test_shared_style_tsv_with_quotes_in_text_is_read_verbatim(write_tsv):
    # ../shared/data files are written with no quoting: a '"' is just a character
    path = write_tsv("q.tsv", HEADER, [["a", "3", '"Hello," she said.', 'She said "hello".']])
    pairs = ok_rows(read_dataset(pairs_cfg(path), path))
    assert pairs["sentence1"][0] == '"Hello," she said.'


def test_bad_rows_are_kept_as_failed_with_reasons(write_tsv):
    path = write_tsv("bad.tsv", ["id", "score", "lang", "sentence1", "sentence2"], [
        ["r1", "3.0", "en", "Fine sentence.", "Another fine one."],
        ["r2", "2.0", "en", "   ", "Text."],
        ["r3", "", "en", "No score.", "Here."],
        ["r4", "high", "en", "Bad score.", "Here."],
        ["r5", "1.0", "xx-bogus-1", "Bad lang.", "Here."],
        ["r1", "1.0", "en", "Same id again.", "Here."],
        ["r7", "9.0", "en", "Out of range.", "Here."],
    ])
    ds = DatasetConfig(path=str(path), kind="pairs", columns={"id": "id", "lang": "lang"}, score_range=(0, 5))
    pairs = read_dataset(ds, path)["pairs"]
    reasons = dict(zip(pairs["source_line"].to_list(), pairs["error"].to_list(), strict=True))
    assert pairs.height == 7, "no row may be dropped"
    assert reasons[2] is None
    assert reasons[3] == "empty sentence1"
    assert reasons[4] == "missing score"
    assert reasons[5] == "non-numeric score 'high'"
    assert "unknown language code 'xx-bogus-1'" in reasons[6]
    assert reasons[7] == "duplicate id 'r1' (first at line 2)"
    assert reasons[8] == "score 9.0 outside [0.0, 5.0]"
    assert pairs.filter(pl.col("status") == "failed").height == 6


def test_translations_give_pairs_per_language_and_parallel_rows(write_tsv):
    path = write_tsv("t.tsv", ["id", "score", "sentence1", "sentence2", "s1_de", "s2_de"], [
        ["x", "5", "The dog runs.", "A dog is running.", "Der Hund rennt.", "Ein Hund rennt."],
        ["y", "1", "I eat.", "It rains.", "Ich esse.", ""],
    ])
    ds = DatasetConfig(path=str(path), kind="pairs", columns={"id": "id"},
                       translations={"de": {"sentence1": "s1_de", "sentence2": "s2_de"}})
    tables = read_dataset(ds, path)
    pairs = tables["pairs"]
    assert sorted(ok_rows(tables)["lang1"].to_list()) == ["de", "en", "en"]
    failed = pairs.filter(pl.col("status") == "failed")
    assert failed["error"].to_list() == ["empty sentence2 (de)"]
    parallel = tables["parallel"]
    assert set(zip(parallel["source"], parallel["target"], strict=True)) == {
        ("The dog runs.", "Der Hund rennt."), ("A dog is running.", "Ein Hund rennt."), ("I eat.", "Ich esse.")}
    assert set(parallel["target_lang"]) == {"de"}



def test_row_aligned_translation_files_build_language_pairs(write_tsv, wh):
    # stsb_multi_mt style: one file per language, same rows in the same order, same header
    en = write_tsv("sts_en.tsv", ["sentence1", "sentence2", "score"], [
        ["The dog runs.", "A dog is running.", "5"], ["I eat.", "It rains.", "1"], ["A cat.", "A cat.", "5"]])
    de = write_tsv("sts_de.tsv", ["sentence1", "sentence2", "score"], [
        ["Der Hund rennt.", "Ein Hund rennt.", "5"], ["Ich esse.", "Es regnet.", "1"], ["Eine Katze.", "", "5"]])
    ds = DatasetConfig(path=str(en), kind="pairs", translations={"de": {"path": str(de)}})
    tables = read_dataset(ds, en)
    pairs = tables["pairs"]
    de_ok = pairs.filter((pl.col("lang1") == "de") & (pl.col("status") == "ok")).sort("item_id")
    assert de_ok["sentence2"].to_list() == ["Ein Hund rennt.", "Es regnet."]
    assert de_ok["score"].to_list() == [5.0, 1.0]  # scores come from the main file's row
    assert pairs.filter(pl.col("status") == "failed")["error"].to_list() == ["empty sentence2 (de)"]
    # en-de is built by item id from row-aligned rows (the STS evaluator's cross-lingual construction)
    from amrsim.stages.evaluate.sts import select_pairs

    wh.sync("d", "pairs", pairs)
    wh.sync("d", "sentences", tables["sentences"])
    cross = select_pairs(wh.read("d", "pairs"), None, "en-de").sort("item_id")
    assert cross.height == 2
    sent = dict(zip(tables["sentences"]["key"], tables["sentences"]["text"], strict=True))
    assert [(sent[a], sent[b]) for a, b in zip(cross["sentence1_key"], cross["sentence2_key"], strict=True)] == [
        ("The dog runs.", "Ein Hund rennt."), ("I eat.", "Es regnet.")]


def test_row_aligned_translation_file_with_another_row_count_names_both_files(write_tsv, tmp_path):
    en = write_tsv("a_en.tsv", ["s1", "s2", "score"], [["a", "b", "1"], ["c", "d", "2"]])
    write_tsv("a_de.tsv", ["x1", "x2"], [["a", "b"]])
    ds = DatasetConfig(path=str(en), kind="pairs", columns={"sentence1": "s1", "sentence2": "s2"},
                       translations={"de": {"path": "a_de.tsv", "sentence1": "x1", "sentence2": "x2"}})
    with pytest.raises(InputError, match=r"a_de\.tsv: translations\.de\.path has 1 rows but .*a_en\.tsv has 2"):
        read_dataset(ds, en, resolve=lambda p: tmp_path / p)
    with pytest.raises(ValueError, match="format needs translations.de.path"):
        DatasetConfig(path=str(en), kind="pairs", translations={"de": {"format": "tsv"}})

def test_triples_and_parallel_kinds(write_tsv):
    path = write_tsv("nli.tsv", ["premise", "entailment", "contradiction"], [
        ["A man sleeps.", "A person rests.", "A man runs."]])
    triples = read_dataset(DatasetConfig(path=str(path), kind="triples"), path)["triples"]
    assert triples["status"].to_list() == ["ok"] and triples["item_id"].to_list() == ["L2"]
    path = write_tsv("tatoeba.tsv", ["deu", "eng"], [["Ich bin hier.", "I am here."]])
    ds = DatasetConfig(path=str(path), kind="parallel", lang="deu", target_lang="eng",
                       columns={"source": "deu", "target": "eng"})
    parallel = read_dataset(ds, path)["parallel"]
    assert parallel.select("source_lang", "target_lang").row(0) == ("de", "en")


def test_language_codes_are_normalised():
    assert normalise_lang("deu") == "de" and normalise_lang("en_US") == "en-US" and normalise_lang("cmn") == "zh"
    assert normalise_lang("not a code") is None and normalise_lang("") is None


def test_region_tagged_row_languages_are_read_as_the_language_noted_once(write_tsv, caplog):
    # a `lang2` column of region tags: the rows are German (stored as 'de', so they meet the 'en-de' pairs of every
    # other file), and the first row of each spelling is noted; a code that is no language fails its row
    path = write_tsv("tagged.tsv", ["sentence1", "sentence2", "score", "lang1", "lang2"], [
        ["A dog runs.", "Ein Hund rennt.", "4.5", "en", "de-DE"],
        ["A cat sleeps.", "Eine Katze schläft.", "4.0", "en-GB", "de_DE"],
        ["A bird sings.", "Ein Vogel singt.", "4.2", "en", "de-DE"],
        ["A fish swims.", "Ein Fisch schwimmt.", "4.1", "en", "klingon"],
    ])
    ds = DatasetConfig(path=str(path), kind="pairs", columns={"lang1": "lang1", "lang2": "lang2"})
    with caplog.at_level(logging.WARNING, logger="amrsim.ingest.normalise"):
        pairs = read_dataset(ds, path)["pairs"].sort("source_line")
    assert pairs["status"].to_list() == ["ok", "ok", "ok", "failed"]
    assert pairs.select("lang1", "lang2").rows()[:3] == [("en", "de")] * 3
    assert pairs["error"][3] == "unknown language code 'klingon'"
    assert [r.getMessage() for r in caplog.records] == [
        f"{path.name}:2: language 'de-DE' read as 'de' (region and script are not used)",
        f"{path.name}:3: language 'en-GB' read as 'en' (region and script are not used)",
        f"{path.name}:3: language 'de_DE' read as 'de' (region and script are not used)"]


@pytest.mark.parametrize("content, line, message", [
    (b"", None, "empty file"),
    (b"  \n\n", None, "empty file"),
    (b"id\tscore\tsentence1\tsentence2\n", 1, "header but no data rows"),
    (b"id\tscore\tsentence_one\tsentence2\na\t1\tx\ty\n", 1, "header lacks column(s) ['sentence1']"),
    (b"id\tscore\tsentence1\tsentence2\na\t1\tx\ty\nb\t2\tbroken\tfield\there\n", 3, "expected 4 fields"),
    (b"id\tscore\tsentence1\tsentence2\na\t1\tx\ty\nb\t2\tcaf\xe9\ty\n", 3, "not valid UTF-8"),
])
def test_structurally_bad_files_raise_naming_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "bad.tsv"
    path.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_dataset(pairs_cfg(path), path)
    where = f"{path}:{line}:" if line else f"{path}:"
    assert str(e.value).startswith(where), str(e.value)
    assert message in str(e.value)


def test_bad_json_line_and_missing_key(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(InputError, match=rf"{path}:2: invalid JSON"):
        read_dataset(DatasetConfig(path=str(path), kind="pairs"), path)
    path.write_text('{"sentence1": "a", "sentence2": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"no record has key\(s\) \['score'\]"):
        read_dataset(DatasetConfig(path=str(path), kind="pairs"), path)


def test_bad_file_writes_nothing(wh, write_tsv, tmp_path):
    good = write_tsv("good.tsv", HEADER, ROWS)
    ingest_tables(wh, "d", pairs_cfg(good), good, "run1")
    versions = {t: wh.version("d", t) for t in ("pairs", "sentences")}
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"id\tscore\tsentence1\tsentence2\na\t1\tx\ty\nb\t2\tbroken\n")
    with pytest.raises(InputError):
        ingest_tables(wh, "d", pairs_cfg(bad), bad, "run2")
    assert {t: wh.version("d", t) for t in ("pairs", "sentences")} == versions
    assert wh.read("d", "pairs").height == 2
    lineage = wh.read("meta", "lineage")
    assert lineage.filter(pl.col("run_id") == "run2")["status"].to_list() == ["error"]


def test_reingest_is_incremental(wh, write_tsv):
    path = write_tsv("p.tsv", HEADER, ROWS)
    first = ingest_tables(wh, "d", pairs_cfg(path), path, "r1")
    assert first.rows_computed == 2
    version = wh.version("d", "pairs")
    again = ingest_tables(wh, "d", pairs_cfg(path), path, "r2")
    assert again.rows_computed == 0 and wh.version("d", "pairs") == version
    path = write_tsv("p.tsv", HEADER, [*ROWS, ["c", "2.0", "New pair.", "Fresh pair."]])
    changed = ingest_tables(wh, "d", pairs_cfg(path), path, "r3")
    assert changed.rows_computed == 1 and wh.version("d", "pairs") == version + 1
    path = write_tsv("p.tsv", HEADER, ROWS[:1])  # a row removed from the source disappears from the table
    ingest_tables(wh, "d", pairs_cfg(path), path, "r4")
    assert wh.read("d", "pairs")["item_id"].to_list() == ["a"]


def test_hugging_face_source_without_the_extra_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` fails as without the extra (mteb has it)
    ds = DatasetConfig(path="hf:mteb/stsbenchmark-sts", kind="pairs", hf_split="test")
    with pytest.raises(InputError, match=r"hf:mteb/stsbenchmark-sts: .*pip install 'amrsim\[hf\]'"):
        read_dataset(ds, ds.path)


def test_status_counts(wh, write_tsv):
    path = write_tsv("p.tsv", HEADER, [*ROWS, ["c", "x", "Bad.", "Score."]])
    ingest_tables(wh, "d", pairs_cfg(path), path, "r1")
    assert wh.count("d", "pairs") == 3 and wh.count("d", "pairs", status="failed") == 1
    assert wh.count("d", "nothing") == 0


# -- chunked ingest: a file read a few rows at a time gives the tables an in-memory read gives ------------------------

CHUNK_HEADER = ["id", "score", "sentence1", "sentence2", "amr1", "amr2", "de1"]


def chunk_rows_fixture() -> list[list[str]]:
    """Rows that cross chunk boundaries of 3: an id repeated 4 lines later, a sentence repeated in every chunk, a
    sentence given two different graphs (it keeps both), failed rows, translations into German."""
    rows = []
    for i in range(11):
        rows.append([f"p{i}", f"{i % 5}.0", f"Sentence {i}.", "The same sentence.", f"(s{i} / say-01)",
                     "(x / same)", f"Satz {i}."])
    rows[5][0] = "p1"  # repeats the id of line 3 (two chunks earlier)
    rows[7][1] = "high"  # bad score
    rows[8][2] = "Sentence 0."  # repeats a sentence of the first chunk with another graph
    rows[8][4] = "(z / other)"
    rows[9][3] = ""  # empty sentence
    return rows


def tables_of(wh, dataset):
    out = {}
    for table in ("pairs", "sentences", "amr", "parallel"):
        out[table] = wh.read(dataset, table).sort("key")
    return out


def test_chunked_ingest_equals_a_whole_file_read(wh, write_tsv):
    rows = chunk_rows_fixture()
    path = write_tsv("p.tsv", CHUNK_HEADER, rows)
    ds = pairs_cfg(path, translations={"de": {"sentence1": "de1"}})
    ds = ds.model_copy(update={"columns": {"id": "id", "amr1": "amr1", "amr2": "amr2"}})
    whole = ingest_tables(wh, "whole", ds, path, "r1", chunk_rows=1000)
    chunked = ingest_tables(wh, "chunked", ds, path, "r1", chunk_rows=3)
    expected = read_dataset(ds, path)  # the in-memory normaliser, one piece
    for name, table in tables_of(wh, "chunked").items():
        assert table.equals(tables_of(wh, "whole")[name]), name
        assert table.drop("status", "error").equals(expected[name].sort("key").drop("status", "error")), name
    pairs = tables_of(wh, "chunked")["pairs"]
    failed = dict(pairs.filter(pl.col("status") == "failed").select("source_line", "error").iter_rows())
    assert failed[7].startswith("duplicate id 'p1' (first at line 3)")
    assert "non-numeric score 'high'" in failed[9] and failed[11] == "empty sentence2"
    assert (chunked.rows_in, chunked.rows_failed, chunked.rows_computed) == (whole.rows_in, whole.rows_failed,
                                                                               whole.rows_computed)
    graphs = tables_of(wh, "chunked")["amr"].join(tables_of(wh, "chunked")["sentences"],
                                                 left_on="sentence_key", right_on="key")
    assert sorted(graphs.filter(pl.col("text") == "Sentence 0.")["penman"].to_list()) == ["(s0 / say-01)",
                                                                                         "(z / other)"]
    own = pairs.filter(pl.col("sentence1") == "Sentence 0.").join(
        tables_of(wh, "chunked")["amr"], left_on="amr1_key", right_on="key").sort("source_line")
    assert own["penman"].to_list() == ["(s0 / say-01)", "(z / other)"]  # each row names the graph it gave
    assert graphs.filter(pl.col("text") == "The same sentence.").height == 1  # one row per distinct graph
    assert sorted(p.name for p in wh.root.iterdir()) == [".locks", "chunked", "meta", "whole"]  # the stage is gone


def test_chunked_reingest_appends_new_rows_and_deletes_vanished_ones(wh, write_tsv):
    rows = chunk_rows_fixture()
    path = write_tsv("p.tsv", CHUNK_HEADER, rows)
    ds = pairs_cfg(path).model_copy(update={"columns": {"id": "id", "amr1": "amr1", "amr2": "amr2"}})
    ingest_tables(wh, "d", ds, path, "r1", chunk_rows=4)
    version = wh.version("d", "pairs")
    grown = write_tsv("p.tsv", CHUNK_HEADER, [*rows, ["p99", "1.0", "New one.", "Newer one.", "(n / new)", "(m / x)",
                                                      "Neu."]])
    run = ingest_tables(wh, "d", ds, grown, "r2", chunk_rows=4)
    assert run.rows_computed == 1 and wh.version("d", "pairs") == version + 1
    assert "History" not in wh.read("d", "pairs").columns
    shrunk = write_tsv("p.tsv", CHUNK_HEADER, [r for r in rows if r[0] != "p2"])
    ingest_tables(wh, "d", ds, shrunk, "r3", chunk_rows=4)
    fresh = ingest_tables(wh, "fresh", ds, shrunk, "r3", chunk_rows=1000)
    assert fresh.rows_in == wh.count("d", "pairs")
    for name, table in tables_of(wh, "d").items():  # merge deleted p2's rows and New one's, nothing else
        # a kept row keeps the line it was first read from (its key has no line): compare all but that
        kept = [c for c in table.columns if c != "source_line"]
        assert table.select(kept).equals(tables_of(wh, "fresh")[name].select(kept)), name
    assert "p2" not in wh.read("d", "pairs")["item_id"].to_list()


def test_a_bad_line_after_several_chunks_commits_nothing(wh, write_tsv, tmp_path):
    rows = chunk_rows_fixture()
    path = write_tsv("p.tsv", CHUNK_HEADER, rows)
    ds = pairs_cfg(path)
    ingest_tables(wh, "d", ds, path, "r1", chunk_rows=2)
    versions = {t: wh.version("d", t) for t in ("pairs", "sentences")}
    bad = tmp_path / "bad.tsv"
    bad.write_text(path.read_text(encoding="utf-8") + "p50\t1.0\ttoo few\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"{bad}:13: expected 7 fields"):
        ingest_tables(wh, "d", ds, bad, "r2", chunk_rows=2)
    assert {t: wh.version("d", t) for t in ("pairs", "sentences")} == versions
    assert sorted(p.name for p in wh.root.iterdir()) == [".locks", "d", "meta"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_every_format_reads_the_same_in_chunks(tmp_path, fmt):
    from amrsim.ingest.readers import iter_rows, read_rows

    records = [{"id": f"r{i}", "text": f"line {i}, with a comma\nand a newline" if i == 3 else f"t{i}"}
               for i in range(7)]
    path = tmp_path / f"f.{fmt}"
    frame = pl.DataFrame(records)
    if fmt == "csv":
        frame.write_csv(path)
    elif fmt == "jsonl":
        frame.write_ndjson(path)
    else:
        frame.write_parquet(path)
    chunks = list(iter_rows(path, fmt, ["text", "id"], chunk_rows=2))
    assert [c.height for c in chunks] == [2, 2, 2, 1]
    whole = read_rows(path, fmt, ["text", "id"])
    assert pl.concat(chunks).equals(whole) and whole["text"].to_list() == frame["text"].to_list()
    if fmt == "csv":  # a record spanning two lines is numbered by the line it ends on, as the csv module counts
        assert whole["__line"].to_list() == [2, 3, 4, 6, 7, 8, 9]


def test_tsv_in_chunks_names_a_bad_byte_and_a_blank_line_inside_the_file(tmp_path):
    from amrsim.ingest.readers import iter_rows

    path = tmp_path / "f.tsv"
    path.write_bytes(b"id\ttext\n" + b"".join(b"r%d\tt%d\n" % (i, i) for i in range(5)) + b"r5\tcaf\xe9\n")
    with pytest.raises(InputError, match=rf"{path}:7: not valid UTF-8 \(byte 0xe9\)"):
        list(iter_rows(path, "tsv", ["id", "text"], chunk_rows=2))
    path.write_bytes(b"id\ttext\nr0\tt0\n\nr1\tt1\n\n\n")  # a blank line between rows is a record; trailing ones not
    with pytest.raises(InputError, match=rf"{path}:3: expected 2 fields"):
        list(iter_rows(path, "tsv", ["id", "text"], chunk_rows=1))
    path.write_bytes(b"id\ttext\nr0\tt0\nr1\tt1\n\n\n")
    assert [c.height for c in iter_rows(path, "tsv", ["id", "text"], chunk_rows=1)] == [1, 1]


# -- append-only refresh: a file that only grew is read from where the last ingest stopped ----------------------------

def lineage_inputs(wh, run_id):
    rows = wh.read("meta", "lineage").filter(pl.col("run_id") == run_id)
    return json.loads(rows["input_versions"][0])


def appended_rows() -> list[list[str]]:
    return [["p3", "1.0", "Again p3.", "An id from the first part.", "(a / again)", "(b / b)", "Nochmal."],
            ["q1", "2.0", "Sentence 2.", "Known sentence, new graph.", "(g / other-graph)", "(c / c)", "Neu."],
            ["q2", "x", "Bad score.", "Still kept.", "(d / d)", "(e / e)", "Schlecht."],
            ["q1", "3.0", "Repeat inside the tail.", "Same id as two lines up.", "(f / f)", "(h / h)", "Wieder."]]


def test_appended_rows_alone_are_read_and_the_tables_equal_a_full_read(wh, write_tsv, tmp_path):
    rows = chunk_rows_fixture()
    path = write_tsv("p.tsv", CHUNK_HEADER, rows)
    ds = pairs_cfg(path, translations={"de": {"sentence1": "de1"}})
    ds = ds.model_copy(update={"columns": {"id": "id", "amr1": "amr1", "amr2": "amr2"}})
    ingest_tables(wh, "d", ds, path, "r1", chunk_rows=3)
    with path.open("a", encoding="utf-8") as f:
        f.write("".join("\t".join(r) + "\n" for r in appended_rows()))
    run = ingest_tables(wh, "d", ds, path, "r2", chunk_rows=3)
    assert lineage_inputs(wh, "r2")["read_from_line"] == len(rows) + 2  # header + rows, then the first new line
    assert run.rows_in == 4 and run.rows_failed == 3  # p3 and the second q1 repeat ids, q2 has a bad score
    full = ingest_tables(wh, "full", ds, path, "r3", chunk_rows=3)
    assert "read_from_line" not in lineage_inputs(wh, "r3") and full.rows_in == len(rows) + 4
    for name, table in tables_of(wh, "d").items():
        assert table.equals(tables_of(wh, "full")[name]), name
    errors = dict(wh.read("d", "pairs").select("source_line", "error").iter_rows())
    assert errors[13] == "duplicate id 'p3' (first at line 5)" and errors[16] == "duplicate id 'q1' (first at line 14)"


def test_a_file_changed_before_its_end_is_read_whole(wh, write_tsv):
    rows = chunk_rows_fixture()
    path = write_tsv("p.tsv", CHUNK_HEADER, rows)
    ds = pairs_cfg(path)
    ingest_tables(wh, "d", ds, path, "r1", chunk_rows=4)
    edited = [list(r) for r in rows]
    edited[0][2] = "Sentence zero, edited."
    write_tsv("p.tsv", CHUNK_HEADER, [*edited, ["z9", "1.0", "More.", "Rows.", "(m / m)", "(r / r)", "Mehr."]])
    run = ingest_tables(wh, "d", ds, path, "r2", chunk_rows=4)
    assert "read_from_line" not in lineage_inputs(wh, "r2")
    assert run.rows_in == len(rows) + 1 and run.rows_computed == 2  # the edited row and the new one
    pairs = wh.read("d", "pairs")
    assert pairs.filter(pl.col("item_id") == "p0")["sentence1"].to_list() == ["Sentence zero, edited."]


def test_an_unchanged_file_reads_no_rows_and_writes_nothing(wh, write_tsv):
    path = write_tsv("p.tsv", CHUNK_HEADER, chunk_rows_fixture())
    ds = pairs_cfg(path)
    ingest_tables(wh, "d", ds, path, "r1", chunk_rows=4)
    versions = {t: wh.version("d", t) for t in ("pairs", "sentences")}
    path.touch()  # a new mtime, the same bytes
    run = ingest_tables(wh, "d", ds, path, "r2", chunk_rows=4)
    assert (run.rows_in, run.rows_computed) == (0, 0)
    assert {t: wh.version("d", t) for t in ("pairs", "sentences")} == versions


def test_after_a_failed_ingest_the_file_is_read_whole(wh, write_tsv):
    rows = chunk_rows_fixture()
    path = write_tsv("p.tsv", CHUNK_HEADER, rows)
    ds = pairs_cfg(path)
    ingest_tables(wh, "d", ds, path, "r1", chunk_rows=4)
    with path.open("a", encoding="utf-8") as f:
        f.write("broken\trow\n")
    with pytest.raises(InputError, match=rf"{path}:13: expected 7 fields"):
        ingest_tables(wh, "d", ds, path, "r2", chunk_rows=4)
    write_tsv("p.tsv", CHUNK_HEADER, [*rows, ["n1", "1.0", "New.", "Row.", "(n / n)", "(r / r)", "Neu."]])
    ingest_tables(wh, "d", ds, path, "r3", chunk_rows=4)
    assert "read_from_line" not in lineage_inputs(wh, "r3")
    assert "n1" in wh.read("d", "pairs")["item_id"].to_list()


@pytest.mark.parametrize("content, clean", [(b"h\na\nb\n", True), (b"h\na\nb", False), (b"h\na\n\n", False),
                                            (b"h\na\n  \n", False)])
def test_scan_hashes_the_prefix_and_sees_whether_rows_can_follow(tmp_path, content, clean):
    import hashlib

    from amrsim.ingest.append import scan

    path = tmp_path / "f.tsv"
    path.write_bytes(content)
    state = scan(path, prefix=4)
    assert state.prefix_sha256 == hashlib.sha256(content[:4]).hexdigest()
    assert state.sha256 == hashlib.sha256(content).hexdigest() and state.size == len(content)
    assert state.lines == content.count(b"\n") and state.clean_end is clean
    assert scan(path, prefix=len(content)).prefix_sha256 == state.sha256
    assert scan(path, prefix=len(content) + 1).prefix_sha256 is None


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_a_file_with_cr_only_line_endings_is_named_in_one_short_line(tmp_path, fmt):
    sep = {"tsv": "\t", "csv": ","}.get(fmt)
    if sep:
        lines = [sep.join(["id", "score", "sentence1", "sentence2"])] + [
            sep.join([f"r{i}", "1", f"sentence number {i} " * 5, "other"]) for i in range(200)]
    else:
        lines = [json.dumps({"id": f"r{i}", "score": 1, "sentence1": "s " * 20, "sentence2": "t"}) for i in range(200)]
    path = tmp_path / f"mac.{fmt}"
    path.write_bytes(("\r".join(lines) + "\r").encode())
    with pytest.raises(InputError) as e:
        read_dataset(pairs_cfg(path, format=fmt), path)
    message = str(e.value)
    assert message == f"{path}:1: line endings are CR only; convert the file to LF (or CRLF) line endings"
    # CRLF files stay readable
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    assert ok_rows(read_dataset(pairs_cfg(path, format=fmt), path)).height == 200


def test_header_errors_do_not_echo_a_huge_line(tmp_path):
    path = tmp_path / "wide.tsv"
    path.write_text("\t".join(f"column_{i}" for i in range(5000)) + "\nx\n", encoding="utf-8")
    with pytest.raises(InputError, match="header lacks column") as e:
        read_dataset(pairs_cfg(path), path)
    assert len(str(e.value)) < 400


@pytest.mark.parametrize("body, line, message", [
    # the quote opened on line 3 never closes: it swallows every later line
    ('a,1,x,y\n"b,2,x,y\nc,3,x,y\nd,4,x,y\n', 3, "unclosed quote: the quoted field opened on line 3 never closes"),
    ('a,1,x,y\nb,2,x,"y\n', 3, "unclosed quote: the quoted field opened on line 3 never closes"),
    # a stray quote on line 3 is closed by another on line 5: the record spans 3-5 and has the wrong field count
    ('a,1,x,y\n"b,2,x,y\nc,3,x,y\nd",4,x\ne,5,x,y\n', 3, "expected 4 fields separated by ',', found 3 in the "
                                                        "record of lines 3-5 (a quoted field spans them)"),
])
def test_an_unclosed_csv_quote_is_reported_where_it_opened(tmp_path, body, line, message):
    path = tmp_path / "q.csv"
    path.write_text("id,score,sentence1,sentence2\n" + body, encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_dataset(pairs_cfg(path), path)
    assert str(e.value).startswith(f"{path}:{line}: {message}"), str(e.value)


def test_quoted_fields_spanning_lines_and_literal_quotes_still_read(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text('id,score,sentence1,sentence2\na,1,"two\nlines",y\nb,2,5" tall,"say ""hi"""\n', encoding="utf-8")
    rows = ok_rows(read_dataset(pairs_cfg(path), path)).sort("item_id")
    assert rows["sentence1"].to_list() == ["two\nlines", '5" tall'] and rows["sentence2"][1] == 'say "hi"'


def _typed_records() -> list[dict]:
    return [
        {"id": 1, "score": 4.5, "sentence1": "A fine sentence.", "sentence2": "Another one."},
        {"id": 2, "score": 3, "sentence1": ["A", "list", "sentence"], "sentence2": "Text."},
        {"id": 3, "score": 2, "sentence1": "Text.", "sentence2": True},
        {"id": 4, "score": 1, "sentence1": {"text": "an object"}, "sentence2": 42},
        {"id": 5, "score": True, "sentence1": "Bool score.", "sentence2": "Here."},
        {"id": [6], "score": 1, "sentence1": "List id.", "sentence2": "Here."},
    ]


@pytest.mark.parametrize("fmt", ["jsonl", "jsonl.gz"])
def test_jsonl_cells_that_are_not_strings_become_failed_rows_naming_column_and_type(tmp_path, fmt):
    path = tmp_path / f"typed.{fmt}"
    text = "\n".join(json.dumps(r) for r in _typed_records()) + "\n"
    path.write_bytes(gzip.compress(text.encode()) if fmt.endswith(".gz") else text.encode())
    tables = read_dataset(pairs_cfg(path, format="jsonl"), path)
    pairs = tables["pairs"].sort("source_line")
    assert pairs.height == 6, "no row may be dropped"
    reasons = dict(zip(pairs["source_line"], pairs["error"], strict=True))
    assert reasons[1] is None and pairs["item_id"][0] == "1" and pairs["score"][0] == 4.5  # numbers in id/score
    assert reasons[2] == "column 'sentence1' holds a list, not a string"
    assert reasons[3] == "column 'sentence2' holds a boolean, not a string"
    assert reasons[4] == "column 'sentence1' holds an object, not a string; column 'sentence2' holds a number, " \
                         "not a string"
    assert reasons[5] == "column 'score' holds a boolean, not a string or number"
    assert reasons[6] == "column 'id' holds a list, not a string or number"
    stored = " ".join(str(v) for col in ("sentence1", "sentence2", "item_id") for v in pairs[col] if v is not None)
    assert "[" not in stored and "True" not in stored and "{" not in stored and "42" not in stored
    assert tables["sentences"]["text"].sort().to_list() == ["A fine sentence.", "Another one."]


def test_parquet_cells_that_are_not_strings_become_failed_rows(tmp_path):
    path = tmp_path / "typed.parquet"
    pl.DataFrame({"id": ["a", "b"], "score": [1.0, 2.0], "sentence1": [["x", "y"], ["z"]],
                  "sentence2": [1, 2]}).write_parquet(path)
    pairs = read_dataset(pairs_cfg(path), path)["pairs"]
    assert pairs["status"].to_list() == ["failed", "failed"]
    assert set(pairs["error"]) == {"column 'sentence1' holds a list, not a string; column 'sentence2' holds a "
                                   "number, not a string"}
    assert pairs["sentence1"].to_list() == ["", ""]  # never the repr of the list


def test_non_string_cells_in_derived_triples_and_translation_files_fail_their_rows(tmp_path):
    path = tmp_path / "nli.jsonl"
    rows = [{"sentence1": "A man sleeps.", "sentence2": "A person rests.", "label": "entailment"},
            {"sentence1": "A man sleeps.", "sentence2": "A man runs.", "label": "contradiction"},
            {"sentence1": ["A", "list"], "sentence2": "B.", "label": "entailment"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    ds = DatasetConfig(path=str(path), kind="triples", from_pairs={})
    triples = read_dataset(ds, path)["triples"].sort("source_line")
    assert triples["status"].to_list() == ["ok", "failed"]
    assert triples["error"][1] == "column 'sentence1' holds a list, not a string"

    main, de = tmp_path / "en.jsonl", tmp_path / "de.jsonl"
    main.write_text("\n".join(json.dumps({"sentence1": f"s{i}", "sentence2": f"t{i}", "score": i}) for i in range(2)),
                    encoding="utf-8")
    de.write_text(json.dumps({"sentence1": "s0 de", "sentence2": "t0 de"}) + "\n"
                  + json.dumps({"sentence1": False, "sentence2": "t1 de"}) + "\n", encoding="utf-8")
    ds = DatasetConfig(path=str(main), kind="pairs", translations={"de": {"path": str(de)}})
    pairs = read_dataset(ds, main)["pairs"]
    failed = pairs.filter(pl.col("status") == "failed")
    assert failed.height >= 1 and set(failed["source_line"]) == {2}
    assert all("de.jsonl: column 'sentence1' holds a boolean, not a string" in e for e in failed["error"])
    assert pairs.filter((pl.col("status") == "ok") & (pl.col("lang1") == "de"))["sentence1"].to_list() == ["s0 de"]


def test_jsonl_lines_read_as_json_reads_them(tmp_path):
    """JSONL goes through orjson where it agrees with json: NaN, huge or float numbers and a non-object line get
    json's reading (or its error), so cells and errors are the same either way."""
    from amrsim.ingest.readers import read_rows

    lines = ['{"id": 1, "text": "a\\u00e9\\t\\"b", "x": [1]}', '{"id": NaN, "text": "\\u4e2d"}',
             '{"id": 123456789012345678901234567890, "text": 1.5}', '{"id": 2.0, "text": null, "text": "last"}',
             '{"id": 1e400, "text": {"a": 1}}', '{"id": true, "text": "t"}']
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    frame = read_rows(path, "jsonl", ["id", "text"], text_columns=["text"])
    expected_ids = ["1", None, "123456789012345678901234567890", "2.0", "inf", None]
    assert frame["id"].to_list() == expected_ids
    assert frame["text"].to_list() == ['a\u00e9\t"b', "\u4e2d", None, "last", None, "t"]
    errors = frame["__error"].to_list()
    assert errors[0] is None and errors[1] is None and "number" in errors[2] and "object" in errors[4]
    assert "boolean" in errors[5]
    path.write_text('{"id": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"rows.jsonl:2: expected a JSON object, found list"):
        read_rows(path, "jsonl", ["id"])


def test_jsonl_cell_with_a_lone_surrogate_becomes_a_failed_row_naming_its_column(tmp_path):
    """JSON may escape half a surrogate pair (`"\\ud800"`): json reads it as a str that is not valid Unicode, which
    no table can store. That cell reads as None and its row's error names the column; the other rows are kept."""
    from amrsim.ingest.readers import read_rows

    lines = ['{"id": 1, "text": "fine"}', '{"id": 2, "text": "a\\ud800b"}', '{"id": "\\udfff", "text": "ok"}',
             '{"id": 4, "text": "pair \\ud83d\\ude00 kept"}']
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    frame = read_rows(path, "jsonl", ["id", "text"], text_columns=["text"])
    assert frame["__line"].to_list() == [1, 2, 3, 4]
    assert frame["text"].to_list() == ["fine", None, "ok", "pair \U0001f600 kept"]  # a whole pair is one character
    assert frame["id"].to_list() == ["1", "2", None, "4"]
    assert frame["__error"].to_list() == [
        None, "column 'text' holds a lone surrogate (\\ud800 at character 2), not valid Unicode text",
        "column 'id' holds a lone surrogate (\\udfff at character 1), not valid Unicode text", None]
