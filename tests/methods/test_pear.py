"""PEAR cross-encoder: BCE on 0-1 scores, AdamW groups and warmup, kNN weak labels from the cross-encoder, Optuna
study resume (and a study with no completed trial), then train -> `amrsim score` -> `amrsim evaluate sts` on a tiny
randomly initialised BERT."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
import torch
from typer.testing import CliRunner

from amrsim.augment.knn import Scorer, augment_pairs
from amrsim.config import load_config
from amrsim.encoders import find_trained
from amrsim.errors import ConfigError
from amrsim.evaluate.sts import correlations
from amrsim.methods import method_params
from amrsim.methods.loaders import load_encoder
from amrsim.methods.pear import (
    BaseOffset,
    Params,
    PearCrossEncoder,
    base_cosines,
    base_targets,
    bce_loss,
    both_orders,
    cross_encoder_scorer,
    fit_pear,
    gold_scale_line,
    length_batches,
    normalise_scores,
    on_gold_scale,
    start_from_base,
)
from amrsim.methods.training import linear_warmup, param_groups
from amrsim.stages.evaluate import is_cross_encoder
from amrsim.stages.ingest import ingest_stage
from amrsim.stages.train import train_method
from amrsim.stages.train.pear import best_or_none, open_study, run_search, trials_frame
from amrsim.warehouse import Warehouse
from tests.helpers import ROOT, build_tiny_bert

pytestmark = pytest.mark.usefixtures("one_thread")

COLOURS = ["red", "blue", "green", "black"]
ANIMALS = ["cat", "dog", "horse", "bird"]
VERBS = ["runs", "sleeps", "eats", "jumps"]
GERMAN = ["die", "katze", "hund", "läuft", "schläft"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    """A randomly initialised 2-layer BERT (hidden 32) with a word-level WordPiece vocab, as a transformers dir."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), ["the", *COLOURS, *ANIMALS, *VERBS, *GERMAN])


def hyper(**settings) -> Params:
    """PEAR's params for a call of the core on the CPU (the datasets are the stage's business)."""
    return Params(datasets=["toy"], device="cpu", **settings)


def toy(seed: int, n: int) -> tuple[list[str], list[str], np.ndarray]:
    """'the <colour> <animal> <verb>' pairs; gold 0-5 = 5/3 x (shared colour, animal, verb)."""
    rng = np.random.default_rng(seed)
    t1, t2, y = [], [], []
    for _ in range(n):
        a = rng.integers(4, size=3)
        same = rng.random(3) < 0.5
        b = np.where(same, a, (a + rng.integers(1, 4, size=3)) % 4)
        t1.append(f"the {COLOURS[a[0]]} {ANIMALS[a[1]]} {VERBS[a[2]]}")
        t2.append(f"the {COLOURS[b[0]]} {ANIMALS[b[1]]} {VERBS[b[2]]}")
        y.append(5.0 * same.sum() / 3)
    return t1, t2, np.array(y)


def cosines(biencoder: str, pairs: pl.DataFrame) -> np.ndarray:
    """The bi-encoder's cosine of each pair, as the stage computes it."""
    encoder = load_encoder(biencoder, device="cpu")
    return base_cosines(encoder, pairs["sentence1"].to_list(), pairs["sentence2"].to_list())


# ---------------------------------------------------------------------------------------------------- loss, targets


def test_scores_normalise_to_unit_range_by_the_dataset_range():
    assert normalise_scores([0.0, 2.5, 5.0], 0, 5).tolist() == [0.0, 0.5, 1.0]
    assert normalise_scores([1.0, 3.0, 5.0], 1, 5).tolist() == [0.0, 0.5, 1.0]  # SICK: 1-5
    assert normalise_scores([-1.0, 6.0], 0, 5).tolist() == [0.0, 1.0]  # clipped
    with pytest.raises(ValueError, match="empty"):
        normalise_scores([1.0], 2, 2)
    with pytest.raises(ValueError, match="NaN"):
        normalise_scores([1.0, float("nan")], 0, 5)


def test_bce_with_logits_on_soft_targets_by_hand():
    z = torch.tensor([0.0, math.log(3.0)], requires_grad=True)  # sigmoid: 1/2 and 3/4
    t = torch.tensor([0.5, 1.0])
    loss = bce_loss(z, t)
    # row 1: -(1/2) log(1/2) - (1/2) log(1/2) = log 2; row 2: -log(3/4) = log(4/3)
    assert float(loss.detach()) == pytest.approx((math.log(2) + math.log(4 / 3)) / 2, abs=1e-6)
    loss.backward()
    # d/dz mean BCE = (sigmoid(z) - t) / n: (1/2 - 1/2) / 2 = 0 and (3/4 - 1) / 2 = -1/8
    assert z.grad.tolist() == pytest.approx([0.0, -0.125], abs=1e-6)


