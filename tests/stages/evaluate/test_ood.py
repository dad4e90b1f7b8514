"""Out-of-distribution protocol on small STSb- and SICK-shaped files: the derived splits (genres held out, STSb <->
SICK, scores scaled, bad genres kept as failed rows, rebuilds write nothing), the base comparison and its flag in the
console table and the HTML report, the CLI, and PEAR trained on one split."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import polars as pl
import pytest

from amrsim.config import load_config
from amrsim.errors import ConfigError, InputError
from amrsim.evaluate.ood import SPLITS, genre_of, ood_table
from amrsim.stages.evaluate.ood import derive_split
from amrsim.stages.evaluate.results import RESULT_SCHEMA
from amrsim.warehouse import Warehouse
from tests.helpers import build_tiny_bert, run_cli

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = "the a cat dog bird man woman runs sleeps eats plays red blue green big small".split()
STSB_HEADER = ["genre", "source_file", "year", "sid", "score", "sentence1", "sentence2"]
SICK_HEADER = ["pair_id", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"]

CONFIG = """
default_pipeline: ood
warehouse: wh
pipelines:
  ood:
    datasets:
      stsb_en_train: {{path: stsb_en_train.tsv, kind: pairs, split: train, score_range: [0, 5]}}
      stsb_en_dev: {{path: stsb_en_dev.tsv, kind: pairs, split: dev, score_range: [0, 5]}}
      stsb_en_test: {{path: stsb_en_test.tsv, kind: pairs, split: test, score_range: [0, 5]}}
      sick_train: {{path: sick_train.tsv, kind: pairs, split: train, score_range: [1, 5], columns: {sick}}}
      sick_dev: {{path: sick_dev.tsv, kind: pairs, split: dev, score_range: [1, 5], columns: {sick}}}
      sick_test: {{path: sick_test.tsv, kind: pairs, split: test, score_range: [1, 5], columns: {sick}}}
    train:
      - method: pear
        params: {params}
