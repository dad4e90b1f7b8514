"""Trained runs load outside amrsim: in a fresh process that imports only sentence-transformers,
`SentenceTransformer(run_dir)` / `CrossEncoder(run_dir)` give what amrsim gives (to 1e-6)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from amrsim.methods.loaders import load_encoder
from tests.helpers import load_outside_amrsim, tiny_sentence_transformer

TEXTS = ["the red cat runs", "the blue dog sleeps", "der hund", "the green bird sings fish"]
rng = np.random.default_rng(0)


@pytest.fixture(scope="module")
def base64(tmp_path_factory):
    return tiny_sentence_transformer(tmp_path_factory.mktemp("base"), hidden=64)


@pytest.mark.slow
def test_s3bert_run_loads_with_sentence_transformers_and_carries_its_aspect_layout(base64, tmp_path, one_thread):
    from amrsim.methods.s3bert.train import train_s3bert
    from amrsim.stages.evaluate.aspects import aspect_slices

    words = [t.split() for t in TEXTS]
    t1 = [" ".join(rng.choice(w, 3)) for w in words * 4]
    t2 = [" ".join(rng.choice(w, 3)) for w in reversed(words * 4)]
    y = rng.random((len(t1), 3)).astype(np.float32)
    run = tmp_path / "models" / "s3bert" / "run1"
    summary = train_s3bert(str(base64), t1, t2, y, None, run, batch_size=8, lr=1e-3, warmup=0, epochs=1,
                           n_aspects=3, aspect_dim=16, device="cpu")
    assert summary["completed"]

    outside, imported = load_outside_amrsim("bi", run, TEXTS, tmp_path)
    assert imported == []
    inside = load_encoder("s3bert:run1", models_root=tmp_path / "models").encode(TEXTS)
    assert outside.shape == inside.shape == (4, 64)
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)

    config = json.loads((run / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    assert config["s3bert"]["aspects"] == {"concepts": [0, 16], "frames": [16, 32], "named_entities": [32, 48]}
    assert config["s3bert"]["residual"] == [48, 64] and set(config["s3bert"]["aspect_scales"]) == set(
        config["s3bert"]["aspects"])
    # amrsim reads the layout from there: model.json without it changes nothing
    meta_path = run / "model.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta_path.write_text(json.dumps({k: v for k, v in meta.items() if k not in ("aspects", "residual")}))
    assert aspect_slices("s3bert:run1", tmp_path / "models") == {"concepts": (0, 16), "frames": (16, 32),
                                                                 "named_entities": (32, 48)}


@pytest.mark.slow
def test_dueam_run_loads_with_sentence_transformers(base64, tmp_path, one_thread):
    from amrsim.methods.dueam.train import train_dueam

    t1 = [t for t in TEXTS for _ in range(3)]
    t2 = [TEXTS[(i + 1) % 4] for i in range(4) for _ in range(3)]
    run = tmp_path / "models" / "dueam" / "run1"
    summary = train_dueam(str(base64), str(base64), t1, t2, run, batch_size=4, lr=1e-3, warmup=0, epochs=1,
                          device="cpu")
    assert summary["completed"]
    outside, imported = load_outside_amrsim("bi", run, TEXTS, tmp_path)
    assert imported == []
    inside = load_encoder("dueam:run1", models_root=tmp_path / "models").encode(TEXTS)
    assert outside.shape == inside.shape == (4, 64)
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_pear_run_loads_with_sentence_transformers_cross_encoder(base64, tmp_path, one_thread):
    from amrsim.methods.pear import Hyper, save_run, train_epochs
    from amrsim.methods.pear import PearCrossEncoder as PearModel

    model = PearModel(str(base64), device="cpu")
    t1, t2 = TEXTS * 3, list(reversed(TEXTS)) * 3
    train_epochs(model, t1, t2, rng.random(len(t1)).astype(np.float32), Hyper(lr=1e-3, batch_size=4), epochs=1)
    run = save_run(model, tmp_path / "models" / "pear" / "run1", {"symmetric": True})
    pairs = [[a, b] for a, b in zip(TEXTS, reversed(TEXTS), strict=True)] + [["der hund", "the cat runs"]]
    forward, imported = load_outside_amrsim("cross", run, pairs, tmp_path)
    backward, _ = load_outside_amrsim("cross", run, [[b, a] for a, b in pairs], tmp_path)
    assert imported == []
    first, second = [p[0] for p in pairs], [p[1] for p in pairs]
    one_order = PearModel(str(run / "cross_encoder"), device="cpu").predict(first, second)
    np.testing.assert_allclose(forward, one_order, atol=1e-6, rtol=0)
    # amrsim scores a symmetric run as the mean of both orders; the run's config says so
    inside = load_encoder("pear:run1", models_root=tmp_path / "models").score(first, second)
    np.testing.assert_allclose((forward + backward) / 2, inside, atol=1e-6, rtol=0)
    config = json.loads((run / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    assert config["pear"] == {"symmetric": True, "max_length": 128} and config["model_type"] == "CrossEncoder"
    assert json.loads((run / "cross_encoder" / "sentence_bert_config.json").read_text())["max_seq_length"] == 128