def test_no_weight_decay_on_bias_and_layernorm(tiny_bert):
    model = PearCrossEncoder(tiny_bert, device="cpu")
    decay, plain = param_groups(model.model, 0.01)
    assert decay["weight_decay"] == 0.01 and plain["weight_decay"] == 0.0
    names = {n for n, _ in model.model.named_parameters()}
    assert set(decay["names"]) | set(plain["names"]) == names
    assert not set(decay["names"]) & set(plain["names"])
    assert all("bias" in n or "LayerNorm" in n for n in plain["names"])
    assert not any("bias" in n or "LayerNorm" in n for n in decay["names"])
    assert {"classifier.weight", "bert.embeddings.word_embeddings.weight"} <= set(decay["names"])
    assert {"classifier.bias", "bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.bias"} <= set(
        plain["names"])


def test_warmup_is_ten_percent_then_linear_decay():
    total = 100
    warmup = hyper().warmup_steps(total)
    assert warmup == 10 and hyper().warmup_steps(7) == 1  # 10%, rounded up
    factor = linear_warmup(warmup, total)
    assert [factor(s) for s in (0, 5, 10, 55, 100)] == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0])
    # as the optimizer sees it
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == 0.0 and lrs[5] == pytest.approx(5e-4)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3)


def test_length_batches_cover_every_row_once_and_sort_within_buckets():
    lengths = np.random.default_rng(0).integers(5, 120, size=103)
    batches = length_batches(lengths, 8, np.random.default_rng(1), bucket=3)
    assert len(batches) == math.ceil(103 / 8)
    assert sorted(np.concatenate(batches).tolist()) == list(range(103))
    assert sum(len(b) < 8 for b in batches) == 1  # 103 = 12 x 8 + 7
    assert all((np.diff(lengths[b]) >= 0).all() for b in batches)  # slices of a length-sorted bucket
    padded = sum(int(lengths[b].max()) * len(b) for b in batches)
    order = np.random.default_rng(1).permutation(103)
    random_padded = sum(int(lengths[order[i:i + 8]].max()) * len(order[i:i + 8]) for i in range(0, 103, 8))
    assert padded < random_padded


# ---------------------------------------------------------------------------------------------------- weak labels


def test_cross_encoder_scorer_labels_knn_pairs(tiny_bert):
    model = PearCrossEncoder(tiny_bert, device="cpu")
    texts = [f"the {c} {a} runs" for c in COLOURS for a in ANIMALS[:2]]
    scorer = cross_encoder_scorer(model, texts, "tiny")
    assert isinstance(scorer, Scorer)
    pairs = [(0, 1), (2, 5), (7, 3)]
    labels = scorer.score(pairs)
    expected = model.predict([texts[i] for i, _ in pairs], [texts[j] for _, j in pairs])
    assert labels == pytest.approx(expected, abs=1e-6) and ((labels > 0) & (labels < 1)).all()
    # inside the kNN augmentation: every silver pair's weak label is the cross-encoder's sigmoid of that pair
    vectors = np.random.default_rng(0).normal(size=(len(texts), 8))
    keys = [f"k{i:02d}" for i in range(len(texts))]
    silver = augment_pairs(keys, vectors, 2, scorer=scorer)
    assert silver.height and (silver["status"] == "ok").all() and set(silver["scorer"]) == {"cross-encoder:tiny"}
    index = {k: i for i, k in enumerate(keys)}
    direct = model.predict([texts[index[k]] for k in silver["sentence1_key"]],
                           [texts[index[k]] for k in silver["sentence2_key"]])
    assert silver["weak_label"].to_numpy() == pytest.approx(direct, abs=1e-6)


def test_symmetric_prediction_is_the_mean_of_both_orders(tiny_bert):
    model = PearCrossEncoder(tiny_bert, device="cpu")
    a, b = ["the red cat runs", "the dog", "the blue bird eats"], ["the cat", "a green dog sleeps", "the bird"]
    forward, backward = model.predict(a, b), model.predict(b, a)
    assert np.abs(forward - backward).max() > 1e-7  # the model reads one order: the two differ
    assert model.predict(a, b, symmetric=True) == pytest.approx((forward + backward) / 2, abs=1e-6)
    assert model.predict(b, a, symmetric=True) == pytest.approx(model.predict(a, b, symmetric=True), abs=1e-6)


