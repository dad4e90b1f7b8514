"""S3BERT core: layout, target normalisation, negatives, the two losses checked by hand, explanations, and training
a tiny randomly initialised sentence-transformers model (freezing, best-model save, checkpoint resume, NaN guard,
loading back through the encoder registry)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from safetensors.torch import load_file

from amrsim.errors import ConfigError
from amrsim.evaluate.aspects import ASPECT_COLUMNS
from amrsim.methods.s3bert import (
    RESIDUAL,
    S3BERT_ASPECTS,
    DecompositionLoss,
    aspect_layout,
    consistency_loss,
    explain,
    layout_from_meta,
    normalise_targets,
    train_s3bert,
    with_negatives,
)
from amrsim.methods.s3bert import train as s3bert_train
from amrsim.methods.s3bert.model import PAPER_FEATURES
from amrsim.methods.training import NonFiniteLossError, seeded_batches
from amrsim.stages.evaluate.aspects import aspect_slices
from tests.helpers import HIDDEN, toy_pairs

# ---------------------------------------------------------------- layout


def test_aspects_follow_the_reference_config_order_as_amr_metric_columns():
    paper = ["Concepts", "Frames", "Named Ent.", "Negations", "Reentrancies", "SRL", "Smatch", "Unlabeled",
             "max_indegree_sim", "max_outdegree_sim", "max_degree_sim", "root_sim", "quant_sim", "score_wlk",
             "score_wwlk"]
    assert list(PAPER_FEATURES) == paper
    assert S3BERT_ASPECTS[:3] == ["concepts", "frames", "named_entities"]
    assert S3BERT_ASPECTS[-2:] == ["wlk", "wwlk"] and S3BERT_ASPECTS[6] == "smatch_f1"
    assert set(S3BERT_ASPECTS) <= set(ASPECT_COLUMNS) and len(set(S3BERT_ASPECTS)) == 15


def test_layout_for_minilm_dims():
    layout = aspect_layout(384)
    assert list(layout) == [*S3BERT_ASPECTS, RESIDUAL]
    assert layout["concepts"] == (0, 16)
    assert layout["frames"] == (16, 32)
    assert layout["wwlk"] == (224, 240)  # 15th aspect: 14 * 16 .. 15 * 16
    assert layout[RESIDUAL] == (240, 384)
    spans = list(layout.values())
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))  # contiguous, no gap or overlap


def test_layout_rejects_dims_too_small_and_bad_counts():
    with pytest.raises(ValueError, match=r"embedding dim 240 is too small for 15 aspects x 16 dims = 240"):
        aspect_layout(240)
    with pytest.raises(ValueError, match="too small"):
        aspect_layout(64, n_aspects=4, aspect_dim=16)
    assert aspect_layout(64, n_aspects=3, aspect_dim=16)[RESIDUAL] == (48, 64)
    with pytest.raises(ValueError, match="n_aspects must be 1..15"):
        aspect_layout(1024, n_aspects=16)
    with pytest.raises(ValueError, match="aspect_dim"):
        aspect_layout(384, aspect_dim=0)


# ---------------------------------------------------------------- targets


def test_normalise_targets_min_max_per_column_and_constant_column():
    frame = pl.DataFrame({c: [0.5, 0.5, 0.5] for c in S3BERT_ASPECTS}).with_columns(
        concepts=pl.Series([0.2, 0.6, 1.0]), wwlk=pl.Series([3.0, -1.0, 1.0]))
    y = normalise_targets(frame)
    assert y.shape == (3, 15) and y.dtype == np.float32
    # concepts: (x - 0.2) / (1.0 - 0.2) -> 0, 0.5, 1; wwlk: (x + 1) / 4 -> 1, 0, 0.5
    np.testing.assert_allclose(y[:, 0], [0.0, 0.5, 1.0], atol=1e-6)
    np.testing.assert_allclose(y[:, 14], [1.0, 0.0, 0.5], atol=1e-6)
    np.testing.assert_array_equal(y[:, 1:14], 0.5)  # constant columns -> the midpoint
    # a matrix in, columns named explicitly
    m = normalise_targets(np.array([[1.0, 7.0], [3.0, 7.0]]), columns=["negation", "srl"])
    np.testing.assert_array_equal(m, [[0.0, 0.5], [1.0, 0.5]])


def test_normalise_targets_errors_name_the_column():
    frame = pl.DataFrame({c: [0.1, 0.9] for c in S3BERT_ASPECTS if c not in ("srl", "wlk")})
    with pytest.raises(ConfigError, match=r"column\(s\) srl, wlk missing"):
        normalise_targets(frame)
    frame = pl.DataFrame({c: [0.1, 0.9] for c in S3BERT_ASPECTS}).with_columns(frames=pl.Series([0.3, None]))
    with pytest.raises(ValueError, match=r"frames \(1 rows\)"):
        normalise_targets(frame)
    with pytest.raises(ValueError, match=r"\(rows, 15\) matrix"):
        normalise_targets(np.zeros((4, 3)))


# ---------------------------------------------------------------- negatives


def test_with_negatives_swaps_in_another_pairs_sentence2_and_asks_for_its_targets():
    pairs = [(f"a{i}", f"b{i}", [float(i), 0.0]) for i in range(5)]
    for seed in range(30):
        calls: list[tuple[int, int]] = []

        def score(i: int, j: int, calls: list[tuple[int, int]] = calls) -> list[float]:
            calls.append((i, j))
            return [10.0 * i + j, -1.0]

        out = with_negatives(pairs, np.random.default_rng(seed), score)
        assert len(out) == 10
        assert [(s1, s2, t.tolist()) for s1, s2, t in out[:5]] == [(a, b, t) for a, b, t in pairs]
        assert [i for i, _ in calls] == [0, 1, 2, 3, 4]  # one negative per pair, in order
        for (i, j), (s1, s2, t) in zip(calls, out[5:], strict=True):
            assert j != i and 0 <= j < 5
            assert (s1, s2) == (f"a{i}", f"b{j}")
            assert t.tolist() == [10.0 * i + j, -1.0]
    # two pairs: each one's partner can only be the other
    out = with_negatives(pairs[:2], np.random.default_rng(0), lambda i, j: [0.0, 0.0])
    assert [(s1, s2) for s1, s2, _ in out[2:]] == [("a0", "b1"), ("a1", "b0")]
    with pytest.raises(ValueError, match="at least 2 pairs"):
        with_negatives(pairs[:1], np.random.default_rng(0), lambda i, j: [0.0, 0.0])
    with pytest.raises(ValueError, match="returned shape"):
        with_negatives(pairs, np.random.default_rng(0), lambda i, j: [0.0])


# ---------------------------------------------------------------- losses by hand


def test_decomposition_loss_by_hand():
    # 2 aspects x 2 dims. Pair 1: aspect 0 cos([1,0],[1,0]) = 1; aspect 1 cos([1,1],[1,-1]) = 0.
    # Pair 2: aspect 0 cos([0,2],[0,5]) = 10 / (2 * 5) = 1; aspect 1 cos([3,4],[4,3]) = 24 / (5 * 5) = 0.96.
    u = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 2.0, 3.0, 4.0]])
    v = torch.tensor([[1.0, 0.0, 1.0, -1.0], [0.0, 5.0, 4.0, 3.0]])
    y = torch.tensor([[0.5, 0.0], [1.0, 0.5]])
    loss = DecompositionLoss(2, aspect_dim=2)
    assert loss.scales.tolist() == [1.0, 1.0]
    torch.testing.assert_close(loss.predict(u, v), torch.tensor([[1.0, 0.0], [1.0, 0.96]]))
    # scales 1: ((1 - .5)^2 + 0^2 + 0^2 + (.96 - .5)^2) / 4 = (.25 + .2116) / 4 = .1154
    assert float(loss(u, v, y).detach()) == pytest.approx(0.1154, abs=1e-6)
    # scales (2, .5): preds [[2, 0], [2, .48]] -> (1.5^2 + 0 + 1^2 + .02^2) / 4 = 3.2504 / 4 = .8126
    loss.scales.data = torch.tensor([2.0, 0.5])
    value = loss(u, v, y)
    assert float(value.detach()) == pytest.approx(0.8126, abs=1e-6)
    # the scales learn: d/ds0 = sum over pairs 2 (s0 c - t) c / 4 = 2 (2 - .5) / 4 + 2 (2 - 1) / 4 = 1.25
    value.backward()
    assert float(loss.scales.grad[0]) == pytest.approx(1.25, abs=1e-6)
    # the reference's training similarity, 1 - L1: pair 1 aspect 1 is 1 - (|1 - 1| + |1 + 1|) = -1
    manhattan = DecompositionLoss(2, aspect_dim=2, similarity="manhattan")
    torch.testing.assert_close(manhattan.predict(u, v)[0], torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="similarity 'dot' unknown"):
        DecompositionLoss(2, similarity="dot")


def test_consistency_loss_by_hand():
    student_a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    student_b = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    teacher_a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    teacher_b = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # student a x b cosines [[1, r], [0, r]] with r = 1 / sqrt 2, teacher's the identity:
    # squared errors 0, r^2 = .5, 0, (r - 1)^2 = 1.5 - sqrt 2 -> mean (2 - sqrt 2) / 4 = .146447
    expected = (2 - math.sqrt(2)) / 4
    assert float(consistency_loss(student_a, teacher_a, student_b, teacher_b, scale=1.0)) == pytest.approx(
        expected, abs=1e-6)
    # the reference scales both matrices by 5 before the MSE: 25 x
    assert float(consistency_loss(student_a, teacher_a, student_b, teacher_b)) == pytest.approx(
        25 * expected, abs=1e-5)
    # a x a: student [[1, r], [r, 1]] vs identity -> (0 + .5 + .5 + 0) / 4 = .25
    assert float(consistency_loss(student_b, teacher_b, scale=1.0)) == pytest.approx(0.25, abs=1e-6)
    # cosine ignores vector length: a rescaled student agrees with its teacher exactly
    assert float(consistency_loss(3 * student_b, student_b, scale=1.0)) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="both student_b and teacher_b"):
        consistency_loss(student_a, teacher_a, student_b)


def test_explain_gives_overall_aspect_and_residual_cosines():
    class Fixed:
        def encode(self, texts: list[str]) -> np.ndarray:
            return np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0]])

    layout = {"concepts": (0, 2), RESIDUAL: (2, 4)}
    # overall: 1 / (sqrt 2 sqrt 2) = .5; concepts: [1,0].[1,0] = 1; residual [1,0].[0,1] = 0
    assert explain(Fixed(), "x", "y", layout) == pytest.approx({"overall": 0.5, "concepts": 1.0, RESIDUAL: 0.0})
    meta = {"aspects": {"concepts": [0, 2]}, RESIDUAL: [2, 4]}
    assert layout_from_meta(meta) == layout
    with pytest.raises(ValueError, match="does not fit"):
        explain(Fixed(), "x", "y", {"frames": (2, 6)})


# ---------------------------------------------------------------- training a tiny model

N_ASPECTS, ASPECT_DIM = 3, 16


def layer_of(key: str) -> int | None:
    parts = key.split(".")
    return int(parts[parts.index("layer") + 1]) if "layer" in parts else None


@pytest.mark.slow
def test_train_learns_freezes_saves_and_loads_back(tiny_model, tmp_path, one_thread):
    from sentence_transformers import SentenceTransformer

    from amrsim.methods.loaders import load_encoder

    train, dev = toy_pairs(1, 48), toy_pairs(2, 16)
    out_dir = tmp_path / "models" / "s3bert" / "run1"
    summary = train_s3bert(tiny_model, *train, dev, out_dir, batch_size=16, lr=1e-3, warmup=2, epochs=10,
                           eval_every=10, n_aspects=N_ASPECTS, aspect_dim=ASPECT_DIM, device="cpu")
    assert summary["completed"] and summary["steps"] == summary["total_steps"] == 30
    assert summary["best_dev_loss"] < summary["initial_dev_loss"]

    # files: model.json and a sentence-transformers encoder with safetensors weights at the run root; no checkpoint
    # left behind
    assert {"config_sentence_transformers.json", "config.json", "model.json", "model.safetensors",
            "modules.json"} <= {p.name for p in out_dir.iterdir()} and not (out_dir / "checkpoint").exists()
    meta = json.loads((out_dir / "model.json").read_text(encoding="utf-8"))
    assert meta["method"] == "s3bert" and meta["run_id"] == "run1" and meta["encoder"] == "."
    assert meta["base"] == tiny_model and meta["seed"] == 0
    assert meta["aspects"] == {"concepts": [0, 16], "frames": [16, 32], "named_entities": [32, 48]}
    assert meta[RESIDUAL] == [48, 64]
    assert meta["metrics"]["best_dev_loss"] == summary["best_dev_loss"]
    assert meta["params"]["trainable_layer_ids"] == [1, 2] and meta["params"]["lr"] == 1e-3
    assert meta["created_at"].endswith("+00:00")

    # only the last two transformer layers changed; embeddings and layer 0 are bit-identical to the base
    base, trained = load_file(f"{tiny_model}/model.safetensors"), load_file(out_dir / "model.safetensors")
    assert base.keys() == trained.keys()
    changed = {k for k in base if not torch.equal(base[k], trained[k])}
    assert all(layer_of(k) in (1, 2) for k in changed)
    assert {layer_of(k) for k in changed} == {1, 2}
    assert any(k.startswith("embeddings.") for k in base) and not any(k.startswith("embeddings.") for k in changed)

    # the encoder itself learned (not only the aspect scales): with the learned scales, its sub-embedding
    # similarities fit the dev targets better than the base encoder's
    def decomposition_mse(path: str) -> float:
        model = SentenceTransformer(path, device="cpu")
        loss = DecompositionLoss(N_ASPECTS, ASPECT_DIM)
        loss.scales.data = torch.tensor(list(meta["aspect_scales"].values()))
        u, v = (torch.tensor(model.encode(texts)) for texts in dev[:2])
        return float(loss(u, v, torch.tensor(dev[2])).detach())

    assert decomposition_mse(str(out_dir)) < decomposition_mse(tiny_model)

    # the registry loads it by run id, and evaluation reads its aspect slices
    root = tmp_path / "models"
    encoder = load_encoder("s3bert:run1", models_root=root, device="cpu")
    vectors = encoder.encode(dev[0][:4])
    assert vectors.shape == (4, HIDDEN)
    np.testing.assert_allclose(vectors, SentenceTransformer(str(out_dir), device="cpu").encode(dev[0][:4]),
                               atol=1e-6)
    assert aspect_slices("s3bert:latest", root) == {k: tuple(v) for k, v in meta["aspects"].items()}
    explained = explain(encoder, dev[0][0], dev[1][0], layout_from_meta(meta))
    assert list(explained) == ["overall", "concepts", "frames", "named_entities", RESIDUAL]

    # a finished run is not overwritten
    with pytest.raises(FileExistsError, match="new run id"):
        train_s3bert(tiny_model, *train, dev, out_dir, n_aspects=N_ASPECTS, device="cpu")


@pytest.mark.slow
def test_interrupted_run_resumes_from_its_checkpoint_and_matches_an_uninterrupted_one(tiny_model, tmp_path,
                                                                                       one_thread):
    train = toy_pairs(3, 20)
    kwargs = dict(batch_size=8, lr=1e-3, warmup=1, epochs=2, eval_every=2, n_aspects=N_ASPECTS,
                  aspect_dim=ASPECT_DIM, device="cpu", seed=7)  # 3 steps an epoch (8 + 8 + 4 pairs), 6 in all
    whole = train_s3bert(tiny_model, *train, None, tmp_path / "whole", **kwargs)
    assert whole["completed"] and whole["steps"] == 6 and whole["resumed_from"] is None

    part = tmp_path / "part"
    stopped = train_s3bert(tiny_model, *train, None, part, max_steps=3, **kwargs)
    assert not stopped["completed"] and stopped["steps"] == 3
    assert not (part / "model.json").exists()
    assert json.loads((part / "checkpoint" / "state.json").read_text(encoding="utf-8"))["step"] == 3

    with pytest.raises(ValueError, match=r"lr=0.001 \(now 0.002\)"):
        train_s3bert(tiny_model, *train, None, part, **{**kwargs, "lr": 2e-3})

    resumed = train_s3bert(tiny_model, *train, None, part, **kwargs)
    assert resumed["completed"] and resumed["resumed_from"] == 3 and resumed["steps"] == 6
    # weights, optimizer, schedule, data order and dropout RNG restored: the same model bit for bit
    a = load_file(tmp_path / "whole" / "model.safetensors")
    b = load_file(part / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not (part / "checkpoint").exists()


def varied_pairs(seed: int, n: int) -> tuple[list[str], list[str], np.ndarray]:
    """`toy_pairs` whose sentences have different lengths (words dropped, 'the' repeated): each batch pads them to
    its own longest one."""
    t1, t2, y = toy_pairs(seed, n)
    rng = np.random.default_rng(seed + 100)

    def vary(text: str) -> str:
        kept = [w for w in text.split() if w == "the" or rng.random() < 0.7]
        return " ".join(kept + ["the"] * int(rng.integers(0, 5)))

    return [vary(t) for t in t1], [vary(t) for t in t2], y


def test_the_teachers_embedding_of_a_sentence_does_not_depend_on_what_is_asked_with_it(tiny_model, one_thread):
    from sentence_transformers import SentenceTransformer

    from amrsim.methods.s3bert.model import Teacher

    t1, t2, _ = varied_pairs(3, 20)
    texts = [*t1, *t2]
    assert len({len(t.split()) for t in texts}) > 3
    model = SentenceTransformer(tiny_model, device="cpu")
    first, second = Teacher(model, "cpu", texts, 8), Teacher(model, "cpu", texts, 8)
    for k in range(0, len(t1), 3):  # one asked batch by batch (a resumed run's cache fills from its resume point)
        first(t1[k:k + 3])
    together = first(texts)
    assert torch.equal(together, second(texts[::-1]).flip(0))  # the other asked all at once, in another order
    assert torch.equal(Teacher(model, "cpu", texts, 8)([texts[5]])[0], together[5])
    alone = Teacher(model, "cpu", texts, 8)(["the cat the the"])  # a sentence outside the run's: embedded alone
    assert alone.shape == (1, HIDDEN)


@pytest.mark.slow
def test_a_resumed_run_on_sentences_of_different_lengths_is_bit_identical(tiny_model, tmp_path, one_thread):
    """The teacher's targets are computed in batches fixed before training: a resumed run (its teacher cache empty
    at the resume point) gets the uninterrupted run's targets to the bit, so the same weights, losses and dev losses
    (when the teacher embedded whatever sentences a step missed as one batch, the weights differed by 4e-8 here,
    2.7e-8 after 10 MiniLM steps on 2 threads, 1.9e-6 in a longer run)."""
    train, dev = varied_pairs(3, 20), varied_pairs(4, 8)
    kwargs = dict(batch_size=8, lr=1e-3, warmup=1, epochs=2, eval_every=2, n_aspects=N_ASPECTS,
                  aspect_dim=ASPECT_DIM, device="cpu", seed=7)  # 3 steps an epoch, 6 in all
    for name, held_out in (("last", None), ("best", dev)):  # the last weights; the best by dev loss
        whole = tmp_path / name / "whole"
        train_s3bert(tiny_model, *train, held_out, whole, **kwargs)
        for stop in (3, 5):
            part = tmp_path / name / f"part{stop}"
            assert not train_s3bert(tiny_model, *train, held_out, part, max_steps=stop, **kwargs)["completed"]
            resumed = train_s3bert(tiny_model, *train, held_out, part, **kwargs)
            assert resumed["completed"] and resumed["resumed_from"] == stop
            a, b = load_file(whole / "model.safetensors"), load_file(part / "model.safetensors")
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), (name, stop)
            meta_a, meta_b = (json.loads((d / "model.json").read_text(encoding="utf-8")) for d in (whole, part))
            assert meta_b["history"] == meta_a["history"], (name, stop)  # every train and dev loss, exactly
            assert meta_b["aspect_scales"] == meta_a["aspect_scales"]


KILLED_CHILD = """
import json, sys, time
import torch
torch.set_num_threads(1)
from amrsim.methods.s3bert import train_s3bert
from tests.helpers import toy_pairs
model, out, kwargs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
step = torch.optim.AdamW.step
def slow_step(self, *a, **k):  # a tiny model trains in milliseconds: slow it so the kill lands mid-run
    time.sleep(0.3)
    return step(self, *a, **k)
