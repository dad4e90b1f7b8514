"""Each training method is declared once (a `MethodSpec` in `amrsim/methods/<name>/__init__.py`, listed in
`amrsim.methods.registry`): `METHODS`, `TRAINED_LOADERS`, `TRAINED_INPUTS`, the card facts, `amrsim train`'s help
and `STAGES` follow it, and a toy method whose package lives outside amrsim, registered in a test alone, is
validated in pipelines.yaml, trained, loaded, evaluated and carded through the public entry points."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap

import polars as pl
import pytest
from typer.testing import CliRunner

from amrsim.cli import app
from amrsim.config import StsEvalConfig, load_config
from amrsim.encoders import find_trained
from amrsim.methods import CARDS, METHODS, MethodSpec, method_spec, register, specs
from amrsim.methods import registry as method_registry
from amrsim.methods.loaders import TRAINED_INPUTS, TRAINED_LOADERS, load_encoder
from amrsim.stages import sts_stage
from amrsim.stages.evaluate.card import render_card
from amrsim.stages.ingest import ingest_stage
from amrsim.stages.train import STAGES, train_method
from amrsim.warehouse import Warehouse

BUILT_IN = ["s3bert", "mse_amr", "dueam", "pear", "meaning"]


def test_every_table_is_built_from_the_specs():
    assert [s.name for s in specs()] == BUILT_IN == list(METHODS) == list(STAGES)
    assert all(METHODS[s.name] is s.params and STAGES[s.name] is not None for s in specs())
    assert list(TRAINED_LOADERS) == ["mse_amr", "pear", "pear_fused", "meaning"]  # s3bert, dueam: plain ST dirs
    assert list(TRAINED_INPUTS) == ["mse_amr"]
    assert list(CARDS) == ["s3bert", "mse_amr", "dueam", "pear", "pear_fused", "meaning"]
    assert CARDS["pear_fused"].command == "amrsim train pear"
    assert method_spec("s3bert").defaults["epochs"] == 2  # the params model's defaults (its DEFAULTS)
    help_text = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"}).output
    assert "s3bert, mse_amr, dueam, pear or meaning" in help_text
    with pytest.raises(KeyError, match="unknown training method 'nope'"):
        method_spec("nope")


def test_a_taken_name_is_refused(monkeypatch):
    monkeypatch.setattr(method_registry, "SPECS", dict(method_registry.SPECS))
    with pytest.raises(ValueError, match="pear_fused registered already"):
        register(MethodSpec("pear_fused", METHODS["pear"], print, CARDS["pear"]))


# the toy method: its whole package, written to a temporary directory (nothing in amrsim names it)
TOY_PACKAGE = '''
"""A toy method: one Adam step pulling each pair's embeddings together; its run is a sentence-transformers
directory, loaded through its own loader; its stage reads the pinned `pairs` table."""

from typing import Any

import polars as pl

from amrsim.methods import CardFacts, MethodSpec, TrainingArgs
from amrsim.methods.training import finish_encoder_run
from amrsim.stages.train.common import TrainingStage
from amrsim.warehouse import OK

LOADED = []  # names the loader loaded


class Params(TrainingArgs):
    DEFAULTS = {"lr": 1e-3, "epochs": 1}
    datasets: list[str]
    base_model: str

    def dataset_refs(self):
        return [("datasets", d) for d in self.datasets]


def train_toy(base: str, texts1: list[str], texts2: list[str], out_dir, params: Params, meta: dict) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(base, device="cpu")
    optimizer = torch.optim.Adam(model.parameters(), lr=params.lr)
    features = [model.tokenize(t) for t in (texts1, texts2)]
    a, b = (model(f)["sentence_embedding"] for f in features)
    loss = (1 - torch.nn.functional.cosine_similarity(a, b)).mean()
    loss.backward()
    optimizer.step()
    finish_encoder_run(out_dir, "toy", model, None, {"base_model": base, **meta})
    return {"loss": float(loss.detach())}


def load_toy(model, name, batch_size, device, models_root, load):
    LOADED.append(name)
    return load(f"hf:{model.path}", batch_size, device)


def stage(pipe, params: Params, run_id: str) -> dict[str, Any]:
    run = TrainingStage(pipe, "toy", run_id)  # the skeleton every stage shares: the toy supplies what differs
    with run.record(params, params.datasets, ["pairs"]) as versions:
        rows = pl.concat([run.wh.read(d, "pairs", version=versions[f"{d}.pairs"]) for d in params.datasets])
        rows = rows.filter(pl.col("status") == OK)
        train_toy(params.base_model, rows["sentence1"].to_list(), rows["sentence2"].to_list(), run.out_dir, params,
                  {"table_versions": versions, "params": params.model_dump(mode="json")})
        run.count(rows.height, rows.height, 0)
        run.completed = True
    return run.summary()


SPEC = MethodSpec("toy", Params, train_toy, CardFacts(
    "Toy", "A test, 2026", "One Adam step pulling paired sentences together.", "sentence-similarity",
    ("sentence-transformers", "toy"), "amrsim train toy"), loader=load_toy, stage=stage)
'''

CONFIG = """
default_pipeline: p
warehouse: warehouse
run_dir: .amrsim
pipelines:
  p:
    datasets:
      toy_pairs:
        path: pairs.jsonl
        kind: pairs
        columns: {{id: idx, split: split, score: gold}}
    train:
      - method: toy
        params: {{datasets: [toy_pairs], base_model: {model}, device: cpu}}
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy method's package on sys.path and its spec registered, for one test."""
    package = tmp_path / "pkgs" / "amrsim_toy_method"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(TOY_PACKAGE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.delitem(sys.modules, "amrsim_toy_method", raising=False)
    module = importlib.import_module("amrsim_toy_method")
    monkeypatch.setattr(method_registry, "SPECS", dict(method_registry.SPECS))  # undone after the test
    register(module.SPEC)
    yield module
    sys.modules.pop("amrsim_toy_method", None)


@pytest.mark.slow
def test_a_method_registered_alone_trains_loads_evaluates_and_has_a_card(toy, tmp_path, write_config, tiny_model,
                                                                          one_thread):
    words = [("the red cat runs", "the red cat sleeps", 4.0), ("the blue dog eats", "the green bird runs", 1.0),
             ("the black fish sleeps", "the black fish eats", 4.5), ("the cat runs", "the dog eats", 0.5)]
    rows = [{"idx": f"i{i}", "split": "test", "gold": g, "sentence1": a, "sentence2": b}
            for i, (a, b, g) in enumerate(words)]
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    cfg = load_config(write_config(CONFIG.format(model=json.dumps(tiny_model))))  # `method: toy` validates
    assert "toy" in METHODS and STAGES["toy"] is toy.stage and TRAINED_LOADERS["toy"] is toy.load_toy
    pipe = cfg.section("p")
    ingest_stage(pipe, "toy_pairs", "r0")

    summary = train_method(pipe, "toy", cfg.project.pipelines["p"].train[0].params, "r1")
    assert summary["status"] == "ok" and summary["model"] == "toy:r1" and summary["rows_in"] == 4
    wh = Warehouse(cfg.warehouse_root)
    assert (wh.models_root / "toy" / "r1" / "README.md").exists()  # its card, written when the run finished

    vectors = load_encoder("toy:latest", device="cpu", models_root=wh.models_root).encode(["the red cat runs"])
    assert vectors.shape == (1, 64) and toy.LOADED == ["toy:latest"]

    run, results = sts_stage(wh, "p", StsEvalConfig(encoders=["toy:latest"], datasets=["toy_pairs"]), "r2",
                             device="cpu")
    assert set(results.filter(pl.col("metric") == "spearman")["n"]) == {4}

    card = str(render_card(wh, find_trained("toy:latest", wh.models_root)))
    assert "One Adam step pulling paired sentences together." in card and "A test, 2026" in card
    assert "amrsim train toy" in card and "toy:r1" in card