def test_resampling_labels_with_the_weak_model_and_adds_silver_pairs(tiny_bert):
    t1, t2, y = toy(0, 12)
    calls = []

    def augment(model, k):
        calls.append((model, k))
        s = ["the red cat runs", "the blue dog sleeps"]
        labels = model.predict(s, s[::-1]) if model is not None else np.array([0.3, 0.3])
        return s, s[::-1], labels

    target = normalise_scores(y, 0, 5)
    model, info = fit_pear(tiny_bert, t1, t2, target, hyper(lr=1e-3, epochs=1, e_weak=1, k=2, batch_size=4),
                           augment=augment)
    assert len(calls) == 1 and calls[0][0] is model and calls[0][1] == 2  # the cross-encoder after E_weak epochs
    assert info["silver_pairs"] == 2 and info["train_rows"] == 14
    assert [h["phase"] for h in info["history"]] == ["weak", "main"]
    assert info["history"][1]["steps"] == 4  # ceil(14 / 4): silver pairs are trained on
    calls.clear()
    _, info = fit_pear(tiny_bert, t1, t2, target, hyper(lr=1e-3, epochs=1, e_weak=0, k=1, batch_size=4),
                       augment=augment)
    assert calls == [(None, 1)]  # E_weak = 0: no cross-encoder yet, the augmenter falls back to the bi-encoder
    _, info = fit_pear(tiny_bert, t1, t2, target, hyper(lr=1e-3, epochs=1, k=0, batch_size=4), augment=augment)
    assert info["silver_pairs"] == 0 and len(calls) == 1  # k = 0: no re-sampling


def test_both_orders_trains_every_gold_and_silver_pair_swapped(tiny_bert):
    t1, t2, y = both_orders(["a b", "c"], ["d", "e f"], np.array([0.2, 0.9]))
    assert (t1, t2) == (["a b", "d", "c", "e f"], ["d", "a b", "e f", "c"])
    assert y.tolist() == pytest.approx([0.2, 0.2, 0.9, 0.9])
    g1, g2, gy = toy(0, 12)

    def augment(model, k):
        return ["the red cat runs", "the blue dog"], ["the blue dog", "the cat"], np.array([0.4, 0.6])

    _, info = fit_pear(tiny_bert, g1, g2, normalise_scores(gy, 0, 5),
                       hyper(lr=1e-3, epochs=1, e_weak=1, k=1, batch_size=4, both_orders=True),
                       augment=augment)
    assert info["gold_pairs"] == 12 and info["silver_pairs"] == 2 and info["train_rows"] == 28
    assert [h["steps"] for h in info["history"]] == [6, 7]  # ceil(24 / 4) weak, ceil(28 / 4) main


def test_a_stopped_run_resumes_from_its_checkpoint_to_the_same_weights(tiny_bert, tmp_path):
    """`max_steps` stops either phase with a checkpoint (weights, optimizer, scheduler, RNG; the silver pairs in the
    main phase); resuming ends with the weights of an uninterrupted run, without labelling the silver pairs again."""
    t1, t2, y = toy(0, 12)
    calls = []

    def augment(model, k):
        calls.append(k)
        s = ["the red cat runs", "the blue dog sleeps", "the green bird eats"]
        return s, s[::-1], model.predict(s, s[::-1])

    def fit(name, max_steps=None):
        return fit_pear(tiny_bert, t1, t2, normalise_scores(y, 0, 5), hyper(lr=1e-3, epochs=2, e_weak=1, k=1,
                        batch_size=4, max_steps=max_steps), augment=augment, out_dir=tmp_path / name)

    torch.manual_seed(0)  # the new head's initial weights
    whole, info = fit("whole")
    assert info["completed"] and info["steps"] == 11 and info["resumed_from"] is None  # 3 weak + 2 x 4 main steps
    whole_history = info["history"]
    torch.manual_seed(0)
    for max_steps, steps in ((2, 2), (5, 5), (None, 11)):  # stopped in the weak phase, then in the main phase
        resumed, info = fit("parts", max_steps)
        assert info["completed"] == (max_steps is None) and info["steps"] == steps
    assert info["resumed_from"] == 5 and calls == [1, 1]
    # the uninterrupted run's history: a stop between reports adds no entry
    assert [h["phase"] for h in info["history"]] == ["weak", "main", "main"] and info["history"] == whole_history
    assert sum(h["steps"] for h in info["history"]) == 11
    weights = resumed.model.state_dict()
    assert all(torch.equal(tensor, weights[name]) for name, tensor in whole.model.state_dict().items())


# ---------------------------------------------------------------------------------------------------- pipeline


CONFIG = """
default_pipeline: toy
warehouse: warehouse
run_dir: .amrsim
pipelines:
  toy:
    datasets:
      toy_train: {{path: train.tsv, kind: pairs, split: train, score_range: [0, 5], columns: {{lang: lang}}}}
      toy_dev: {{path: dev.tsv, kind: pairs, split: dev, score_range: [0, 5], columns: {{lang: lang}}}}
      toy_other: {{path: test.tsv, kind: pairs, split: test, score_range: [0, 5], columns: {{lang: lang}}}}
    train:
      - method: pear
        params: {params}
"""


