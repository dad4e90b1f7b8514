"""Evaluation suite wiring: encoders by name (hf pooling, trained models), aspect evaluation, results stored once and
reused, undefined values, the suite from a pipelines.yaml, the CLI, and the report."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import polars as pl
import pytest

import amrsim.encoders.cache as cache
from amrsim.encoders import find_trained, list_trained, model_id, split_hf_name
from amrsim.evaluate import Score
from amrsim.evaluate.aspects import aspect_scores
from amrsim.evaluate.bitext import tatoeba_accuracy
from amrsim.evaluate.sts import correlations, cosine
from amrsim.methods.loaders import load_encoder
from amrsim.stages.evaluate import aspects_eval, bitext_eval, transfer_eval, write_report
from amrsim.stages.evaluate.results import score_rows
from tests.forked import amrsim_cli
from tests.helpers import CountingEncoder, run_cli

# --- encoders -------------------------------------------------------------------------------------------------


def tiny_sentence_transformer(path):
    """A randomly initialised 2-layer BERT with a word-level vocabulary, saved as a sentence-transformers dir."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = "the a cat dog sat ran on mat is was big small red blue".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (path / "hf").mkdir(parents=True)
    (path / "hf" / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64)).save_pretrained(path / "hf")
    BertTokenizerFast(vocab_file=str(path / "hf" / "vocab.txt")).save_pretrained(path / "hf")
    word = models.Transformer(str(path / "hf"), max_seq_length=32)
    st = SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension(), "mean")],
                             device="cpu")
    st.save(str(path / "encoder"))
    return path


def test_hf_names_and_unknown_encoders_list_the_known_ones(tmp_path):
    assert split_hf_name("hf:org/model#cls") == ("org/model", "cls")
    assert split_hf_name("hf:./local") == ("./local", None)
    with pytest.raises(ValueError, match="pooling 'max' unknown"):
        model_id("hf:org/model#max")
    with pytest.raises(ValueError, match=r"unknown encoder 'bogus'; known encoders: minilm, muse, hf:"):
        model_id("bogus", tmp_path)
    with pytest.raises(ValueError, match=r"no trained 'mse_amr' model under"):
        model_id("mse_amr:latest", tmp_path)


def test_trained_models_resolve_latest_and_load(tmp_path):
    root = tmp_path / "models"
    for run, created in (("r-old", "2026-01-01T00:00:00Z"), ("r-new", "2026-02-01T00:00:00Z")):
        tiny_sentence_transformer(root / "s3bert" / run)
        (root / "s3bert" / run / "model.json").write_text(json.dumps(
            {"method": "s3bert", "run_id": run, "created_at": created, "encoder": "encoder",
             "aspects": {"frames": [0, 8]}}))
    assert list_trained(root) == {"s3bert": ["r-old", "r-new"]}
    assert find_trained("s3bert:latest", root).run_id == "r-new"
    assert model_id("s3bert:latest", root) == model_id("s3bert:r-new", root)
    assert model_id("s3bert:r-new", root).startswith("trained:s3bert/r-new@")  # and the fingerprint of its files
    with pytest.raises(ValueError, match="no run 'r-x' of 's3bert'.*runs: r-old, r-new"):
        model_id("s3bert:r-x", root)
    with pytest.raises(ValueError, match="known encoders: .*s3bert:r-old, s3bert:r-new, s3bert:latest"):
        model_id("nope", root)
    enc = load_encoder("s3bert:r-old", models_root=root, device="cpu")
    vecs = enc.encode(["the cat sat", "a dog ran"])
    assert vecs.shape == (2, 16) and np.isfinite(vecs).all()
    from sentence_transformers import SentenceTransformer

    direct = SentenceTransformer(str(root / "s3bert" / "r-old" / "encoder"), device="cpu").encode(["the cat sat"])
    assert np.allclose(vecs[0], direct[0], atol=1e-6)


