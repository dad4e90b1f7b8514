"""Every command that writes one output row per input row gives output row i input row i's own identity: its kept
columns and its line (metrics score), its sentence and the results of that sentence (parse), its pair and that
pair's prediction (score) — under repeated rows, reruns into an earlier --out, reordered and appended input, and
worker processes. Seeded random cases (hypothesis is not a dependency): each seed is one reproducible case."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from tests.helpers import one_line_error, run_cli, shared

GRAPHS = ["(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))",
          "(w / want-01 :polarity - :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))",
          "(c / chase-01 :ARG0 (c2 / cat) :ARG1 (d / dog))",
          "(c / chase-01 :ARG0 (d / dog) :ARG1 (c2 / cat))",
          "(d / dog :quant 3)",
          "(a / b",  # unreadable: a failed row of the scorer's own
          ""]  # empty: likewise, and the pair a non-text cell's row would be read as
LIST_CELL = ["(d / dog)"]  # a graph cell that is not text: a failed row of the reader's, whatever its pair's scores

METRICS = ("metrics", "score", "--aspects", "smatch", "--vectors", "random")


def _invoke(*args: str):
    from amrsim.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def _write_jsonl(path: Path, rows: list[dict], rng: random.Random) -> list[int]:
    """`rows` as JSONL with blank lines scattered between them (a line number is then not a row number); returns
    each row's line number. Not before the first: parse and score read the columns from the first line."""
    lines, numbers = [], []
    for row in rows:
        while lines and rng.random() < 0.3:
            lines.append("")
        lines.append(json.dumps(row))
        numbers.append(len(lines))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return numbers


def _metric_rows(rng: random.Random, n: int, serial: list[int]) -> list[dict]:
    """`n` rows drawn from a few distinct pairs (so most repeat), each with an id no other row of any run has."""
    pairs = [(rng.choice(GRAPHS), rng.choice(GRAPHS)) for _ in range(rng.randint(1, 4))]
    rows = []
    for _ in range(n):
        a, b = rng.choice(pairs)
        if rng.random() < 0.08:
            a = LIST_CELL
        serial[0] += 1
        rows.append({"amr1": a, "amr2": b, "id": f"row-{serial[0]}", "n": rng.randint(0, 5)})
    return rows


def _reference_scores() -> dict[tuple[str, str], dict]:
    """Each pair of GRAPHS scored alone, by the engine: what every row of that pair must show."""
    from amrsim.metrics import MetricsOptions, score_pairs

    pairs = [(a, b) for a in GRAPHS for b in GRAPHS]
    scored = score_pairs(pl.DataFrame({"amr1": [a for a, _ in pairs], "amr2": [b for _, b in pairs]}),
                         MetricsOptions(aspects=("smatch",), vectors="random"))
    return {p: r for p, r in zip(pairs, scored.select("smatch_f1", "status", "error").to_dicts(), strict=True)}


def _check_metrics_rows(out: Path, rows: list[dict], lines: list[int], keep: list[str], reference: dict) -> None:
    table = pl.read_parquet(out)
    assert table.columns[:2 + len(keep)] == ["key", "line", *keep]
    assert table.height == len(rows)
    assert table["line"].to_list() == lines
    for col in keep:
        assert table[col].to_list() == [str(r[col]) for r in rows], col
    for i, (row, got) in enumerate(zip(rows, table.iter_rows(named=True), strict=True)):
        if row["amr1"] is LIST_CELL:
            want = {"smatch_f1": None, "status": "failed", "error": "column 'amr1' holds a list, not a string"}
        else:
            want = reference[(row["amr1"], row["amr2"])]
        assert {c: got[c] for c in want} == want, (i, row)


def _run_metrics(path: Path, out: Path, keep: list[str], workers: int) -> None:
    result = _invoke(*METRICS, "--file", path, "--out", out, "--workers", workers, "--keep", ",".join(keep))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])  # 2: starts process pools