def write_pairs(path, rows: list[tuple[str, str, float, str]]) -> None:
    lines = ["sentence1\tsentence2\tscore\tlang"] + [f"{a}\t{b}\t{s:.4f}\t{lang}" for a, b, s, lang in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def project(tmp_path, write_config, tiny_bert):
    t1, t2, y = toy(1, 40)
    write_pairs(tmp_path / "train.tsv", [(a, b, s, "en") for a, b, s in zip(t1, t2, y, strict=True)]
                + [("die katze läuft", "die hund schläft", 1.0, "de"), ("die hund läuft", "die hund läuft", 5.0, "de"),
                   ("die katze schläft", "die katze läuft", 3.0, "de"), ("die hund schläft", "die katze", 0.5, "de")])
    d1, d2, dy = toy(2, 16)
    write_pairs(tmp_path / "dev.tsv", [(a, b, s, "en") for a, b, s in zip(d1, d2, dy, strict=True)])
    write_pairs(tmp_path / "test.tsv", [(a, b, s, "en") for a, b, s in zip(*toy(3, 20), strict=True)])

    def make(**overrides):
        params = {"datasets": ["toy_train"], "dev_datasets": ["toy_dev"], "base_model": f"hf:{tiny_bert}",
                  "biencoder": f"hf:{tiny_bert}#mean", "lr": 1e-3, "epochs": 1, "batch_size": 8, "device": "cpu",
                  **overrides}
        cfg = load_config(write_config(CONFIG.format(params=json.dumps(params))))
        wh = Warehouse(cfg.warehouse_root)
        for ds in ("toy_train", "toy_dev", *overrides.get("distill_datasets", [])):
            ingest_stage(cfg.section("toy"), ds, "r0")
        return cfg, wh, method_params("pear", cfg.project.pipelines["toy"].train[0].params)

    return make


@pytest.mark.slow
def test_optuna_study_resumes_and_records_every_trial(project):
    from amrsim.stages.train.pear import gold_pairs

    space = {"trials": 2, "study": "resume", "lr": [1e-4, 1e-3], "k": [0, 1], "epochs": [1, 1], "e_weak": [0, 1]}
    cfg, wh, params = project(search=space)
    ranges = {"toy_train": (0.0, 5.0), "toy_dev": (0.0, 5.0)}
    gold, _ = gold_pairs(wh, ["toy_train"], "train", ["en"], ranges)
    dev, _ = gold_pairs(wh, ["toy_dev"], "dev", ["en"], ranges)
    first = run_search(wh, params, gold, dev, "resume")
    assert first["trials_total"] == 2 and first["trials_this_run"] == 2
    second = run_search(wh, params, gold, dev, "resume")  # a new process would read the same journal file
    assert second["trials_total"] == 4 and second["trials_this_run"] == 2
    study = open_study(wh, "resume")
    assert len(study.trials) == 4
    table = wh.read("meta", "optuna_trials").filter(pl.col("study") == "resume")
    assert sorted(table["trial"].to_list()) == [0, 1, 2, 3]
    done = table.filter(pl.col("state") == "COMPLETE")
    assert second["completed"] == done.height > 0
    # the best trial is the completed one with the highest dev Spearman, with params from the configured space
    assert second["best"]["value"] == pytest.approx(done["value"].max())
    assert 1e-4 <= second["best"]["lr"] <= 1e-3 and second["best"]["epochs"] == 1
    saved = json.loads((wh.models_root / "pear" / "studies" / "resume.best.json").read_text())
    assert saved["trials_total"] == 4


def test_study_without_completed_trials_says_so_and_training_goes_on(project):
    # dev gold is constant: every trial's Spearman is undefined, so every trial is pruned
    cfg, wh, params = project(search={"trials": 2, "study": "empty", "k": [0, 0], "epochs": [1, 1],
                                      "e_weak": [0, 0]})
    empty = open_study(wh, "never-run")
    best, message = best_or_none(empty)
    assert best is None and "no completed trial (no trials at all)" in message
    assert trials_frame(empty).height == 0
    dev_path = cfg.path.parent / "dev.tsv"
    rows = [line.split("\t") for line in dev_path.read_text().splitlines()[1:]]
    write_pairs(dev_path, [(a, b, 2.0, lang) for a, b, _, lang in rows])
    ingest_stage(cfg.section("toy"), "toy_dev", "r1")
    summary = train_method(cfg.section("toy"), "pear", params, "r1")
    assert summary["status"] == "ok"
    search = summary["runs"]["r1"]["search"]
    assert "has no completed trial (2 pruned)" in search
    meta = find_trained("pear:r1", wh.models_root).meta
    assert meta["search"]["best"] is None and meta["params"]["lr"] == params.lr  # the configured params


@pytest.mark.slow
def test_train_score_and_evaluate_with_the_cross_encoder(project, tmp_path, monkeypatch, tiny_bert):
    from amrsim.cli import app

    cfg, wh, params = project(k=1, e_weak=1)
    summary = train_method(cfg.section("toy"), "pear", params, "r1")
    assert summary["status"] == "ok" and summary["model"] == "pear:r1"
    assert summary["rows_out"] == 40  # the English pairs (langs: [en]); the German ones are another language
    trained = find_trained("pear:latest", wh.models_root)
    assert trained.meta["kind"] == "cross-encoder" and trained.meta["metrics"]["silver_pairs"] > 0
    assert (trained.path / "model.safetensors").is_file()
    assert trained.meta["data"]["table_versions"]["toy_train.pairs"] == wh.version("toy_train", "pairs")
    assert is_cross_encoder("pear:latest", wh.models_root) and not is_cross_encoder("minilm", wh.models_root)

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["score", "--model", "pear:latest", "--file", "test.tsv", "--out", "preds.tsv",
                                 "--config", str(cfg.path)])
    assert result.exit_code == 0, result.output
    preds = pl.read_csv(tmp_path / "preds.tsv", separator="\t", quote_char=None)
    test = pl.read_csv(tmp_path / "test.tsv", separator="\t", quote_char=None)
    assert preds.height == test.height and preds["sentence1"].to_list() == test["sentence1"].to_list()
    model = PearCrossEncoder(str(trained.path), device="cpu")
    assert trained.meta["symmetric"] is True  # the default: a pair scores the same in either order
    direct = model.predict(test["sentence1"].to_list(), test["sentence2"].to_list(), symmetric=True)
    assert preds["prediction"].to_numpy() == pytest.approx(direct, abs=1e-5)
    assert ((preds["prediction"] >= 0) & (preds["prediction"] <= 1)).all()

    result = runner.invoke(app, ["evaluate", "sts", "--encoder", "pear:latest", "--file", "test.tsv",
                                 "--config", str(cfg.path)])
    assert result.exit_code == 0, result.output
    rows = wh.read("eval", "results").filter((pl.col("model_requested") == "pear:latest")
                                             & (pl.col("metric") == "spearman"))
    assert rows.height == 1 and rows["n"][0] == test.height and rows["model"][0] == "pear:r1"  # the run it was
    expected = correlations(direct, test["score"].to_numpy())["spearman"]
    assert rows["value"][0] == pytest.approx(expected, abs=1e-3)
    assert not wh.exists("test", "embeddings")  # scored from the texts: no sentence embeddings computed

    # a pipeline's STS stage mixes cross-encoders (pairs scored) and bi-encoders (cosine of embeddings)
    from amrsim.config import StsEvalConfig
    from amrsim.stages import sts_stage

    sts = StsEvalConfig(encoders=["pear:latest", f"hf:{tiny_bert}#mean"], datasets=["toy_dev"], splits=["dev"])
    _, table = sts_stage(wh, "toy", sts, "e1", device="cpu")
    dev = wh.read("toy_dev", "pairs")
    text = dict(wh.read("toy_dev", "sentences").select("key", "text").iter_rows())
    dev_pred = model.predict([text[k] for k in dev["sentence1_key"]], [text[k] for k in dev["sentence2_key"]],
                             symmetric=True)
    got = {r["model"]: r["value"] for r in table.filter(pl.col("metric") == "spearman").iter_rows(named=True)}
    assert got["pear:r1"] == pytest.approx(correlations(dev_pred, dev["score"].to_numpy())["spearman"], abs=1e-3)
    assert f"hf:{tiny_bert}#mean" in got and wh.exists("toy_dev", "embeddings")

    result = runner.invoke(app, ["score", "--model", "pear:nope", "--file", "test.tsv", "--config", str(cfg.path)])
    assert result.exit_code != 0 and "no run 'nope'" in str(result.exception)

    # a sentence cell that is not a string is named, never scored as its Python repr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sentence1": "a", "sentence2": "b"}\n{"sentence1": ["x"], "sentence2": "b"}\n', encoding="utf-8")
    result = runner.invoke(app, ["score", "--model", "pear:latest", "--file", str(bad), "--config", str(cfg.path)])
    assert result.exit_code != 0
    assert str(result.exception) == f"{bad}:2: column 'sentence1' holds a list, not a string"


