"""Every method's trained run loads with sentence-transformers' own class, in a fresh process whose code imports
nothing of amrsim, and gives what amrsim gives (to 1e-6): S3BERT, DuEAM and one-order PEAR with a plain
`SentenceTransformer(run)` / `CrossEncoder(run)`; MSE-AMR, meaning, symmetric PEAR and pear_fused with
`trust_remote_code=True` (sentence-transformers then imports amrsim's installed module class). The transformer
lies at the run root, as Hub tools expect."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from amrsim.methods.loaders import load_encoder
from tests.forked import fresh_python
from tests.helpers import tiny_sentence_transformer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

TEXTS = ["the red cat runs", "the blue dog sleeps", "der hund", "the green bird sings fish"]
PAIRS = [[a, b] for a, b in zip(TEXTS, reversed(TEXTS), strict=True)] + [["der hund", "the cat runs"]]
rng = np.random.default_rng(0)

LOAD_SCRIPT = """
import json, sys
import numpy as np
kind, path, inputs, trust, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
imported_before = [m for m in sys.modules if m.split(".")[0] == "amrsim"]
try:
    if kind == "bi":
        from sentence_transformers import SentenceTransformer
        values = SentenceTransformer(path, device="cpu", trust_remote_code=trust).encode(inputs)
    else:
        from sentence_transformers import CrossEncoder
        values = CrossEncoder(path, device="cpu", trust_remote_code=trust).predict([tuple(p) for p in inputs])
    np.save(out, np.asarray(values, dtype=np.float64))
    error = None
except Exception as e:
    error = f"{type(e).__name__}: {e}"
print(json.dumps({"error": error, "imported_before": imported_before,
                  "amrsim_loaded": any(m.split(".")[0] == "amrsim" for m in sys.modules)}))
"""


def load_in_fresh_process(kind: str, path: Path, inputs: list, tmp: Path, trust: bool) -> tuple[object, dict]:
    """Load `path` with `SentenceTransformer` (kind "bi") or `CrossEncoder` ("cross") in a new Python process whose
    code imports only sentence-transformers, offline; returns its output (None when loading failed) and a report:
    the error, whether amrsim ended up imported (by sentence-transformers, through trust_remote_code)."""
    out = tmp / f"fresh-{kind}-{int(trust)}.npy"
    out.unlink(missing_ok=True)
    done = fresh_python(LOAD_SCRIPT, kind, str(path), json.dumps(inputs), "1" if trust else "0", str(out), cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["imported_before"] == []
    return (np.load(out) if report["error"] is None else None), report


def assert_hub_root(run: Path, model_type: str) -> None:
    """A one-transformer run's root as Hub tools read it: the transformer's config, weights and tokenizer, the
    sentence-transformers files, and model.json naming the root as the model's directory."""
    for name in ("config.json", "model.safetensors", "tokenizer.json", "modules.json"):
        assert (run / name).is_file(), name
    assert json.loads((run / "config_sentence_transformers.json").read_text())["model_type"] == model_type
    assert json.loads((run / "model.json").read_text())["encoder"] == "."
    assert not (run / "encoder").exists() and not (run / "cross_encoder").exists()


def module_types(run: Path) -> list[str]:
    return [m["type"] for m in json.loads((run / "modules.json").read_text())]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tiny_sentence_transformer(tmp_path_factory.mktemp("base"), hidden=64)


def test_s3bert_run_loads_with_a_plain_sentence_transformer(base, tmp_path):
    from amrsim.methods.s3bert.train import train_s3bert

    words = [t.split() for t in TEXTS]
    t1 = [" ".join(rng.choice(w, 3)) for w in words * 4]
    t2 = [" ".join(rng.choice(w, 3)) for w in reversed(words * 4)]
    run = tmp_path / "models" / "s3bert" / "run1"
    run.mkdir(parents=True)
    (run / "README.md").write_text("our card\n")  # written by the card stage: saving the model keeps it
    train_s3bert(str(base), t1, t2, rng.random((len(t1), 3)).astype(np.float32), None, run, batch_size=8, lr=1e-3,
                 warmup=0, epochs=1, n_aspects=3, aspect_dim=16, device="cpu")
    assert_hub_root(run, "SentenceTransformer")
    assert (run / "README.md").read_text() == "our card\n"
    assert all(t.startswith("sentence_transformers.") for t in module_types(run))
    outside, report = load_in_fresh_process("bi", run, TEXTS, tmp_path, trust=False)
    assert not report["amrsim_loaded"]
    inside = load_encoder("s3bert:run1", models_root=tmp_path / "models", device="cpu").encode(TEXTS)
    assert outside.shape == inside.shape == (4, 64)
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)
    config = json.loads((run / "config_sentence_transformers.json").read_text())
    assert config["s3bert"]["aspects"]["frames"] == [16, 32]