def test_hf_pooling_mean_and_cls_match_the_model_outputs(tmp_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = tiny_sentence_transformer(tmp_path / "m") / "hf"
    texts = ["the big cat sat on the mat", "a dog"]
    mean = load_encoder(f"hf:{path}#mean", device="cpu").encode(texts)
    cls = load_encoder(f"hf:{path}#cls", device="cpu").encode(texts)
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    for i, t in enumerate(texts):  # one at a time: no padding, so the mean is a plain average
        with torch.no_grad():
            hidden = model(**tok([t], return_tensors="pt")).last_hidden_state[0]
        assert np.allclose(mean[i], hidden.mean(0).numpy(), atol=1e-5)
        assert np.allclose(cls[i], hidden[0].numpy(), atol=1e-5)


# --- aspects, undefined values ---------------------------------------------------------------------------------


def test_aspect_scores_use_the_slice_of_a_decomposed_model():
    rng = np.random.default_rng(0)
    v1, v2 = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    metrics = pl.DataFrame({"frames": [0.1, 0.5, 0.3, 0.9, 0.2, 0.7], "negation": [None] * 6,
                            "concepts": [1.0] * 6})
    scores = {s.lang_pair: s for s in aspect_scores("m", "d", "test", metrics, v1, v2, {"frames": (0, 2)},
                                                    ["frames", "negation", "concepts"])}
    expected = correlations(cosine(v1[:, :2], v2[:, :2]), metrics["frames"].to_numpy())["spearman"]
    assert scores["frames"].value == pytest.approx(expected)
    assert "negation" not in scores  # never computed: no row, not a zero
    assert scores["concepts"].value is None and scores["concepts"].shown == "undefined"  # constant target
    with pytest.raises(ValueError, match="slice ends at 9 but the embedding has 4"):
        aspect_scores("m", "d", "test", metrics, v1, v2, {"frames": (0, 9)}, ["frames"])


def test_constant_predictions_are_undefined_not_zero_or_nan():
    assert correlations(np.ones(5), np.arange(5.0)) == {"spearman": None, "pearson": None}
    assert Score("sts", "m", "d", "test", "en-en", "spearman", float("nan"), 3).value is None
    rows = score_rows([Score("sts", "m", "d", "test", "en-en", "spearman", None, 3)], "r", "h")
    assert rows["value"].to_list() == [None]


# --- runner: results stored once, reused while inputs are unchanged ------------------------------------------


@pytest.fixture
def fake_encoder(monkeypatch):
    enc = CountingEncoder()
    monkeypatch.setattr(cache, "load_encoder_with", lambda *a, **k: enc)
    return enc


def test_bitext_eval_matches_direct_computation_and_is_reused(wh, tmp_path, fake_encoder):
    path = tmp_path / "tatoeba.deu-eng.tsv"
    src = ["der hund", "die katze schlaeft", "ich esse brot", "guten morgen"]
    tgt = ["the hound", "the katze sleeps", "i eat bread", "good morning"]
    path.write_text("deu\teng\n" + "".join(f"{a}\t{b}\n" for a, b in zip(src, tgt, strict=True)))
    rows = bitext_eval(wh, "minilm", path, "r1")
    assert set(rows["dataset"]) == {"tatoeba"} and set(rows["lang_pair"]) == {"deu-eng"}
    direct = tatoeba_accuracy(CountingEncoder().encode(src), CountingEncoder().encode(tgt))
    got = dict(zip(rows["metric"], rows["value"], strict=True))
    assert got == pytest.approx(direct)
    seen = len(fake_encoder.seen)
    again = bitext_eval(wh, "minilm", path, "r2")
    assert len(fake_encoder.seen) == seen and again.sort("key")["value"].equals(rows.sort("key")["value"])
    assert wh.read("eval", "results").height == 5  # accuracy both ways + mean, F1 both ways
    path.write_text("deu\teng\n" + "".join(f"{a}\t{b}\n" for a, b in zip(src, reversed(tgt), strict=False)))
    assert bitext_eval(wh, "minilm", path, "r3")["value"].to_list() != rows["value"].to_list()  # new content


def test_transfer_eval_from_files_reports_left_out_rows(wh, tmp_path, fake_encoder):
    def write(name, rows):
        p = tmp_path / name
        p.write_text("sentence_A\tsentence_B\tentailment_judgment\n" + "".join("\t".join(r) + "\n" for r in rows))
        return p

    ent = [("a cat sits", "a cat sits", "ENTAILMENT"), ("dogs run fast", "dogs run fast", "ENTAILMENT")]
    con = [("a cat sits", "zzz qqq xx", "CONTRADICTION"), ("dogs run fast", "mmm ppp", "CONTRADICTION")]
    train = write("train.tsv", (ent + con) * 5 + [("", "x", "ENTAILMENT")])
    dev, test = write("dev.tsv", ent + con), write("test.tsv", ent + con)
    rows, bad = transfer_eval(wh, "minilm", "sick_e", train, {"en": dev}, {"en": test}, "r1")
    acc = rows.filter(pl.col("metric") == "accuracy")
    assert acc["lang_pair"].to_list() == ["en"] and acc["value"][0] == pytest.approx(100.0)
    assert [(b.line, b.reason) for b in bad[str(train)]] == [(22, "empty text in 'sentence_A'")]
    with pytest.raises(ValueError, match="give its kind"):
        transfer_eval(wh, "minilm", "my_task", train, {"en": dev}, {"en": test}, "r2")


def test_aspects_eval_reads_amr_metrics_and_needs_them(wh, fake_encoder):
    from amrsim.errors import AmrsimError
    from amrsim.metrics import metric_columns
    from amrsim.warehouse.keys import content_key

    texts = ["the cat sat", "a cat sat", "dogs bark", "the sun", "zebra", "cats sit"]
    keys = [content_key("sentence", "en", t) for t in texts]
    wh.upsert("d", "sentences", pl.DataFrame({"key": keys, "lang": "en", "text": texts, "status": "ok",
                                              "error": None}))
    with pytest.raises(AmrsimError, match="d/amr_metrics: fewer than 2 ok metric rows"):
        aspects_eval(wh, "minilm", "d", "r0")
    pairs = [(0, 1), (0, 2), (3, 4), (5, 1), (2, 4)]
    frames = [0.9, 0.1, 0.2, 0.8, 0.3]
    rows = [{"key": f"m{i}", "pair_key": f"p{i}", "item_id": str(i), "split": "test", "sentence1_key": keys[a],
             "sentence2_key": keys[b], "score": 1.0, **dict.fromkeys(metric_columns()), "frames": frames[i],
             "options": "{}", "status": "ok", "error": None, "seconds": 0.0, "graphs_md5": None,
             "bounded": None}
            for i, (a, b) in enumerate(pairs)]
    wh.upsert("d", "amr_metrics", pl.DataFrame(rows))
    out = aspects_eval(wh, "minilm", "d", "r1")
    assert out["lang_pair"].to_list() == ["frames"]
    enc = CountingEncoder()
    direct = cosine(enc.encode([texts[a] for a, _ in pairs]), enc.encode([texts[b] for _, b in pairs]))
    assert out["value"][0] == pytest.approx(correlations(direct, np.array(frames))["spearman"])


# --- the suite from a config, the report, the CLI ----------------------------------------------------------


def test_suite_runs_every_configured_evaluation_and_writes_the_report(tmp_path, write_tsv, fake_encoder):
    from amrsim.config import load_config
    from amrsim.stages.evaluate import run_suite
    from amrsim.warehouse import Warehouse

    write_tsv("sts_en.tsv", ["sentence1", "sentence2", "score"],
              [["the cat sat", "the cat sat", "5"], ["the cat sat", "a cat sat", "4"], ["a dog", "zzz", "0"]])
    write_tsv("sts_de.tsv", ["sentence1", "sentence2", "score"],
              [["die katze", "die katze", "5"], ["die katze", "eine katze", "4"], ["ein hund", "qqq", "0"]])
    (tmp_path / "tatoeba.fra-eng.tsv").write_text("fra\teng\nle chat\tthe cat\nun chien\ta dog\n")
    (tmp_path / "pipelines.yaml").write_text("""
warehouse: wh
default_pipeline: p
pipelines:
  p:
    datasets:
      sts: {path: sts_en.tsv, kind: pairs, split: test, translations: {de: {path: sts_de.tsv}}}
    evaluate:
      sts: {encoders: [minilm], datasets: [sts], lang_pairs: [en-en, de-de, en-de]}
      bitext: {encoders: [minilm], files: ["tatoeba.*.tsv"]}
""")
    cfg = load_config(tmp_path / "pipelines.yaml")
    wh = Warehouse(tmp_path / "wh")
    out = run_suite(wh, cfg.section("p"), ["minilm"])
    sts = out.tables["STS (x100)"]
    assert sorted(set(sts["lang_pair"])) == ["de-de", "en-de", "en-en"]
    assert set(out.tables["Bitext retrieval accuracy (x100)"]["lang_pair"]) == {"fra-eng"}
    html = out.report.html.read_text()
    assert "Leaderboard" in html and "minilm" in html and "data:image/png;base64," in html
    stored = wh.read("eval", "results")
    assert set(stored["task"]) == {"sts", "bitext"} and stored.height == 11  # 6 sts + 5 bitext
    again = run_suite(wh, cfg.section("p"), ["minilm"], report=False)
    assert wh.read("eval", "results").height == 11 and again.report is None  # nothing recomputed or appended


def _cli(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return amrsim_cli(*args, cwd=cwd, env={"PATH": "/usr/bin:/bin", "COLUMNS": "300"})


@pytest.mark.slow
def test_cli_unknown_encoder_and_mismatched_translation_file(tmp_path, write_tsv):
    (tmp_path / "pipelines.yaml").write_text("warehouse: wh\npipelines: {demo: {}}\n")
    en = write_tsv("a_en.tsv", ["sentence1", "sentence2", "score"], [["a", "b", "1"], ["c", "d", "2"]])
    de = write_tsv("a_de.tsv", ["sentence1", "sentence2", "score"], [["a", "b", "1"]])
    proc = _cli("evaluate", "bitext", "--encoder", "bert", "--file", str(en), cwd=tmp_path)
    assert proc.returncode == 2 and "--encoder: unknown encoder 'bert'; known encoders: minilm, muse" in proc.stderr
    proc = _cli("evaluate", "sts", "--encoder", "muse", "--file", str(en), "--translation", f"de={de}", cwd=tmp_path)
    assert proc.returncode == 2 and "translations.de.path has 1 rows but" in proc.stderr, proc.stderr
    proc = _cli("evaluate", "sts", "--encoder", "muse", "--file", str(en), "--translation", "de", cwd=tmp_path)
    assert proc.returncode == 2 and "expected LANG=PATH" in proc.stderr


def test_report_of_an_empty_warehouse_says_so(wh):
    paths = write_report(wh)
    assert "No results yet" in paths.html.read_text()


@pytest.mark.integration
@pytest.mark.slow
def test_cross_lingual_sts_from_row_aligned_files_reproduces_the_baseline(tmp_path):
    from tests.helpers import shared

    en, de = shared("stsb_multi_mt", "stsb_en_test.tsv"), shared("stsb_multi_mt", "stsb_de_test.tsv")
    (tmp_path / "pipelines.yaml").write_text("warehouse: wh\npipelines: {demo: {}}\n")
    proc = _cli("evaluate", "sts", "--encoder", "muse", "--file", str(en), "--translation", f"de={de}",
                "--lang-pairs", "de-de,en-de", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from amrsim.warehouse import Warehouse

    rows = Warehouse(tmp_path / "wh").read("eval", "results").filter(pl.col("metric") == "spearman")
    got = dict(zip(rows["lang_pair"], rows["value"], strict=True))
    assert got["de-de"] == pytest.approx(74.80, abs=0.1)  # ../shared/BASELINES.md, stsb_multi_mt de test
    assert 60 < got["en-de"] < got["de-de"]  # cross-lingual pairs: muse aligns languages, a little below mono


def test_bucc_eval_from_files_matches_direct_mining_and_is_reused(wh, tmp_path, fake_encoder):
    from amrsim.evaluate.bitext import bucc_scores
    from amrsim.stages.evaluate import bucc_eval

    def corpus(name, rows):
        (tmp_path / name).write_text("".join(f"{i}\t{t}\n" for i, t in rows))
        return tmp_path / name

    src = [("de-1", "the cat sat on the mat"), ("de-2", "dogs bark loudly"), ("de-3", "rain falls today"),
           ("de-4", "zebras run")]
    tgt = [("en-1", "the cat sat on a mat"), ("en-2", "dogs bark loud"), ("en-3", "snow falls today"),
           ("en-4", "quiet library"), ("en-5", "yellow boats")]
    gold = [("de-1", "en-1"), ("de-2", "en-2"), ("de-3", "en-3")]
    files = {"src_train": corpus("s.train", src), "tgt_train": corpus("t.train", tgt),
             "gold_train": corpus("g.train", gold), "src_test": corpus("s.test", src[::-1]),
             "tgt_test": corpus("t.test", tgt[::-1]), "gold_test": corpus("g.test", gold)}
    rows = bucc_eval(wh, "minilm", files, "de", "en", "r1")
    got = dict(zip(rows["metric"], rows["value"], strict=True))
    enc = CountingEncoder()

    def split(s, t):
        ids_s, ids_t = [i for i, _ in s], [i for i, _ in t]
        pairs = {(ids_s.index(a), ids_t.index(b)) for a, b in gold}
        return enc.encode([x for _, x in s]), enc.encode([x for _, x in t]), pairs

    direct = {x.metric: x.value for x in bucc_scores("minilm", "bucc", "de-en", split(src, tgt),
                                                      split(src[::-1], tgt[::-1]))}
    assert got == pytest.approx(direct) and got["f1"] is not None
    seen = len(fake_encoder.seen)
    assert bucc_eval(wh, "minilm", files, "de", "en", "r2").height == 4 and len(fake_encoder.seen) == seen
    with pytest.raises(ValueError, match="mining mode 'best' unknown"):
        bucc_eval(wh, "minilm", files, "de", "en", "r3", mode="best")


@pytest.mark.slow
def test_bitext_from_two_plain_files_equals_the_tsv_form_and_mismatches_are_rejected(wh, tmp_path, fake_encoder,
                                                                                     write_tsv):
    src, tgt = ["der hund", "die katze", "guten tag"], ["the dog", "the cat", "good day"]
    tsv = tmp_path / "tatoeba.deu-eng.tsv"
    tsv.write_text("deu\teng\n" + "".join(f"{a}\t{b}\n" for a, b in zip(src, tgt, strict=True)))
    (tmp_path / "tatoeba.deu-eng.deu").write_text("\n".join(src) + "\n")
    (tmp_path / "tatoeba.deu-eng.eng").write_text("\n".join(tgt) + "\n")
    plain = bitext_eval(wh, "minilm", tmp_path / "tatoeba.deu-eng.deu", "r1",
                        tgt_path=tmp_path / "tatoeba.deu-eng.eng", langs=("deu", "eng"))
    from_tsv = bitext_eval(wh, "minilm", tsv, "r2")
    assert set(plain["dataset"]) == {"tatoeba"}
    assert sorted(plain["value"].to_list()) == sorted(from_tsv["value"].to_list())
    (tmp_path / "short.eng").write_text("the dog\n")
    (tmp_path / "pipelines.yaml").write_text("warehouse: wh\npipelines: {demo: {}}\n")
    proc = _cli("evaluate", "bitext", "--encoder", "muse", "--src", str(tmp_path / "tatoeba.deu-eng.deu"), "--tgt",
                str(tmp_path / "short.eng"), "--src-lang", "deu", "--tgt-lang", "eng", cwd=tmp_path)
    assert proc.returncode == 2 and "has 3 lines but" in proc.stderr and "short.eng has 1 lines" in proc.stderr
    proc = _cli("evaluate", "bitext", "--encoder", "muse", "--src", "x.txt", cwd=tmp_path)
    assert proc.returncode == 2 and "need all of --src, --tgt, --src-lang and --tgt-lang" in proc.stderr


@pytest.mark.slow
def test_bitext_over_many_files_reports_progress_on_stderr_only(tmp_path):
    """A directory of Tatoeba files is minutes of work: the files done show on stderr (a line in a log), while
    --json keeps stdout one document."""
    (tmp_path / "pipelines.yaml").write_text("warehouse: wh\npipelines: {demo: {}}\n")
    for lang in ("deu", "fra", "spa"):
        (tmp_path / f"tatoeba.{lang}-eng.tsv").write_text(f"{lang}\teng\nein hund\ta dog\neine katze\ta cat\n")
    proc = run_cli(tmp_path, "evaluate", "bitext", "--encoder", "minilm", "--file", "tatoeba.*.tsv", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(json.loads(proc.stdout)["results"]) == 3 * 5
    progress = [line for line in proc.stderr.splitlines() if line.startswith("evaluate bitext with minilm: ")]
    assert progress and progress[-1].startswith("evaluate bitext with minilm: 3/3 files (100%)"), proc.stderr