@pytest.mark.slow
def test_trained_cross_encoder_is_the_augment_stages_weak_labeller(project, tiny_bert):
    from amrsim.config import AugmentConfig
    from amrsim.errors import ConfigError
    from amrsim.stages import augment_stage

    cfg, wh, params = project()
    train_method(cfg.section("toy"), "pear", params, "r1")
    aug = AugmentConfig(datasets=["toy_train"], encoder=f"hf:{tiny_bert}#mean", k=2, scorer="pear:latest")
    run = augment_stage(wh, "toy", "toy_train", aug, "a1")
    silver = wh.read("toy_train", "augmented_pairs")
    assert run.rows_computed == silver.height > 0 and (silver["status"] == "ok").all()
    assert set(silver["scorer"]) == {f"cross-encoder:{find_trained('pear:r1', wh.models_root).model_id}"}
    text = dict(wh.read("toy_train", "sentences").select("key", "text").iter_rows())
    model = PearCrossEncoder(str(find_trained("pear:r1", wh.models_root).path), device="cpu")
    direct = model.predict([text[k] for k in silver["sentence1_key"]], [text[k] for k in silver["sentence2_key"]])
    assert silver["weak_label"].to_numpy() == pytest.approx(direct, abs=1e-5)
    assert silver["weak_label"].to_list() != silver["cosine"].to_list()  # not the bi-encoder's cosine
    # a newer pear:latest relabels: the scorer's run is part of every row key
    train_method(cfg.section("toy"), "pear", params.model_copy(update={"seed": 1}), "r2")
    assert augment_stage(wh, "toy", "toy_train", aug, "a2").rows_computed == silver.height

    with pytest.raises(ValueError, match="unknown scorer 'bm25'"):
        AugmentConfig(scorer="bm25")
    with pytest.raises(ConfigError, match="augment.scorer: .*no run 'nope'"):
        augment_stage(wh, "toy", "toy_train", aug.model_copy(update={"scorer": "pear:nope"}), "a3")