def test_dueam_run_loads_with_a_plain_sentence_transformer(base, tmp_path):
    from amrsim.methods.dueam.train import train_dueam

    t1 = [t for t in TEXTS for _ in range(3)]
    t2 = [TEXTS[(i + 1) % 4] for i in range(4) for _ in range(3)]
    run = tmp_path / "models" / "dueam" / "run1"
    train_dueam(str(base), str(base), t1, t2, run, batch_size=4, lr=1e-3, warmup=0, epochs=1, device="cpu")
    assert_hub_root(run, "SentenceTransformer")
    outside, report = load_in_fresh_process("bi", run, TEXTS, tmp_path, trust=False)
    assert not report["amrsim_loaded"]
    inside = load_encoder("dueam:run1", models_root=tmp_path / "models", device="cpu").encode(TEXTS)
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)


def test_mse_amr_run_loads_with_trust_remote_code(base, tmp_path):
    from amrsim.methods.mse_amr import Params
    from amrsim.methods.mse_amr.train import train_mse_amr
    from tests.helpers import tiny_bert
    from tests.methods.test_mse_amr import VOCAB, _triples

    graph_bert = tiny_bert(tmp_path / "graph_bert", VOCAB[5:])
    run = tmp_path / "models" / "mse_amr" / "run1"
    train_mse_amr(_triples(), run, Params(datasets=["toy_nli"], encoder=str(graph_bert), device="cpu", min_count=2,
                                          max_length=64, batch_size=8, micro_batch=4, epochs=1,
                                          base_encoder=f"hf:{base}"))
    assert module_types(run) == ["amrsim.methods.hub.AmrsimEncoder"]
    texts = ["the boy wants the apple", "the girl sees the dog", "a cat eats"]
    refused, report = load_in_fresh_process("bi", run, texts, tmp_path, trust=False)
    assert refused is None and "trust_remote_code=True" in report["error"]
    outside, report = load_in_fresh_process("bi", run, texts, tmp_path, trust=True)
    assert report["amrsim_loaded"]  # imported by sentence-transformers from the installed package
    inside = load_encoder("mse_amr:run1", models_root=tmp_path / "models", device="cpu").encode(texts)
    assert outside.shape == inside.shape == (3, 64 + 32)
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)


def test_meaning_run_loads_with_trust_remote_code_and_saves_a_copy_that_loads(base, tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer

    from amrsim.methods.meaning.model import MeaningModel, StsHead, save_model
    from amrsim.methods.meaning.params import Hyper

    torch.manual_seed(0)
    models = tmp_path / "models"
    run = save_model(models / "meaning" / "run1", MeaningModel(64, 2, head="mlp", hidden=8), f"hf:{base}",
                     ["en", "de"], Hyper(head="mlp", hidden=8, sts_hidden=8), StsHead(64, hidden=8))
    config = json.loads((run / "config_sentence_transformers.json").read_text())
    assert config["model_type"] == "SentenceTransformer"
    # the folder's own module code (its base copied in), not amrsim's installed module
    assert module_types(run) == ["modeling_amrsim_meaning.MeaningEncoder"]
    outside, report = load_in_fresh_process("bi", run, TEXTS, tmp_path, trust=True)
    assert not report["amrsim_loaded"]
    inside = load_encoder("meaning:run1", models_root=models, device="cpu").encode(TEXTS)
    assert outside.shape == inside.shape == (4, 64)
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)
    # sentence-transformers' save copies the run's model files, so the copy loads again
    SentenceTransformer(str(run), device="cpu", trust_remote_code=True).save(str(models / "meaning" / "copy"))
    assert (models / "meaning" / "copy" / "sts_head.safetensors").is_file()
    copy = SentenceTransformer(str(models / "meaning" / "copy"), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(copy.encode(TEXTS), inside, atol=1e-6, rtol=0)


@pytest.fixture(scope="module")
def pear_network(base):
    from amrsim.methods.pear import Params, PearCrossEncoder, train_epochs

    model = PearCrossEncoder(str(base), device="cpu")
    t1, t2 = TEXTS * 3, list(reversed(TEXTS)) * 3
    hp = Params(datasets=["toy"], lr=1e-3, batch_size=4)
    train_epochs(model, t1, t2, rng.random(len(t1)).astype(np.float32), hp, epochs=1)
    return model


def pear_scores(name: str, models: Path) -> np.ndarray:
    return load_encoder(name, models_root=models, device="cpu").score([p[0] for p in PAIRS], [p[1] for p in PAIRS])


def test_one_order_pear_run_loads_with_a_plain_cross_encoder(pear_network, tmp_path):
    from amrsim.methods.pear import save_run

    run = save_run(pear_network, tmp_path / "models" / "pear" / "run1", {"symmetric": False})
    assert_hub_root(run, "CrossEncoder")
    assert all(t.startswith("sentence_transformers.") for t in module_types(run))
    assert json.loads((run / "sentence_bert_config.json").read_text())["max_seq_length"] == 128
    outside, report = load_in_fresh_process("cross", run, PAIRS, tmp_path, trust=False)
    assert not report["amrsim_loaded"]
    np.testing.assert_allclose(outside, pear_scores("pear:run1", tmp_path / "models"), atol=1e-6, rtol=0)


def test_symmetric_pear_run_averages_both_orders_in_the_saved_model(pear_network, tmp_path):
    from amrsim.methods.pear import save_run

    models = tmp_path / "models"
    run = save_run(pear_network, models / "pear" / "run1", {"symmetric": True})
    assert_hub_root(run, "CrossEncoder")
    assert module_types(run) == ["modeling_amrsim_pear.PearScorer"]  # the folder's own module code
    # without the flag sentence-transformers refuses it: never one order's scores in silence
    refused, report = load_in_fresh_process("cross", run, PAIRS, tmp_path, trust=False)
    assert refused is None and "trust_remote_code=True" in report["error"]
    outside, report = load_in_fresh_process("cross", run, PAIRS, tmp_path, trust=True)
    assert not report["amrsim_loaded"]
    inside = pear_scores("pear:run1", models)
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)
    first, second = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    one_order = pear_network.predict(first, second)
    np.testing.assert_allclose(inside, (one_order + pear_network.predict(second, first)) / 2, atol=1e-6, rtol=0)
    assert np.abs(inside - one_order).max() > 1e-6  # the orders differ: the test tells averaging from one order


