"""Run folders that carry their own module code (amrsim/methods/standalone): in a fresh process where `amrsim`
cannot be imported, `CrossEncoder(folder, trust_remote_code=True)` (order-averaged and residual PEAR, pear_fused) /
`SentenceTransformer(folder, trust_remote_code=True)` (meaning) give what amrsim's own loader gives (to 1e-6),
expose trainable parameters, fine-tune one step (the scores change), save and reload the same, and load the same
from another place (the folder moved away from its models root). amrsim refuses a folder whose code was changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from amrsim.methods.loaders import load_encoder
from amrsim.methods.portable import CODE_HASHES, code_problem, make_standalone, save_amrsim_module
from tests.forked import fresh_python
from tests.helpers import tiny_sentence_transformer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

TEXTS = ["the red cat runs", "the blue dog sleeps", "der hund", "the green bird sings fish"]
PAIRS = [[a, b] for a, b in zip(TEXTS, reversed(TEXTS), strict=True)] + [["der hund", "the cat runs"]]
rng = np.random.default_rng(0)

# the child: amrsim made unimportable before anything else; loads, saves, moves and fine-tunes the folder
CHILD = """
import json, shutil, sys
from pathlib import Path


class NoAmrsim:
    def find_spec(self, name, path=None, target=None):
        if name == "amrsim" or name.startswith("amrsim."):
            raise ImportError(f"amrsim is not installed here ({name})")


sys.meta_path.insert(0, NoAmrsim())
import numpy as np
import torch
from sentence_transformers import CrossEncoder, SentenceTransformer

kind, path, inputs, work = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3]), Path(sys.argv[4])
bi = kind == "bi"


def load(p):
    return (SentenceTransformer if bi else CrossEncoder)(str(p), device="cpu", trust_remote_code=True)


def run(model):
    values = model.encode(inputs) if bi else model.predict([tuple(p) for p in inputs])
    return np.asarray(values, dtype=np.float64)


A = ["the red cat runs", "the blue dog sleeps", "der hund", "the green bird sings fish"] * 2
B = ["der hund", "the cat runs", "the blue dog sleeps", "the red cat runs"] * 2
LABELS = [1.0, 0.0, 0.5, 0.2, 0.9, 0.1, 0.3, 0.7]


def one_step(model):
    \"\"\"One step of sentence-transformers' own trainer on 8 pairs, as a user fine-tunes a downloaded model.\"\"\"
    from datasets import Dataset

    if bi:
        from sentence_transformers import SentenceTransformerTrainer as Trainer
        from sentence_transformers import SentenceTransformerTrainingArguments as Args
        from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss as Loss
    else:
        from sentence_transformers.cross_encoder import CrossEncoderTrainer as Trainer
        from sentence_transformers.cross_encoder import CrossEncoderTrainingArguments as Args
        from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss as Loss
    args = Args(output_dir=str(work / "trainer"), max_steps=1, per_device_train_batch_size=8, learning_rate=1e-2,
                report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True)
    data = Dataset.from_dict({"a": A, "b": B, "label": LABELS})
    Trainer(model=model, args=args, train_dataset=data, loss=Loss(model)).train()
    model.eval()
    return "trainer"


model = load(path)
out = {"loaded": run(model)}
report = {"trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
          "modules": [type(m).__name__ for m in model]}
model.save(str(work / "saved"))
out["saved"] = run(load(work / "saved"))
shutil.move(str(path), str(work / "moved"))  # away from its models root: nothing may be looked up there
try:
    out["moved"] = run(load(work / "moved"))
finally:
    shutil.move(str(work / "moved"), str(path))
report["fine_tune"] = one_step(model)
out["tuned"] = run(model)
np.savez(work / "out.npz", **out)
report["amrsim_loaded"] = any(m == "amrsim" or m.startswith("amrsim.") for m in sys.modules)
print(json.dumps(report))
"""


def outside_amrsim(kind: str, run: Path, inputs: list, tmp: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The child's outputs (loaded, saved-and-reloaded, moved, fine-tuned one step) and its report."""
    work = tmp / f"child-{run.name}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    done = fresh_python(CHILD, kind, str(run), json.dumps(inputs), str(work), cwd=work)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert not report["amrsim_loaded"]
    with np.load(work / "out.npz") as out:
        return {k: out[k] for k in out.files}, report