def test_per_language_mode_trains_one_model_per_language(project):
    cfg, wh, params = project(langs=["en", "de"], mode="per_language", dev_datasets=[])
    summary = train_method(cfg.section("toy"), "pear", params, "r2")
    assert summary["models"] == ["pear:r2-en", "pear:r2-de"]
    en, de = find_trained("pear:r2-en", wh.models_root), find_trained("pear:r2-de", wh.models_root)
    assert en.meta["metrics"]["gold_pairs"] == 40 and de.meta["metrics"]["gold_pairs"] == 4
    assert en.meta["data"]["langs"] == ["en"] and de.meta["data"]["langs"] == ["de"]


def test_max_steps_stops_with_a_checkpoint_and_the_same_run_id_resumes(project):
    cfg, wh, params = project(k=1, e_weak=1, max_steps=3)  # 5 weak steps: stopped in the weak phase
    summary = train_method(cfg.section("toy"), "pear", params, "part")
    assert summary["status"] == "partial" and summary["models"] == []
    assert summary["runs"]["part"]["stopped_at_step"] == 3
    run = wh.models_root / "pear" / "part"
    assert (run / "checkpoint").is_dir() and not (run / "model.json").exists()
    summary = train_method(cfg.section("toy"), "pear", params.model_copy(update={"max_steps": None}), "part")
    assert summary["status"] == "ok" and summary["models"] == ["pear:part"]
    assert summary["runs"]["part"]["resumed_from"] == 3
    assert (run / "model.json").exists() and not (run / "checkpoint").exists()


def test_search_needs_dev_pairs():
    with pytest.raises(ValueError, match="search needs dev_datasets"):
        method_params("pear", {"datasets": ["x"], "search": {"trials": 1}})
    with pytest.raises(ValueError, match="search.epochs"):
        method_params("pear", {"datasets": ["x"], "dev_datasets": ["y"], "search": {"epochs": [3, 1]}})


def test_train_command_shows_training_progress_on_stderr(capsys):
    import logging

    from amrsim.cli.train import show_training_progress

    logger = logging.getLogger("amrsim")
    before, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        show_training_progress()
        show_training_progress()  # idempotent: one handler
        assert len(logger.handlers) == len(before) + 1
        logging.getLogger("amrsim.methods.pear").info("PEAR %s: step %d/%d, loss %.4f", "main", 3, 10, 0.5)
        err = capsys.readouterr().err
        assert "PEAR main: step 3/10, loss 0.5000" in err
    finally:
        logger.handlers[:] = before
        logger.setLevel(level)
        logger.propagate = propagate


