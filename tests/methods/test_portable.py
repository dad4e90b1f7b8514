"""Trained runs load outside amrsim: in a fresh process that imports only sentence-transformers,
`SentenceTransformer(run_dir)` / `CrossEncoder(run_dir)` give what amrsim gives (to 1e-6); runs in the older layout
(the model in a subdirectory) still load. Every method's run: test_hub_loading.py."""

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
    # sentence-transformers' save() keeps it: in the transformer's config.json, which transformers saves whole
    from sentence_transformers import SentenceTransformer

    from amrsim.methods.portable import method_config

    copy = tmp_path / "copy"
    SentenceTransformer(str(run), device="cpu").save(str(copy))
    assert method_config(copy, "s3bert", {}) == config["s3bert"]
    assert json.loads((copy / "config.json").read_text(encoding="utf-8"))["amrsim"]["s3bert"] == config["s3bert"]
    np.testing.assert_allclose(SentenceTransformer(str(copy), device="cpu").encode(TEXTS), inside, atol=1e-6, rtol=0)
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
def test_a_pear_run_in_the_older_layout_still_loads_in_amrsim_and_sentence_transformers(base64, tmp_path, one_thread):
    """Runs written before the model moved to the run root keep it in `cross_encoder/`, with a root modules.json
    pointing into it: both loaders still read them."""
    from amrsim.methods.pear import PearCrossEncoder as PearModel
    from amrsim.methods.portable import add_cross_encoder_files, link_run_root

    network = PearModel(str(base64), device="cpu")
    run = tmp_path / "models" / "pear" / "old"
    network.save(run / "cross_encoder")
    add_cross_encoder_files(run / "cross_encoder", 128)
    link_run_root(run, "cross_encoder", {"pear": {"symmetric": False, "max_length": 128}})
    (run / "model.json").write_text(json.dumps({"method": "pear", "run_id": "old", "kind": "cross-encoder",
                                                "encoder": "cross_encoder", "max_length": 128, "symmetric": False}))
    pairs = [[a, b] for a, b in zip(TEXTS, reversed(TEXTS), strict=True)]
    outside, imported = load_outside_amrsim("cross", run, pairs, tmp_path)
    assert imported == []
    inside = load_encoder("pear:old", models_root=tmp_path / "models").score([p[0] for p in pairs],
                                                                              [p[1] for p in pairs])
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)
    np.testing.assert_allclose(inside, network.predict([p[0] for p in pairs], [p[1] for p in pairs]), atol=1e-6)


@pytest.mark.parametrize("kind", ["encoder", "cross-encoder"])
def test_amrsim_module_files_are_what_sentence_transformers_writes(kind, tmp_path):
    """save_amrsim_module names amrsim's module class without importing it (the class loads runs through the method
    loaders, which import portable): its files must equal sentence-transformers' own save of that module."""
    import torch
    from sentence_transformers import CrossEncoder, SentenceTransformer

    from amrsim.methods.hub import AmrsimEncoder, AmrsimPairScorer
    from amrsim.methods.portable import MODULES, ST_CONFIG, save_amrsim_module

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    save_amrsim_module(ours, kind, {"pear": {"symmetric": True}})
    if kind == "encoder":
        model = SentenceTransformer(modules=[AmrsimEncoder(str(theirs))], device="cpu")
    else:
        model = CrossEncoder(modules=[AmrsimPairScorer(str(theirs))], device="cpu",
                             activation_fn=torch.nn.Identity())
    model.save(str(theirs), create_model_card=False)
    for name in (MODULES, ST_CONFIG):
        expected = json.loads((theirs / name).read_text(encoding="utf-8"))
        if name == ST_CONFIG:
            expected["pear"] = {"symmetric": True}
        assert json.loads((ours / name).read_text(encoding="utf-8")) == expected, name


def test_a_runs_record_names_its_own_files_relatively_and_the_packaged_base_by_name(tmp_path):
    from amrsim.methods.portable import portable_record
    from amrsim.methods.training import base_model_path

    run, mine = tmp_path / "models" / "pear" / "r1", tmp_path / "my-base"
    site = base_model_path("minilm")
    record = {"model_dir": str(run), "best": str(run / "base"), "base": site, "hf": f"hf:{site}#mean",
              "nested": [{"residual": f"hf:{run}/base#cls"}], "mine": f"hf:{mine}", "hub": "hf:org/model",
              "name": "s3bert:r1", "n": 3, "text": "a/b"}
    assert portable_record(record, run) == {
        "model_dir": ".", "best": "base", "base": "minilm", "hf": "minilm",
        "nested": [{"residual": "hf:base#cls"}], "mine": f"hf:{mine}", "hub": "hf:org/model",
        "name": "s3bert:r1", "n": 3, "text": "a/b"}
