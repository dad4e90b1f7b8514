"""Embedding cache mechanics (with a deterministic fake encoder) and STS evaluation, incl. the real baselines."""

from __future__ import annotations

import subprocess

import numpy as np
import polars as pl
import pytest

import amrsim.encoders.cache as cache
from amrsim.config import DatasetConfig, StsEvalConfig
from amrsim.encoders.cache import embed_sentences, read_embeddings
from amrsim.evaluate.sts import correlations, cosine
from amrsim.stages import sts_stage
from amrsim.stages.ingest import ingest_tables
from amrsim.warehouse import content_key
from tests.forked import amrsim_cli
from tests.helpers import ROOT, CountingEncoder, shared


def frame(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"key": [content_key("sentence", "en", t) for t in texts], "text": texts})


def test_only_missing_sentences_are_encoded(wh):
    enc = CountingEncoder()
    assert embed_sentences(wh, "d", "minilm", frame(["a b", "c d"]), encoder=enc) == (2, 0)
    assert embed_sentences(wh, "d", "minilm", frame(["a b", "c d", "e f"]), encoder=enc) == (1, 0)
    assert enc.seen == ["a b", "c d", "e f"]
    version = wh.version("d", "embeddings")
    assert embed_sentences(wh, "d", "minilm", frame(["c d"]), encoder=enc) == (0, 0)
    assert wh.version("d", "embeddings") == version
    vecs = read_embeddings(wh, "d", "minilm", frame(["e f", "a b"])["key"].to_list())
    assert vecs.dtype == np.float32 and vecs.shape == (2, 26)
    assert np.allclose(vecs, enc.encode(["e f", "a b"]))


def test_model_errors_become_failed_rows_and_are_retried(wh, monkeypatch):
    monkeypatch.setattr(cache, "COMMIT_ROWS", 2)
    texts = ["ok one", "ok two", "boom here", "ok three"]
    computed, failed = embed_sentences(wh, "d", "minilm", frame(texts), batch_size=1,
                                       encoder=CountingEncoder(fail_on="boom"))
    assert (computed, failed) == (4, 1)
    table = wh.read("d", "embeddings")
    bad = table.filter(pl.col("status") == "failed")
    assert bad.height == 1 and bad["error"][0] == "RuntimeError: model exploded"
    assert embed_sentences(wh, "d", "minilm", frame(texts), encoder=CountingEncoder()) == (1, 0)
    assert wh.read("d", "embeddings").filter(pl.col("status") == "ok").height == 4


def test_correlations_and_cosine():
    pred = np.array([0.1, 0.4, 0.35, 0.8])
    gold = np.array([0.0, 2.0, 3.0, 5.0])
    corr = correlations(pred, gold)
    assert corr["spearman"] == pytest.approx(80.0)
    assert corr["pearson"] == pytest.approx(np.corrcoef(pred, gold)[0, 1] * 100)
    a = np.array([[1.0, 0.0], [1.0, 1.0]])
    assert np.allclose(cosine(a, np.array([[2.0, 0.0], [-1.0, -1.0]])), [1.0, -1.0])