def test_base_targets_mix_gold_with_the_base_cosine_on_the_gold_scale():
    gold = np.array([0.0, 0.5, 1.0, 0.25])
    on_line = np.array([0.1, 0.5, 0.9, 0.3])  # gold = 1.25 cos - 0.125 exactly: the fitted line recovers gold
    mixed, line = base_targets(gold, on_line, 0.5)
    assert line["slope"] == pytest.approx(1.25) and line["intercept"] == pytest.approx(-0.125)
    np.testing.assert_allclose(mixed, gold, atol=1e-6)
    # a base that ranks two pairs the other way pulls their targets towards each other, by its share
    cos = np.array([0.1, 0.5, 0.9, 0.7])
    mixed, line = base_targets(gold, cos, 0.5)
    c = np.clip(line["slope"] * cos + line["intercept"], 0, 1)
    np.testing.assert_allclose(mixed, 0.5 * gold + 0.5 * c, atol=1e-6)
    assert mixed[3] > gold[3]
    np.testing.assert_allclose(base_targets(gold, cos, 0.0)[0], gold, atol=1e-6)
    with pytest.raises(ValueError, match="constant"):
        base_targets(gold, np.full(4, 0.3), 0.5)
    with pytest.raises(ValueError, match="must lie in"):
        base_targets(gold, cos, 1.5)


def test_knowledge_preserving_training_records_the_base_target(project):
    cfg, wh, params = project(base_target="minilm", base_target_weight=0.3)
    summary = train_method(cfg.section("toy"), "pear", params, "kp")
    assert summary["models"] == ["pear:kp"]
    meta = find_trained("pear:kp", wh.models_root).meta
    assert meta["base_target"]["model"] == "minilm" and meta["base_target"]["weight"] == 0.3
    assert meta["base_target"]["slope"] != 0


def test_distilled_pairs_come_from_other_text_and_train_with_the_gold(project):
    """`distill_pairs` pairs from another dataset's sentences, none of them a gold or dev pair's: half nearest
    neighbours, half random partners, each targeted at the bi-encoder's cosine on the gold scale (the line fitted on
    the gold pairs); trained with the gold pairs and recorded in model.json."""
    from amrsim.stages.train.pear import distill_pairs, gold_pairs

    cfg, wh, params = project(distill_datasets=["toy_other"], distill_pairs=12)
    ranges = {"toy_train": (0.0, 5.0), "toy_dev": (0.0, 5.0)}
    gold, _ = gold_pairs(wh, ["toy_train"], "train", ["en"], ranges)
    dev, _ = gold_pairs(wh, ["toy_dev"], "dev", ["en"], ranges)
    frame, info = distill_pairs(wh, params, ["en"], gold, dev)
    assert frame.height == 12 and info["pairs"] == 12
    used = set(frame["sentence1"].to_list()) | set(frame["sentence2"].to_list())
    known = set(pl.concat([gold, dev]).select(pl.concat_list("sentence1", "sentence2").explode())
                .to_series().to_list())
    other = set(wh.read("toy_other", "sentences").filter(pl.col("lang") == "en")["text"].to_list())
    assert used <= other and not used & known
    assert (frame["sentence1"] != frame["sentence2"]).all()
    line = gold_scale_line(gold["target"].to_numpy(), cosines(params.biencoder, gold))
    assert info["slope"] == pytest.approx(line["slope"])
    cos = cosines(params.biencoder, frame)
    assert np.allclose(frame["target"].to_numpy(), on_gold_scale(cos, line), atol=1e-5)
    summary = train_method(cfg.section("toy"), "pear", params, "distilled")
    assert summary["models"] == ["pear:distilled"]
    trained = find_trained("pear:distilled", wh.models_root)
    meta = trained.meta
    assert meta["distill"]["pairs"] == 12 and meta["distill"]["datasets"] == ["toy_other"]
    assert meta["distill"]["table_versions"] == {"toy_other.sentences": wh.version("toy_other", "sentences")}
    assert "| toy_other.sentences |" in (trained.path / "README.md").read_text()  # the card's training data
    assert meta["metrics"]["gold_pairs"] == gold.height and meta["metrics"]["train_rows"] == gold.height + 12
    with pytest.raises(ValueError, match="distill_pairs .or distill_edits. and distill_datasets go together"):
        type(params)(datasets=["toy_train"], distill_pairs=10)