def assert_standalone(run: Path, inside: np.ndarray, out: dict[str, np.ndarray], report: dict, trainable: int) -> None:
    """Same outputs as amrsim loaded, saved and moved; the trainable parameters exposed; one step changes them."""
    for how in ("loaded", "saved", "moved"):
        assert out[how].shape == inside.shape, how
        np.testing.assert_allclose(out[how], inside, atol=1e-6, rtol=0, err_msg=how)
    assert report["trainable"] == trainable > 0
    assert np.abs(out["tuned"] - inside).max() > 1e-4
    assert code_problem(run) is None


def module_type(run: Path) -> str:
    return json.loads((run / "modules.json").read_text())[0]["type"]


def network_size(path: Path) -> int:
    from transformers import AutoModelForSequenceClassification

    return sum(p.numel() for p in AutoModelForSequenceClassification.from_pretrained(str(path)).parameters())


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tiny_sentence_transformer(tmp_path_factory.mktemp("base"), hidden=64)


@pytest.fixture(scope="module")
def pear_network(base):
    from amrsim.methods.pear import Params, PearCrossEncoder, train_epochs

    model = PearCrossEncoder(str(base), device="cpu")
    t1, t2 = TEXTS * 3, list(reversed(TEXTS)) * 3
    train_epochs(model, t1, t2, rng.random(len(t1)).astype(np.float32), Params(datasets=["toy"], lr=1e-3,
                                                                              batch_size=4), epochs=1)
    return model


def pear_scores(name: str, models: Path) -> np.ndarray:
    return load_encoder(name, models_root=models, device="cpu").score([p[0] for p in PAIRS], [p[1] for p in PAIRS])


def test_order_averaged_pear_run_stands_alone(pear_network, tmp_path):
    """The default PEAR run (both orders averaged) as the card stage completes it: no amrsim needed to score,
    save, move or fine-tune it."""
    from amrsim.methods.pear import save_run

    models = tmp_path / "models"
    run = save_run(pear_network, models / "pear" / "run1", {"symmetric": True})
    assert make_standalone(run) and module_type(run) == "modeling_amrsim_pear.PearScorer"
    assert (run / "modeling_amrsim_pear.py").is_file() and (run / CODE_HASHES).is_file()
    inside = pear_scores("pear:run1", models)
    out, report = outside_amrsim("cross", run, PAIRS, tmp_path)
    assert_standalone(run, inside, out, report, network_size(run))
    assert make_standalone(run)  # done already: nothing to do


@pytest.mark.parametrize("pooling", ["", "#mean"])  # a sentence-transformers base; a transformers one, amrsim pooling
def test_residual_pear_run_carries_its_base(pooling, base, tmp_path):
    """A residual run whose saver names its residual record (the call site's change): the base bi-encoder is
    copied into `base/` (as a sentence-transformers model); it stays frozen, only the network trains."""
    from amrsim.methods.pear import BaseOffset, PearCrossEncoder, save_run, start_from_base

    network = PearCrossEncoder(str(base), device="cpu")
    name = f"hf:{base}{pooling}"
    start_from_base(network, BaseOffset(load_encoder(name, device="cpu"), name, 0.8, 0.1))
    models = tmp_path / "models"
    record = network.offset.record()
    run = save_run(network, models / "pear" / "res", {"symmetric": True, "residual": record})
    save_amrsim_module(run, "cross-encoder", {"pear": {"symmetric": True, "max_length": 128, "residual": record}})
    assert module_type(run) == "modeling_amrsim_pear.PearScorer" and (run / "base" / "modules.json").is_file()
    inside = pear_scores("pear:res", models)
    out, report = outside_amrsim("cross", run, PAIRS, tmp_path)
    assert_standalone(run, inside, out, report, network_size(run))


def test_pear_fused_run_holds_its_pear_run_and_base(pear_network, base, tmp_path):
    """pear_fused as the card stage completes it: its PEAR run in `pear/` and its base in `base/`, so the folder
    moved away from its models root scores the same. The spreads are 0.1 (test_hub_loading says why)."""
    from amrsim.methods.pear import save_fused, save_run
    from tests.methods.test_hub_loading import steady_fusion

    models = tmp_path / "models"
    save_run(pear_network, models / "pear" / "run1", {"symmetric": True})
    run = save_fused(models / "pear_fused" / "f1", "pear:run1", steady_fusion(pear_network, base), {})
    assert make_standalone(run) and module_type(run) == "modeling_amrsim_pear.PearFused"
    assert (run / "pear" / "model.safetensors").is_file() and (run / "base" / "modules.json").is_file()
    inside = pear_scores("pear_fused:f1", models)
    out, report = outside_amrsim("cross", run, PAIRS, tmp_path)
    assert_standalone(run, inside, out, report, network_size(run / "pear"))