def test_metrics_score_gives_every_row_its_own_kept_columns_and_line(tmp_path, workers):
    """Random repeats of a few pairs, unreadable graphs and non-text cells; a rerun into the same --out with the rows
    reordered, some left out, new ones appended, every id new, and another --keep: each row keeps its own id, n and
    line, and its pair's scores. On two worker processes, with enough rows for several batches each."""
    reference = _reference_scores()
    serial = [0]
    for seed in range(16 if workers == 1 else 2):
        rng = random.Random(seed)
        out = tmp_path / f"out{seed}.parquet"
        first = _metric_rows(rng, 48 if workers == 2 else rng.randint(1, 12), serial)
        keep = rng.choice([["id"], ["id", "n"], ["n", "id"]])
        path = tmp_path / f"pairs{seed}.jsonl"
        lines = _write_jsonl(path, first, rng)
        _run_metrics(path, out, keep, workers)
        _check_metrics_rows(out, first, lines, keep, reference)
        # the same pairs again, as new rows: reordered, some dropped, others appended
        again = [dict(r) for r in rng.sample(first, rng.randint(1, len(first)))] + _metric_rows(rng, rng.randint(0, 4),
                                                                                                 serial)
        for row in again:
            serial[0] += 1
            row["id"] = f"row-{serial[0]}"
        keep = rng.choice([["id"], ["n", "id"], ["id", "n"]])
        lines = _write_jsonl(path, again, rng)
        _run_metrics(path, out, keep, workers)
        _check_metrics_rows(out, again, lines, keep, reference)


@pytest.mark.integration
def test_metrics_score_keeps_every_little_prince_id_on_its_own_row(tmp_path):
    """Each Little Prince graph paired with itself (the book repeats a few sentences, so some pairs repeat), then
    the file again reversed into the same --out: every output row's id is its input row's id."""
    source = shared("amr_little_prince", "little_prince_v3.0.jsonl")
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs = [{"id": r["id"], "amr1": r["amr"], "amr2": r["amr"]} for r in rows]
    assert len({(p["amr1"], p["amr2"]) for p in pairs}) < len(pairs)  # the case under test: repeated pairs
    out = tmp_path / "lpp.parquet"
    for order in (pairs, pairs[::-1]):
        path = tmp_path / "lpp_pairs.jsonl"
        path.write_text("".join(json.dumps(p) + "\n" for p in order), encoding="utf-8")
        _run_metrics(path, out, ["id"], 1)
        table = pl.read_parquet(out)
        assert table["id"].to_list() == [p["id"] for p in order]
        assert table["line"].to_list() == list(range(1, len(order) + 1))


@pytest.mark.parametrize("keep, named", [("id,nope", "nope"), ("id,id", "id"), ("smatch_f1", "smatch_f1"),
                                         ("status", "status"), ("key", "key"), ("line", "line"),
                                         ("error", "error"), ("seconds", "seconds")])
@pytest.mark.parametrize("existing", [False, True], ids=["new out", "earlier out"])
def test_metrics_score_refuses_a_bad_keep_in_one_line_writing_nothing(tmp_path, keep, named, existing):
    """A --keep column the file lacks, one named twice, or one the output has already: a user error (exit 2) of one
    line naming the column, and no file written (an earlier --out left as it was)."""
    from amrsim.errors import AmrsimError

    path, out = tmp_path / "pairs.jsonl", tmp_path / "out.parquet"
    columns = {"smatch_f1": 0.5, "status": "s", "key": "k", "line": 7, "error": "e", "seconds": 1.0}  # all but nope
    path.write_text("".join(json.dumps({"amr1": g, "amr2": g, "id": i, **columns}) + "\n"
                            for i, g in enumerate(GRAPHS[:3])), encoding="utf-8")
    if existing:
        _run_metrics(path, out, ["id"], 1)
    before = out.read_bytes() if existing else None
    result = _invoke(*METRICS, "--file", path, "--out", out, "--workers", 1, "--keep", keep)
    error = result.exception
    assert isinstance(error, AmrsimError) and error.exit_code == 2, result.output
    assert "\n" not in str(error) and f"'{named}'" in str(error), str(error)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["pairs.jsonl", *(["out.parquet"] if existing else [])])
    assert not existing or out.read_bytes() == before


def test_metrics_score_bad_keep_is_one_error_line_of_a_real_process(tmp_path):
    path, out = tmp_path / "pairs.jsonl", tmp_path / "out.parquet"
    path.write_text(json.dumps({"amr1": GRAPHS[0], "amr2": GRAPHS[1], "status": "x"}) + "\n", encoding="utf-8")
    line = one_line_error(run_cli(tmp_path, *METRICS, "--workers", "1", "--file", str(path), "--out", str(out),
                                  "--keep", "status"))
    assert "--keep" in line and "'status'" in line and not out.exists()


# ------------------------------------------------------------------------------------------------------------ parse