def test_distilled_edits_pair_a_sentence_with_its_edited_copy_targeted_at_the_base(project):
    """`distill_edits` adds pairs of another dataset's sentence (not an anchor of the other distilled pairs) and an
    edited copy of it, targeted like the rest at the bi-encoder's cosine on the gold scale; model.json counts the
    edits; edits without English sentences are refused by name."""
    from amrsim.stages.train.pear import distill_pairs, gold_pairs

    cfg, wh, params = project(distill_datasets=["toy_other"], distill_pairs=4, distill_edits=4)
    ranges = {"toy_train": (0.0, 5.0), "toy_dev": (0.0, 5.0)}
    gold, _ = gold_pairs(wh, ["toy_train"], "train", ["en"], ranges)
    dev, _ = gold_pairs(wh, ["toy_dev"], "dev", ["en"], ranges)
    frame, info = distill_pairs(wh, params, ["en"], gold, dev)
    assert (frame.height, info["pairs"], sum(info["edits"].values())) == (8, 8, 4), info
    plain, edited = frame.head(4), frame.tail(4)
    other = set(wh.read("toy_other", "sentences").filter(pl.col("lang") == "en")["text"].to_list())
    assert set(edited["sentence1"].to_list()) <= other
    assert not set(edited["sentence1"].to_list()) & set(plain.head(2)["sentence1"].to_list())  # not an anchor
    for a, b in zip(edited["sentence1"], edited["sentence2"], strict=True):
        assert a != b and len(set(a.split()) & set(b.split())) >= 2  # a copy that differs in one place
    line = {k: info[k] for k in ("slope", "intercept")}
    cos = cosines(params.biencoder, edited)
    assert np.allclose(edited["target"].to_numpy(), on_gold_scale(cos, line), atol=1e-5)
    with pytest.raises(ConfigError, match="distill_edits edits English sentences; langs .'de'. has no 'en'"):
        distill_pairs(wh, params, ["de"], gold, dev)


def test_the_shipped_recipes_also_save_pear_fused_at_the_measured_weight():
    """pipelines.yaml's PEAR recipes (pipeline `pear`, and `ood` per split) save pear_fused with MiniLM at weight 0.3:
    the setting whose STSb test and held-out rows docs/methods/pear.md reports."""
    cfg = load_config(ROOT / "pipelines.yaml")
    for pipeline in ("pear", "ood"):
        params = method_params("pear", cfg.project.pipelines[pipeline].train[0].params)
        assert (params.fused_with, params.fused_weight) == ("minilm", 0.3), pipeline


def test_a_residual_cross_encoder_starts_as_its_base_and_keeps_the_base_after_loading(project, tiny_bert):
    """`residual_on`: the score is σ(network logit + logit of the bi-encoder's cosine on the gold scale), the head
    zeroed. Untrained it scores every pair as the base's line does; trained, model.json keeps the line, the loaded
    model adds the base again, and the run root does not pose as a plain CrossEncoder (that would drop the base)."""
    from amrsim.stages.train.pear import gold_pairs

    biencoder = f"hf:{tiny_bert}#mean"
    cfg, wh, params = project(residual_on=biencoder, epochs=3, lr=5e-3)  # a zeroed head starts slowly
    gold, _ = gold_pairs(wh, ["toy_train"], "train", ["en"], {"toy_train": (0.0, 5.0)})
    t1, t2 = gold["sentence1"].to_list(), gold["sentence2"].to_list()
    cos = cosines(biencoder, gold)
    line = gold_scale_line(gold["target"].to_numpy(), cos)
    offset = BaseOffset(load_encoder(biencoder, device="cpu"), biencoder, **line)
    base_scores = np.clip(on_gold_scale(cos, line), offset.eps, 1 - offset.eps)

    fresh = PearCrossEncoder(str(tiny_bert), device="cpu")
    assert not np.allclose(fresh.predict(t1, t2), base_scores, atol=1e-3)
    start_from_base(fresh, offset)
    np.testing.assert_allclose(fresh.predict(t1, t2), base_scores, atol=1e-6)

    summary = train_method(cfg.section("toy"), "pear", params, "res")
    assert summary["models"] == ["pear:res"]
    trained = find_trained("pear:res", wh.models_root)
    kept = trained.meta["residual"]
    assert (kept["base"], kept["eps"]) == (biencoder, offset.eps)
    assert (kept["slope"], kept["intercept"]) == pytest.approx((line["slope"], line["intercept"]))
    # the base is part of the saved model: its copy and the module code that scores with it lie in the run folder
    assert json.loads((trained.path / "modules.json").read_text())[0]["type"] == "modeling_amrsim_pear.PearScorer"
    assert (trained.path / "base" / "modules.json").is_file()
    card = (trained.path / "README.md").read_text()
    assert "trust_remote_code=True" in card
    loaded = load_encoder("pear:res", device="cpu", models_root=wh.models_root).score(t1, t2)
    network = PearCrossEncoder(str(trained.path), device="cpu")
    bare = network.predict(t1, t2, symmetric=trained.meta["symmetric"])
    network.offset = BaseOffset(load_encoder(biencoder, device="cpu"), **trained.meta["residual"])
    np.testing.assert_allclose(loaded, network.predict(t1, t2, symmetric=trained.meta["symmetric"]), atol=1e-6)
    assert not np.allclose(loaded, bare, atol=1e-3)  # the base is part of the score
    assert not np.allclose(loaded, base_scores, atol=1e-3)  # and training corrected it