torch.optim.AdamW.step = slow_step
train_s3bert(model, *toy_pairs(3, 20), None, out, **kwargs)
"""


@pytest.mark.slow
def test_a_training_process_killed_mid_epoch_resumes_from_its_last_checkpoint(tiny_model, tmp_path, one_thread):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import ROOT

    kwargs = dict(batch_size=8, lr=1e-3, warmup=1, epochs=4, eval_every=2, n_aspects=N_ASPECTS,
                  aspect_dim=ASPECT_DIM, device="cpu", seed=7)  # 3 steps an epoch, 12 in all
    part = tmp_path / "part"
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, tiny_model, str(part), json.dumps(kwargs)],
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE)
    state = part / "checkpoint" / "state.json"
    deadline = time.monotonic() + 240
    while not state.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert child.poll() is None, child.stderr.read().decode()[-2000:] if child.stderr else ""
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        if child.stderr:
            child.stderr.close()
    assert not (part / "model.json").exists()
    checkpoint_step = json.loads(state.read_text(encoding="utf-8"))["step"]
    assert checkpoint_step < 12 and checkpoint_step % 2 == 0  # killed mid-run, after a whole checkpoint

    resumed = train_s3bert(tiny_model, *toy_pairs(3, 20), None, part, **kwargs)
    assert resumed["completed"] and resumed["resumed_from"] == checkpoint_step and resumed["steps"] == 12
    whole = train_s3bert(tiny_model, *toy_pairs(3, 20), None, tmp_path / "whole", **kwargs)
    assert whole["completed"] and whole["resumed_from"] is None
    a = load_file(tmp_path / "whole" / "model.safetensors")
    b = load_file(part / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_nan_loss_names_the_step_and_rows_and_keeps_the_last_checkpoint(tiny_model, tmp_path, one_thread,
                                                                        monkeypatch):
    train = toy_pairs(4, 20)
    kwargs = dict(batch_size=8, lr=1e-3, warmup=1, epochs=2, eval_every=2, n_aspects=N_ASPECTS,
                  aspect_dim=ASPECT_DIM, device="cpu", seed=5)
    real = s3bert_train.consistency_loss
    calls = {"train": 0}

    def poisoned(*args, **kw):
        value = real(*args, **kw)
        if torch.is_grad_enabled():  # training steps only, not dev evaluation
            calls["train"] += 1
            if calls["train"] == 3:
                return value * float("nan")
        return value

    monkeypatch.setattr(s3bert_train, "consistency_loss", poisoned)
    with pytest.raises(NonFiniteLossError, match="loss is nan at step 3") as err:
        train_s3bert(tiny_model, *train, None, tmp_path / "run", **kwargs)
    # step 3 is epoch 0's third batch: rows 16..19 of that epoch's shuffle
    expected = seeded_batches(5, 20, 8)(2).tolist()
    assert err.value.step == 3 and err.value.rows == expected
    assert str(expected) in str(err.value)
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text(encoding="utf-8"))
    assert state["step"] == 2

    monkeypatch.setattr(s3bert_train, "consistency_loss", real)
    again = train_s3bert(tiny_model, *train, None, tmp_path / "run", max_steps=4, **kwargs)
    assert again["resumed_from"] == 2 and again["steps"] == 4 and not again["completed"]


def test_training_input_errors_come_before_any_model_load(tmp_path):
    t1, t2, y = toy_pairs(0, 4)
    with pytest.raises(ValueError, match="targets have 3 columns but n_aspects=15"):
        train_s3bert("/nonexistent", t1, t2, y, None, tmp_path / "r")
    with pytest.raises(ValueError, match="must align row by row"):
        train_s3bert("/nonexistent", t1, t2[:3], y, None, tmp_path / "r", n_aspects=3)
    bad = y.copy()
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        train_s3bert("/nonexistent", t1, t2, y, (t1, t2, bad), tmp_path / "r", n_aspects=3)
    assert not Path(tmp_path / "r").exists()