def _sentence_file(path: Path, texts: list, rng: random.Random, fmt: str) -> list:
    """`texts` (None: a cell that is not text) as a `fmt` file of sentences; returns what each output row's `snt`
    must be. Plain text keeps blank lines as rows; JSONL skips them (scattered here)."""
    if fmt == "txt":
        path.write_text("".join(f"{t}\n" for t in texts), encoding="utf-8")
        return texts
    if fmt == "tsv":
        path.write_text("id\tsentence\n" + "".join(f"{i}\t{t}\n" for i, t in enumerate(texts)), encoding="utf-8")
        return texts
    column = rng.choice(["snt", "sentence"])
    _write_jsonl(path, [{"id": i, column: 7 if t is None else t} for i, t in enumerate(texts)], rng)
    return ["" if t is None else t for t in texts]


def _parse_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def de_en(tmp_path_factory) -> str:
    from tests.helpers import DE_WORDS, build_tiny_marian

    pytest.importorskip("sentencepiece")
    return build_tiny_marian(tmp_path_factory.mktemp("de_en"), DE_WORDS, seed=1)


@pytest.mark.slow  # spaCy's pipeline and a tiny Marian model load once
@pytest.mark.usefixtures("one_thread")
@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_parse_gives_every_row_its_own_sentence_and_results(tmp_path, de_en):
    """Random repeats of a few sentences, blank and non-text cells, in plain text, TSV and JSONL; the same --out
    written again from the rows reordered, some left out and new ones appended. Row i of --out is input row i:
    its sentence, its graph as that sentence parsed alone, its own failure (a non-text cell: the reader's reason);
    with --translate, its translation as that sentence translated alone; with --backend provided, its own graph."""
    from amrsim.amr.graph import AMRError, parse
    from amrsim.amr.parsing import parser_for
    from amrsim.config import ParseConfig
    from amrsim.translate.run import TranslatorSpec, translator_for
    from tests.helpers import DE_WORDS, random_sentence

    parser = parser_for(ParseConfig(backend="ud", langs=["en"]).parser_specs()["en"])
    rng = random.Random(0)
    english = [random_sentence(rng) for _ in range(5)]
    german = [random_sentence(rng, DE_WORDS) for _ in range(4)]
    translator = translator_for(TranslatorSpec(de_en, device="cpu"))
    translated = {t: translator.translate([t])[0].text for t in german}  # each alone
    alone = {t: parser.parse([t])[0] for t in [*english, *translated.values()]}

    def want(text, mode: str, fmt: str) -> dict:
        if text is None:
            return {"amr": None, "status": "failed", "error": "column '{}' holds a number, not a string"}
        if not text:
            return {"amr": None, "status": "failed",
                    "error": "translation failed: empty text" if mode == "translate" else "empty sentence"}
        r = alone[translated[text] if mode == "translate" else text]
        return {"amr": r.penman, "status": r.status, "error": r.error}

    for seed in range(9):
        rng = random.Random(seed)
        mode = ["parse", "translate", "provided", "parse", "provided", "translate", "parse", "parse", "provided"][seed]
        fmt = "jsonl" if mode == "provided" else rng.choice(["txt", "tsv", "jsonl"])
        out = tmp_path / f"out{seed}.jsonl"
        pool = german if mode == "translate" else english
        options = (["--lang", "de", "--translate", de_en, "--device", "cpu"] if mode == "translate" else
                   ["--backend", "provided"] if mode == "provided" else [])
        texts: list = [rng.choice(pool) for _ in range(rng.randint(1, 9))]
        for _ in range(2):  # then the rows again, reordered, some left out, others appended, into the same --out
            if fmt != "tsv":  # a blank TSV line is no row
                texts = [t if rng.random() > 0.1 else "" for t in texts]
            if fmt == "jsonl":
                texts = [t if rng.random() > 0.1 else None for t in texts]
            path = tmp_path / f"in{seed}.{fmt}"
            if mode == "provided":
                graphs = [rng.choice([*GRAPHS, None]) for _ in texts]
                _write_jsonl(path, [{"snt": t or "", "amr": 7 if g is None else g} for t, g in zip(texts, graphs,
                                                                                                   strict=True)], rng)
            else:
                snt = _sentence_file(path, texts, rng, fmt)
            result = _invoke("parse", "--file", path, "--out", out, *options)
            assert result.exit_code == 0, result.output
            rows = _parse_rows(out)
            assert len(rows) == len(texts)
            for i, row in enumerate(rows):
                if mode == "provided":
                    g = graphs[i]
                    try:
                        expected = ({"amr": None, "status": "failed", "error": "column 'amr' holds a number, not a "
                                     "string"} if g is None else {"amr": parse(g) and g, "status": "ok", "error": None})
                    except AMRError as e:
                        expected = {"amr": None, "status": "failed", "error": str(e)}
                    assert row["snt"] == (texts[i] or ""), (seed, i)
                else:
                    expected = want(texts[i], mode, fmt)
                    if texts[i] is None:
                        expected["error"] = expected["error"].format(next(c for c in ("snt", "sentence")
                                                                          if f'"{c}": 7' in path.read_text()))
                    assert row["snt"] == snt[i], (seed, i)
                assert {k: row[k] for k in expected} == expected, (seed, mode, fmt, i, row)
                if mode == "translate":
                    assert row["english"] == (translated.get(texts[i]) if texts[i] else None), (seed, i)
            texts = rng.sample(texts, rng.randint(1, len(texts))) + [rng.choice(pool) for _ in range(rng.randint(0, 3))]
            rng.shuffle(texts)