"""
SICK_COLUMNS = "{id: pair_id, sentence1: sentence_A, sentence2: sentence_B, score: relatedness_score}"


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6)))


def stsb_rows(rng: random.Random, genres: dict[str, int]) -> list[list[str]]:
    """`n` rows per raw genre label, in a shuffled order; the sentence says its genre (tests read it back)."""
    rows = []
    for genre, n in genres.items():
        rows += [[genre, "src", "2012", f"{i:04d}", f"{rng.uniform(0, 5):.2f}", f"{genre} {sentence(rng)}",
                  sentence(rng)] for i in range(n)]
    rng.shuffle(rows)
    return rows


@pytest.fixture
def project(tmp_path, write_config, write_tsv):
    rng = random.Random(0)
    # STSb train spells the forum genre `main-forum`, dev and test `main-forums`
    write_tsv("stsb_en_train.tsv", STSB_HEADER,
              stsb_rows(rng, {"main-captions": 6, "main-forum": 5, "main-news": 7, "main-poetry": 1}))
    write_tsv("stsb_en_dev.tsv", STSB_HEADER, stsb_rows(rng, {"main-captions": 4, "main-forums": 4, "main-news": 4}))
    write_tsv("stsb_en_test.tsv", STSB_HEADER, stsb_rows(rng, {"main-captions": 5, "main-forums": 6, "main-news": 4}))
    for name, n in (("sick_train", 12), ("sick_dev", 6), ("sick_test", 9)):
        write_tsv(f"{name}.tsv", SICK_HEADER, [[str(i + 1), f"sick {sentence(rng)}", sentence(rng),
                                                f"{rng.uniform(1, 5):.1f}", "NEUTRAL"] for i in range(n)])

    def make(**params):
        params = params or {"ood_split": "loo-forums"}
        cfg = load_config(write_config(CONFIG.format(sick=SICK_COLUMNS, params=json.dumps(params))))
        return cfg, Warehouse(cfg.warehouse_root)

    return make


def first_word(texts: pl.Series) -> set[str]:
    return {t.split()[0] for t in texts.to_list()}


def test_genre_names_as_the_benchmark_spells_them():
    assert [genre_of(g) for g in ("main-captions", "main-forum", "main-forums", "main-news", " MAIN-NEWS ")] == [
        "captions", "forums", "forums", "news", "news"]
    assert genre_of("main-poetry") is None and genre_of("") is None and genre_of(None) is None


def test_leave_one_genre_out_holds_the_genre_out_of_train_dev_and_in_distribution_test(project):
    cfg, wh = project()
    run = derive_split(wh, cfg.section("ood"), "loo-forums", "r1")
    pairs = wh.read("ood_loo_forums", "pairs")
    ok = pairs.filter(pl.col("status") == "ok")
    by_split = {s: first_word(ok.filter(pl.col("split") == s)["sentence1"]) for s in ("train", "dev", "test", "ood")}
    assert by_split == {"train": {"main-captions", "main-news"}, "dev": {"main-captions", "main-news"},
                        "test": {"main-captions", "main-news"}, "ood": {"main-forums"}}
    counts = dict(ok.group_by("split").len().iter_rows())
    assert counts == {"train": 13, "dev": 8, "test": 9, "ood": 6}
    # a genre that is none of the three is kept as a failed row naming it, never dropped or guessed
    failed = pairs.filter(pl.col("status") != "ok")
    assert failed.height == 1 and failed["split"][0] == "train"
    assert "genre 'main-poetry' is none of captions, forums, news" in failed["error"][0]
    assert failed["source_file"][0] == "stsb_en_train.tsv" and failed["source_line"][0] > 1
    assert run.rows_failed == 1 and run.rows_in == pairs.height
    # gold scaled to 0-1 by STSb's range 0-5
    raw = pl.read_csv(cfg.path.parent / "stsb_en_test.tsv", separator="\t", quote_char=None)
    expected = sorted((raw.filter(pl.col("genre") == "main-forums")["score"] / 5).to_list())
    assert sorted(ok.filter(pl.col("split") == "ood")["score"].to_list()) == pytest.approx(expected)


def test_derived_splits_are_reproducible_and_a_rebuild_writes_nothing(project, tmp_path):
    cfg, wh = project()
    derive_split(wh, cfg.section("ood"), "loo-news", "r1")
    version = wh.version("ood_loo_news", "pairs")
    again = derive_split(wh, cfg.section("ood"), "loo-news", "r2")
    assert again.rows_computed == 0 and again.outputs == [] and wh.version("ood_loo_news", "pairs") == version
    other = Warehouse(tmp_path / "elsewhere")
    derive_split(other, cfg.section("ood"), "loo-news", "r3")
    assert set(other.read("ood_loo_news", "pairs")["key"]) == set(wh.read("ood_loo_news", "pairs")["key"])


def test_stsb_and_sick_each_the_others_out_of_distribution_test(project):
    cfg, wh = project()
    derive_split(wh, cfg.section("ood"), "stsb-to-sick", "r1")
    derive_split(wh, cfg.section("ood"), "sick-to-stsb", "r1")
    to_sick = wh.read("ood_stsb_to_sick", "pairs").filter(pl.col("status") == "ok")
    to_stsb = wh.read("ood_sick_to_stsb", "pairs").filter(pl.col("status") == "ok")
    # every STSb row, whatever its genre (the poetry row too): genres matter only when one is held out
    assert dict(to_sick.group_by("split").len().iter_rows()) == {"train": 19, "dev": 12, "test": 15, "ood": 9}
    assert first_word(to_sick.filter(pl.col("split") == "ood")["sentence1"]) == {"sick"}
    assert "sick" not in first_word(to_sick.filter(pl.col("split") != "ood")["sentence1"])
    assert dict(to_stsb.group_by("split").len().iter_rows()) == {"train": 12, "dev": 6, "test": 9, "ood": 15}
    sick = pl.read_csv(cfg.path.parent / "sick_train.tsv", separator="\t", quote_char=None)
    assert sorted(to_stsb.filter(pl.col("split") == "train")["score"].to_list()) == pytest.approx(
        sorted(((sick["relatedness_score"] - 1) / 4).to_list()))  # SICK's range is 1-5


def test_a_stsb_file_without_genres_is_a_one_line_error_naming_it(project, write_tsv):
    cfg, wh = project()
    write_tsv("stsb_en_dev.tsv", ["score", "sentence1", "sentence2"], [["1.0", "a cat", "a dog"]])
    with pytest.raises(InputError, match=r"stsb_en_dev\.tsv:1: header lacks column\(s\) \['genre'\]"):
        derive_split(wh, cfg.section("ood"), "loo-captions", "r1")
    assert not wh.exists("ood_loo_captions", "pairs")  # nothing written
    with pytest.raises(ConfigError, match="unknown out-of-distribution split 'loo-poetry'"):
        derive_split(wh, cfg.section("ood"), "loo-poetry", "r1")


def result_rows(values: dict[tuple[str, str, str], float | None]) -> pl.DataFrame:
    now = datetime.now(UTC)
    rows = [{"key": f"k{i}", "run_id": "r", "created_at": now, "task": "sts", "model": model, "dataset": dataset,
             "split": split, "lang_pair": "en-en", "metric": "spearman", "value": value, "n": 10,
             "config_hash": "c", "model_requested": model}
            for i, ((dataset, model, split), value) in enumerate(values.items())]
    return pl.DataFrame(rows, schema=RESULT_SCHEMA)


def test_a_model_below_its_base_is_flagged_where_it_is_below():
    results = result_rows({
        ("ood_loo_forums", "minilm", "test"): 80.0, ("ood_loo_forums", "minilm", "ood"): 81.0,
        ("ood_loo_forums", "pear:a", "test"): 85.0, ("ood_loo_forums", "pear:a", "ood"): 64.0,
        ("ood_stsb_to_sick", "minilm", "test"): 82.0, ("ood_stsb_to_sick", "minilm", "ood"): 77.0,
        ("ood_stsb_to_sick", "pear:a", "test"): 84.0, ("ood_stsb_to_sick", "pear:a", "ood"): 78.0,
        ("ood_loo_news", "pear:b", "test"): 70.0, ("ood_loo_news", "pear:b", "ood"): 60.0,
        ("stsb_en_test", "pear:a", "test"): 10.0,  # not a protocol dataset: not in the table
    })
    table = ood_table(results, {"pear:a": "minilm", "pear:b": "minilm", "minilm": None})
    got = {(r["split"], r["model"]): r for r in table.iter_rows(named=True)}
    assert set(got) == {("loo-forums", "minilm"), ("loo-forums", "pear:a"), ("loo-news", "pear:b"),
                        ("stsb-to-sick", "minilm"), ("stsb-to-sick", "pear:a")}
    assert got[("loo-forums", "pear:a")]["below_base"] == "ood"
    assert got[("loo-forums", "pear:a")]["delta ood"] == pytest.approx(-17.0)
    assert got[("loo-forums", "pear:a")]["delta in"] == pytest.approx(5.0)
    assert got[("stsb-to-sick", "pear:a")]["below_base"] == ""  # above its base on both
    assert got[("loo-forums", "minilm")]["below_base"] is None  # a base has nothing to be compared with
    assert got[("loo-news", "pear:b")]["below_base"] is None  # its base was not evaluated there
    assert got[("loo-news", "pear:b")]["base in"] is None


def test_report_shows_the_protocol_and_flags_a_model_below_its_base(tmp_path):
    from amrsim.stages.evaluate.report import render_report

    results = result_rows({
        ("ood_loo_forums", "minilm", "test"): 80.0, ("ood_loo_forums", "minilm", "ood"): 81.0,
        ("ood_loo_forums", "pear:a", "test"): 85.0, ("ood_loo_forums", "pear:a", "ood"): 64.0,
        ("ood_loo_news", "minilm", "test"): 80.0, ("ood_loo_news", "minilm", "ood"): 70.0,
        ("ood_loo_news", "pear:c", "test"): 82.0, ("ood_loo_news", "pear:c", "ood"): 71.0,
    })
    paths = render_report(results, pl.DataFrame(), tmp_path / "reports",
                          ood_bases={"pear:a": "minilm", "pear:c": "minilm"})
    page = paths.html.read_text(encoding="utf-8")
    section = page[page.index('id="ood"'):]
    assert "BELOW BASE: ood" in section and section.count("BELOW BASE") == 1
    assert "STSb captions+news -&gt; STSb forums" in section
    md = paths.markdown.read_text(encoding="utf-8")
    assert "BELOW BASE: ood" in md


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), WORDS + ["sick", "main-captions", "main-forum",
                                                                             "main-forums", "main-news"])


def test_cli_scores_model_and_base_side_by_side_and_stores_the_rows(project, tiny_bert):
    cfg, wh = project()
    enc = f"hf:{tiny_bert}#mean"
    proc = run_cli(cfg.path.parent, "evaluate", "ood", "--encoder", enc, "--base", "minilm", "--split", "loo-news",
                   "--split", "stsb-to-sick", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Out-of-distribution protocol" in proc.stdout
    assert "loo-news: STSb captions+forums -> STSb news" in proc.stdout
    assert "stsb-to-sick: STSb -> SICK-R" in proc.stdout and "loo-forums" not in proc.stdout
    results = wh.read("eval", "results")
    stored = results.filter(pl.col("dataset").is_in(["ood_loo_news", "ood_stsb_to_sick"]))
    assert set(stored["model"]) == {"minilm", enc} and set(stored["split"]) == {"test", "ood"}
    assert stored.height == 2 * 2 * 2 * 2  # splits x models x (test, ood) x (spearman, pearson)
    table = ood_table(results, {enc: "minilm", "minilm": None})
    flagged = table.filter(pl.col("model") == enc)
    assert flagged.height == 2 and flagged["below_base"].is_not_null().all()
    flags = [f for f in flagged["below_base"].to_list() if f]  # the console shows the verdicts the table computes
    assert proc.stdout.count("BELOW BASE") == len(flags)
    assert all(f"BELOW BASE: {f}" in proc.stdout for f in flags)

    proc = run_cli(cfg.path.parent, "evaluate", "ood", "--encoder", "loo-poetry=minilm")
    assert proc.returncode == 2 and "unknown out-of-distribution split 'loo-poetry'" in proc.stderr


def test_pear_trains_on_one_splits_train_pairs_and_its_fusion_with_the_base(project, tiny_bert, monkeypatch):
    import numpy as np

    from amrsim.encoders import base_for, find_trained
    from amrsim.evaluate.sts import cosine
    from amrsim.methods import method_params
    from amrsim.methods.loaders import load_encoder
    from amrsim.stages.evaluate import is_cross_encoder
    from amrsim.stages.evaluate.ood import trained_on
    from amrsim.stages.train import train_method

    base = f"hf:{tiny_bert}#mean"
    params = {"ood_split": "loo-captions", "base_model": f"hf:{tiny_bert}", "lr": 1e-3, "epochs": 1,
              "batch_size": 8, "device": "cpu", "fused_with": base, "fused_weight": 0.25}
    cfg, wh = project(**params)
    summary = train_method(cfg.section("ood"), "pear",
                           method_params("pear", cfg.project.pipelines["ood"].train[0].params),
                           "p1")
    assert summary["status"] == "ok" and summary["models"] == ["pear:p1", "pear_fused:p1"]
    pairs = wh.read("ood_loo_captions", "pairs").filter(pl.col("status") == "ok")
    meta = find_trained("pear:p1", wh.models_root).meta
    assert meta["data"]["datasets"] == ["ood_loo_captions"] and meta["data"]["train_split"] == "train"
    assert meta["metrics"]["gold_pairs"] == pairs.filter(pl.col("split") == "train").height == 12
    assert meta["data"]["dev_pairs"] == pairs.filter(pl.col("split") == "dev").height
    assert trained_on("pear:p1", wh.models_root) == ["ood_loo_captions"]
    assert base_for("pear:p1", wh.models_root) == f"hf:{tiny_bert}" and base_for("minilm") is None

    # pear_fused:p1 = 0.25 z(PEAR) + 0.75 z(base cosine), z-scored on the dev pairs; a model of its own
    fused = find_trained("pear_fused:p1", wh.models_root).meta
    assert fused["pear"] == "pear:p1" and fused["base_model"] == base and fused["metrics"]["fit_pairs"] == 8
    assert is_cross_encoder("pear_fused:p1", wh.models_root) and trained_on("pear_fused:p1", wh.models_root) == [
        "ood_loo_captions"]
    assert base_for("pear_fused:p1", wh.models_root) == base
    dev = pairs.filter(pl.col("split") == "dev")
    t1, t2 = dev["sentence1"].to_list(), dev["sentence2"].to_list()
    pear = load_encoder("pear:p1", device="cpu", models_root=wh.models_root).score(t1, t2)
    encoder = load_encoder(base, device="cpu")
    cos = cosine(encoder.encode(t1), encoder.encode(t2))
    f = fused["fusion"]
    # fitted on the dev pairs' scores (a tiny random model's scores barely vary, so compare relatively)
    assert [f["pear_mean"], f["pear_std"], f["base_mean"], f["base_std"]] == pytest.approx(
        [pear.mean(), pear.std(), cos.mean(), cos.std()], rel=1e-2)
    pear, cos = pear.astype(np.float64), cos.astype(np.float64)  # z-scores of barely varying scores: float64
    expected = 0.25 * (pear - f["pear_mean"]) / f["pear_std"] + 0.75 * (cos - f["base_mean"]) / f["base_std"]
    got = load_encoder("pear_fused:p1", device="cpu", models_root=wh.models_root).score(t1, t2)
    assert np.asarray(got) == pytest.approx(expected, abs=1e-4)

    # the fusion scores with the loaded PEAR model, which remembers its last pairs: evaluating pear and pear_fused
    # runs the network once; other pairs run it again, and a caller changing a result changes no later one
    from amrsim.methods.pear import PearCrossEncoder

    shared = load_encoder("pear:p1", device="cpu", models_root=wh.models_root)
    calls, predict = [], PearCrossEncoder.predict
    monkeypatch.setattr(PearCrossEncoder, "predict", lambda *a, **k: calls.append(len(a[1])) or predict(*a, **k))
    first = shared.score(t1, t2)
    first[:] = 99.0
    assert load_encoder("pear_fused:p1", device="cpu", models_root=wh.models_root).score(t1, t2) == pytest.approx(
        got) and calls == []
    assert shared.score(t1, t2) == pytest.approx(pear) and calls == []
    assert shared.score(t2, t1) == pytest.approx(pear, abs=1e-5) and set(calls) == {len(t2)}  # symmetric: same


def test_fusion_needs_two_varying_scores():
    import numpy as np

    from amrsim.methods.pear import fit_fusion

    with pytest.raises(ValueError, match="constant"):
        fit_fusion(np.array([0.5, 0.5, 0.5]), np.array([0.1, 0.2, 0.3]), "minilm", 0.5)
    with pytest.raises(ValueError, match="at least 2 pairs"):
        fit_fusion(np.array([0.5]), np.array([0.1]), "minilm", 0.5)
    fusion = fit_fusion(np.array([0.0, 1.0]), np.array([0.2, 0.4]), "minilm", 1.0)
    assert fusion.combine(np.array([0.0, 1.0]), np.array([9.0, -9.0])) == pytest.approx([-1.0, 1.0])


def test_pear_ood_split_params_are_checked(project):
    from amrsim.methods import method_params

    with pytest.raises(ValueError, match="ood_split 'loo-poetry' is not a split"):
        method_params("pear", {"ood_split": "loo-poetry"})
    with pytest.raises(ValueError, match="ood_split replaces datasets"):
        method_params("pear", {"ood_split": "loo-news", "datasets": ["x"]})
    with pytest.raises(ValueError, match=r"datasets: give at least one pairs dataset \(or ood_split\)"):
        method_params("pear", {})
    assert set(SPLITS) == {"loo-captions", "loo-forums", "loo-news", "stsb-to-sick", "sick-to-stsb"}


def test_a_model_is_compared_with_the_base_its_model_json_names(tmp_path):
    """Each method names its base under its own key (meaning: `base_encoder`, DuEAM: `learner_name`): a meaning
    model is compared with muse, not with the default minilm."""
    import json

    from amrsim.encoders import base_for

    for method, meta in {"meaning": {"base_encoder": "muse"}, "dueam": {"learner_name": "hf:some/model"},
                         "s3bert": {"base_model": "/local/dir"}}.items():
        (tmp_path / method / "r1").mkdir(parents=True)
        (tmp_path / method / "r1" / "model.json").write_text(json.dumps(meta))
    assert base_for("meaning:r1", tmp_path) == "muse"
    assert base_for("dueam:r1", tmp_path) == "hf:some/model"
    assert base_for("s3bert:r1", tmp_path) == "minilm"  # a local directory is no encoder name: the default base


def test_the_note_names_what_a_model_trained_on_and_offers_ood_split_only_where_the_method_has_it(tmp_path):
    from amrsim.stages.evaluate.ood import ood_note, trained_on

    def run(method: str, data: dict) -> None:
        (tmp_path / method / "r1").mkdir(parents=True)
        (tmp_path / method / "r1" / "model.json").write_text(json.dumps({"method": method, "data": data}))

    # meaning records its stage-1 files dataset and stage-2 STS datasets apart from `datasets`
    run("meaning", {"datasets": [], "files": ["tatoeba.*-eng.tsv"], "files_dataset": "tatoeba",
                    "sts_datasets": ["stsb_multi_train", "stsb_multi_dev"]})
    run("mse_amr", {"datasets": ["sick_nli_train"]})
    run("pear", {"datasets": ["stsb_en_train"]})
    run("dueam", {"pairs": 10})  # no datasets recorded: unknown
    assert trained_on("meaning:r1", tmp_path) == ["tatoeba", "stsb_multi_train", "stsb_multi_dev"]
    assert trained_on("dueam:r1", tmp_path) is None
    meaning = ood_note("loo-news", "meaning:r1", trained_on("meaning:r1", tmp_path), tmp_path)
    assert meaning == ("loo-news: meaning:r1 trained on tatoeba, stsb_multi_train, stsb_multi_dev, not on "
                       "ood_loo_news: its 'ood' score is not out-of-distribution")
    assert ood_note("loo-news", "mse_amr:r1", [], tmp_path).startswith(
        "loo-news: mse_amr:r1 trained on no warehouse dataset, not on ood_loo_news")
    assert ood_note("loo-news", "pear:r1", ["stsb_en_train"], tmp_path).endswith(
        "(train with --param ood_split=loo-news)")