def steady_fusion(pear_network, base: Path):
    """A fusion of the tiny network with its base, fitted on six pairs, its spreads set to 0.1 (see below)."""
    from dataclasses import replace

    from amrsim.methods.pear import fit_fusion
    from amrsim.methods.pear.model import base_cosines

    first, second = TEXTS + TEXTS[:2], list(reversed(TEXTS)) + TEXTS[2:]
    cosines = base_cosines(load_encoder(f"hf:{base}", device="cpu"), first, second)
    return replace(fit_fusion(pear_network.predict(first, second), cosines, f"hf:{base}", 0.6),
                   pear_std=0.1, base_std=0.1)


def test_pear_fused_run_loads_with_a_cross_encoder(pear_network, base, tmp_path):
    """Guards the loading path, not the fit: `CrossEncoder(run, trust_remote_code=True)` in a fresh process scores as
    amrsim does. The fusion's spreads are set to 0.1: z-scoring divides by them, and the tiny network's scores
    spread by 3e-5 only (cosines by 0.02), so one float32 ulp of a score (which may differ between processes, whose
    torch threads sum in another order) became a 1.4e-3 difference in the fused score and the test failed at
    random. With 0.1, one ulp moves a fused score by under 1e-6."""
    from amrsim.methods.pear import save_fused, save_run

    models = tmp_path / "models"
    save_run(pear_network, models / "pear" / "run1", {"symmetric": False})
    fusion = steady_fusion(pear_network, base)
    ulp = float(np.spacing(np.float32(1)))  # a float32 ulp of a score or cosine in [0.5, 1)
    moved = fusion.combine([0.5 + ulp, 0.5], [0.9, 0.9 + ulp]) - fusion.combine([0.5, 0.5], [0.9, 0.9])
    assert np.abs(moved).max() < 1e-6
    run = save_fused(models / "pear_fused" / "f1", "pear:run1", fusion, {})
    config = json.loads((run / "config_sentence_transformers.json").read_text())
    assert config["model_type"] == "CrossEncoder" and module_types(run) == ["modeling_amrsim_pear.PearFused"]
    assert (run / "pear" / "model.json").is_file()  # its PEAR part inside its own folder
    outside, report = load_in_fresh_process("cross", run, PAIRS, tmp_path, trust=True)
    assert not report["amrsim_loaded"]
    inside = pear_scores("pear_fused:f1", models)
    assert np.abs(inside).max() > 0 and not np.allclose(inside, pear_scores("pear:run1", models))
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)


def test_residual_pear_run_scores_with_its_base_in_the_saved_model(base, tmp_path):
    from amrsim.methods.pear import BaseOffset, PearCrossEncoder, save_run, start_from_base

    network = PearCrossEncoder(str(base), device="cpu")
    start_from_base(network, BaseOffset(load_encoder(f"hf:{base}", device="cpu"), f"hf:{base}", 0.8, 0.1))
    models = tmp_path / "models"
    run = save_run(network, models / "pear" / "res", {"symmetric": False, "residual": network.offset.record()})
    assert module_types(run) == ["modeling_amrsim_pear.PearScorer"] and (run / "config.json").is_file()
    assert (run / "base" / "modules.json").is_file()  # its base inside its own folder
    outside, report = load_in_fresh_process("cross", run, PAIRS, tmp_path, trust=True)
    assert not report["amrsim_loaded"]
    inside = pear_scores("pear:res", models)
    np.testing.assert_allclose(outside, inside, atol=1e-6, rtol=0)
    network.offset = None  # the network alone (the head is zeroed: σ(0) for every pair) is not the model
    assert np.abs(inside - network.predict([p[0] for p in PAIRS], [p[1] for p in PAIRS])).max() > 1e-3