# ------------------------------------------------------------------------------------------------------------ score

@pytest.mark.slow  # a tiny cross-encoder is built and loaded
@pytest.mark.usefixtures("one_thread")
def test_score_gives_every_row_its_own_pair_gold_and_prediction(tmp_path, monkeypatch):
    """A tiny PEAR run scores random repeats of a few pairs from TSV, CSV and JSONL (blank lines scattered), then the
    rows again, reordered, some left out, others appended, into the same --out: row i holds input row i's
    sentences and gold, and the prediction of that pair scored alone."""
    from amrsim.methods.pear.model import MODEL_SUBDIR, PearCrossEncoder
    from tests.helpers import TINY_WORDS, tiny_bert

    run = tmp_path / "warehouse" / "models" / "pear" / "r1"
    network = PearCrossEncoder(str(tiny_bert(tmp_path / "bert", TINY_WORDS)), device="cpu")
    network.save(run / MODEL_SUBDIR)
    (run / "model.json").write_text(json.dumps({"method": "pear", "run_id": "r1", "kind": "cross-encoder",
                                                "encoder": MODEL_SUBDIR, "max_length": 64, "symmetric": False,
                                                "created_at": "2024-01-01T00:00:00"}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # no pipelines.yaml here: the models are under ./warehouse

    rng = random.Random(0)
    sentence = lambda: " ".join(rng.choice(TINY_WORDS) for _ in range(rng.randint(2, 7)))  # noqa: E731
    pairs = [(sentence(), sentence()) for _ in range(6)]
    alone = {p: float(network.predict([p[0]], [p[1]])[0]) for p in pairs}
    for seed in range(6):
        rng = random.Random(seed)
        fmt = ["tsv", "csv", "jsonl"][seed % 3]
        out = tmp_path / f"preds{seed}.tsv"
        rows = [(*rng.choice(pairs), rng.randint(0, 50) / 10) for _ in range(rng.randint(1, 30))]
        for _ in range(2):
            path = tmp_path / f"pairs{seed}.{fmt}"
            if fmt == "jsonl":
                _write_jsonl(path, [{"id": i, "sentence1": a, "sentence2": b, "score": g}
                                    for i, (a, b, g) in enumerate(rows)], rng)
            else:
                sep = "\t" if fmt == "tsv" else ","
                path.write_text(sep.join(["id", "sentence1", "sentence2", "score"]) + "\n" + "".join(
                    sep.join([str(i), a, b, str(g)]) + "\n" for i, (a, b, g) in enumerate(rows)), encoding="utf-8")
            result = _invoke("score", "--model", "pear:latest", "--file", path, "--out", out, "--device", "cpu",
                             "--batch-size", rng.choice(["1", "4", "64"]))
            assert result.exit_code == 0, result.output
            got = pl.read_csv(out, separator="\t", quote_char=None)
            assert got.height == len(rows)
            assert got["sentence1"].to_list() == [a for a, _, _ in rows]
            assert got["sentence2"].to_list() == [b for _, b, _ in rows]
            assert got["gold"].to_list() == [g for _, _, g in rows]
            assert got["prediction"].to_list() == pytest.approx([alone[(a, b)] for a, b, _ in rows], abs=1e-5)
            rows = rng.sample(rows, rng.randint(1, len(rows))) + [(*rng.choice(pairs), rng.randint(0, 50) / 10)
                                                                   for _ in range(rng.randint(0, 4))]
            rng.shuffle(rows)