def test_a_fused_run_saved_with_its_parts_named_stands_alone_at_once(pear_network, base, tmp_path):
    """save_amrsim_module with `parts` (what save_fused would pass) copies them in before model.json exists."""
    from amrsim.methods.pear import save_run

    models = tmp_path / "models"
    save_run(pear_network, models / "pear" / "run1", {"symmetric": False})
    run = models / "pear_fused" / "f2"
    run.mkdir(parents=True)
    save_amrsim_module(run, "cross-encoder", parts={"pear": "pear:run1", "base": f"hf:{base}"})
    # the fusion statistics come with model.json, which save_fused writes after this call
    assert module_type(run) == "modeling_amrsim_pear.PearFused" and (run / "pear" / "model.json").is_file()
    assert (run / "base" / "modules.json").is_file() and code_problem(run) is None


def test_meaning_run_stands_alone(base, tmp_path):
    import torch

    from amrsim.methods.meaning.model import MeaningModel, StsHead, save_model
    from amrsim.methods.meaning.params import Hyper

    torch.manual_seed(0)
    models = tmp_path / "models"
    head = StsHead(64, hidden=8)
    torch.nn.init.normal_(head.mlp[-1].weight, std=0.1)  # a trained head: not the identity it starts as
    run = save_model(models / "meaning" / "run1", MeaningModel(64, 2, head="mlp", hidden=8), f"hf:{base}",
                     ["en", "de"], Hyper(head="mlp", hidden=8, sts_hidden=8), head)
    assert make_standalone(run) and module_type(run) == "modeling_amrsim_meaning.MeaningEncoder"
    inside = load_encoder("meaning:run1", models_root=models, device="cpu").encode(TEXTS)
    out, report = outside_amrsim("bi", run, TEXTS, tmp_path)
    stage1 = MeaningModel(64, 2, head="mlp", hidden=8)
    trainable = sum(p.numel() for p in stage1.parameters()) + sum(p.numel() for p in head.parameters())
    assert_standalone(run, inside, out, report, trainable)


def test_a_run_whose_model_amrsim_cannot_carry_keeps_amrsims_module(base, tmp_path):
    """A meaning run over the encoder it trained (model.json `text_encoder`: muse in PyTorch, amrsim's class) and a
    residual PEAR run over a trained run with amrsim's module as its base stay as they were: modules.json names
    amrsim's installed module; nothing is half written."""
    import torch

    from amrsim.methods.meaning.model import MeaningModel, save_model
    from amrsim.methods.meaning.params import Hyper

    torch.manual_seed(0)
    run = save_model(tmp_path / "models" / "meaning" / "own", MeaningModel(64, 2), f"hf:{base}", ["en", "de"],
                     Hyper(), extra_meta={"text_encoder": "text_encoder"})
    assert not make_standalone(run) and module_type(run) == "amrsim.methods.hub.AmrsimEncoder"
    assert not (run / "modeling_amrsim_meaning.py").exists() and not (run / "base").exists()
    residual = tmp_path / "models" / "pear" / "res"
    residual.mkdir(parents=True)
    record = {"base": "meaning:own", "slope": 1.0, "intercept": 0.0, "eps": 0.02}
    save_amrsim_module(residual, "cross-encoder", {"pear": {"symmetric": True, "residual": record}})
    assert module_type(residual) == "amrsim.methods.hub.AmrsimPairScorer" and code_problem(residual) is None


def test_amrsim_refuses_a_folder_whose_code_was_changed_or_points_outside(pear_network, tmp_path):
    from amrsim.errors import ConfigError
    from amrsim.methods.hub import load_run
    from amrsim.methods.pear import save_run

    models = tmp_path / "models"
    run = save_run(pear_network, models / "pear" / "run1", {"symmetric": True})
    assert make_standalone(run) and code_problem(run) is None
    module = run / "modeling_amrsim_pear.py"
    original = module.read_text()
    module.write_text(original + "\nimport os\n")
    problem = code_problem(run)
    assert problem is not None and "modeling_amrsim_pear.py" in problem and "\n" not in problem
    for load in (lambda: load_encoder("pear:run1", models_root=models, device="cpu"), lambda: load_run(run)):
        with pytest.raises(ConfigError, match="differs from the module code amrsim wrote"):
            load()
    module.write_text(original)
    modules = json.loads((run / "modules.json").read_text())
    (run / "modules.json").write_text(json.dumps([{**modules[0], "type": "os.path.Thing"}]))
    problem = code_problem(run)
    assert problem is not None and "os.path.Thing" in problem and "\n" not in problem
    with pytest.raises(ConfigError, match="names code amrsim did not write"):
        load_encoder("pear:run1", models_root=models, device="cpu")