def test_sts_stage_scores_monolingual_and_cross_lingual_and_reuses_results(wh, write_tsv, monkeypatch):
    rows = [[f"i{i}", str(s), a, b, a.upper(), b.upper()] for i, (s, a, b) in enumerate([
        (5.0, "the cat sat", "the cat sat"), (4.0, "the cat sat", "a cat sat"),
        (1.0, "the cat sat", "zzz qqq"), (0.0, "xyz", "abc mnop")])]
    path = write_tsv("p.tsv", ["id", "score", "s1", "s2", "s1_de", "s2_de"], rows)
    ds = DatasetConfig(path=str(path), kind="pairs", split="test",
                       columns={"id": "id", "sentence1": "s1", "sentence2": "s2"},
                       translations={"de": {"sentence1": "s1_de", "sentence2": "s2_de"}})
    ingest_tables(wh, "d", ds, path, "r0")
    enc = CountingEncoder()
    monkeypatch.setattr(cache, "load_encoder_with", lambda *a, **k: enc)
    sts = StsEvalConfig(encoders=["minilm"], datasets=["d"], splits=["test"], lang_pairs=["en-en", "en-de"])
    run, results = sts_stage(wh, "p", sts, "r1")
    assert run.rows_computed == 2
    spearman = dict(zip(results.filter(pl.col("metric") == "spearman")["lang_pair"],
                        results.filter(pl.col("metric") == "spearman")["value"], strict=True))
    # computed directly: the encoder lower-cases, so the upper-cased "German" side scores like English
    pairs = [(r[2], r[3]) for r in rows]
    direct = cosine(CountingEncoder().encode([a for a, _ in pairs]), CountingEncoder().encode([b for _, b in pairs]))
    expected = correlations(direct, np.array([float(r[1]) for r in rows]))["spearman"]
    assert spearman["en-en"] == pytest.approx(expected) and spearman["en-de"] == pytest.approx(expected)
    assert set(results["n"]) == {4}
    again, results2 = sts_stage(wh, "p", sts, "r2")
    assert again.rows_computed == 0 and results2.sort("key")["value"].equals(results.sort("key")["value"])
    assert wh.read("eval", "results").height == 4


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return amrsim_cli(*args, cwd=ROOT)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("encoder, file, spearman, pearson", [
    ("muse", ("stsb_en", "stsb_en_test.tsv"), 80.14, 81.06),
    ("minilm", ("stsb_en", "stsb_en_test.tsv"), 82.03, 82.74),
    ("muse", ("sick", "sick_test.tsv"), 72.96, 79.27),
])
def test_evaluate_cli_reproduces_baselines(tmp_path, encoder, file, spearman, pearson):
    path = shared(*file)
    proc = _cli("evaluate", "sts", "--encoder", encoder, "--file", str(path), "--config",
                str(_config(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = next(line for line in proc.stdout.splitlines() if f" {encoder} " in line)
    values = [float(x) for x in row.replace("│", " ").split()[-2:]]
    assert values[0] == pytest.approx(spearman, abs=0.1) and values[1] == pytest.approx(pearson, abs=0.1)
    from amrsim.warehouse import Warehouse

    results = Warehouse(tmp_path / "wh").read("eval", "results")
    stored = results.filter(pl.col("metric") == "spearman")["value"][0]
    assert stored == pytest.approx(spearman, abs=0.1) and results["split"][0] == "test"


def _config(tmp_path):
    cfg = tmp_path / "pipelines.yaml"
    cfg.write_text("warehouse: wh\npipelines: {demo: {}}\n")
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize("content, expected", [
    (b"", "empty file"),
    (b"sentence1\tsentence2\tscore\na\tb\n", ":2: expected 3 fields"),
    (b"left\tright\tscore\na\tb\t1\n", ":1: header lacks column(s) ['sentence1', 'sentence2']"),
    (b"sentence1\tsentence2\tscore\n\xff\tb\t1\n", ":2: not valid UTF-8"),
])
def test_evaluate_cli_bad_input_is_one_line_and_nonzero(tmp_path, content, expected):
    path = tmp_path / "bad.tsv"
    path.write_bytes(content)
    proc = _cli("evaluate", "sts", "--encoder", "muse", "--file", str(path), "--config", str(_config(tmp_path)))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and expected in lines[0], proc.stderr
    assert not (tmp_path / "wh" / "bad").exists(), "nothing may be written for a rejected file"


def test_sts_stage_mixes_stored_and_new_results_from_an_older_table(wh, write_tsv, monkeypatch):
    import shutil

    from deltalake import write_deltalake

    rows = [[f"i{i}", str(s), a, b, a.upper(), b.upper()] for i, (s, a, b) in enumerate([
        (5.0, "the cat sat", "the cat sat"), (1.0, "the cat sat", "zzz qqq"), (0.0, "xyz", "abc mnop")])]
    path = write_tsv("p.tsv", ["id", "score", "s1", "s2", "s1_de", "s2_de"], rows)
    ds = DatasetConfig(path=str(path), kind="pairs", split="test",
                       columns={"id": "id", "sentence1": "s1", "sentence2": "s2"},
                       translations={"de": {"sentence1": "s1_de", "sentence2": "s2_de"}})
    ingest_tables(wh, "d", ds, path, "r0")
    monkeypatch.setattr(cache, "load_encoder_with", lambda *a, **k: CountingEncoder())
    sts_stage(wh, "p", StsEvalConfig(encoders=["minilm"], datasets=["d"], lang_pairs=["en-en"]), "r1")
    stored = wh.read("eval", "results")  # a table written before `task` was added to the schema
    shutil.rmtree(wh.table_path("eval", "results"))
    write_deltalake(str(wh.table_path("eval", "results")), stored.drop("task").to_arrow())
    run, results = sts_stage(wh, "p", StsEvalConfig(encoders=["minilm"], datasets=["d"],
                                                    lang_pairs=["en-en", "de-de"]), "r2")
    assert run.rows_computed == 1 and set(results["lang_pair"]) == {"en-en", "de-de"}


class NoisyEncoder(CountingEncoder):
    """Float32 vectors with many dimensions, so identical sentences get cosines that differ in the last bits."""

    dim = 384

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = np.random.default_rng(abs(hash(t)) % 2**32).normal(size=self.dim)
        return out


def test_constant_predictions_from_float32_noise_are_undefined():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 384)).astype(np.float32)
    # the same vector on both sides, scaled as different batches would: float32 rounding differs per row
    pred = cosine(vectors, vectors * np.float32(3.0)).astype(np.float32)
    gold = np.linspace(0, 5, 50)
    assert np.ptp(pred) > 0, "the noise this guards against must be present"
    assert correlations(pred, gold) == {"spearman": None, "pearson": None}
    assert correlations(gold, np.full(50, 2.5) + rng.normal(scale=1e-9, size=50)) == {"spearman": None,
                                                                                        "pearson": None}
    # a real spread of 1e-4 relative is ranked, as before
    assert correlations(1.0 + 1e-4 * gold, gold)["spearman"] == pytest.approx(100.0)
    from amrsim.stages.evaluate.report import ScatterData, scatter_spearman

    assert scatter_spearman(ScatterData("m", "d", "test", "en-en", pred, gold)) is None


def test_evaluate_sts_cli_shows_undefined_for_identical_sentences(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from amrsim.cli import app

    sentences = [f"sentence number {i} about {w}" for i, w in enumerate(["cats", "dogs", "rain", "trains", "tea"])]
    path = tmp_path / "same_test.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{s}\t{s}\t{i}\n" for i, s in enumerate(sentences)),
                    encoding="utf-8")
    monkeypatch.setattr(cache, "load_encoder_with", lambda *a, **k: NoisyEncoder())
    result = CliRunner().invoke(app, ["evaluate", "sts", "--encoder", "minilm", "--file", str(path),
                                      "--config", str(_config(tmp_path))])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if " minilm " in line)
    assert row.replace("│", " ").split()[-2:] == ["undefined", "undefined"], result.output
