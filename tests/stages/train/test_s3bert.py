"""S3BERT through the warehouse: pairs with provided graphs -> metrics stage -> the s3bert train stage -> a model the
encoders load, naming the table versions it saw; config errors before any training; graph failures counted."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from amrsim.config import load_config
from amrsim.encoders import find_trained
from amrsim.errors import ConfigError
from amrsim.methods import method_params
from amrsim.methods.loaders import load_encoder
from amrsim.metrics.engine import score_pairs
from amrsim.stages import metrics_stage
from amrsim.stages.ingest import ingest_stage
from amrsim.stages.train import s3bert as s3bert_run
from amrsim.stages.train import train_method
from amrsim.warehouse import Warehouse
from tests.helpers import ANIMALS, COLOURS, VERBS

ASPECTS = ["concepts", "frames", "named_entities"]  # n_aspects=3: the first three of the paper's order


def graph(colour: str, animal: str, verb: str) -> str:
    return f"(v / {verb}-01 :ARG0 (a / {animal} :mod (c / {colour})))"


def pair_rows(seed: int, n: int, split: str) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        a, b = rng.integers(4, size=3), rng.integers(4, size=3)
        w1 = (COLOURS[a[1]], ANIMALS[a[0]], VERBS[a[2]])
        w2 = (COLOURS[b[1]], ANIMALS[b[0]], VERBS[b[2]])
        rows.append({"idx": f"{split}{i}", "split": split, "gold": float(rng.random() * 5),
                     "sentence1": "the {} {} {}".format(*w1), "sentence2": "the {} {} {}".format(*w2),
                     "amr1": graph(*w1), "amr2": graph(*w2)})
    return rows


CONFIG = """
default_pipeline: toy
warehouse: warehouse
run_dir: .amrsim
pipelines:
  toy:
    datasets:
      toy_pairs:
        path: pairs.jsonl
        kind: pairs
        columns: {{id: idx, split: split, score: gold, amr1: amr1, amr2: amr2}}
    metrics:
      datasets: [toy_pairs]
      parser: provided
      vectors: random
      aspects: {aspects}
    train:
      - method: s3bert
        params: {{datasets: [toy_pairs], base_model: {model}, n_aspects: 3, batch_size: 8, epochs: 1, warmup: 0,
                  lr: 1.0e-3, eval_every: 3, workers: 1, device: cpu}}
"""


@pytest.fixture
def project(tmp_path, write_config, tiny_model):  # noqa: F811
    rows = pair_rows(0, 24, "train") + pair_rows(1, 8, "dev")
    rows[3].update(sentence2="the cat", amr2="(a / b")  # a graph that does not parse: left out, counted
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")

    def make(aspects: list[str] = ASPECTS, model: str = tiny_model):
        path = write_config(CONFIG.format(aspects=json.dumps(aspects), model=json.dumps(model)))
        cfg = load_config(path)
        wh = Warehouse(cfg.warehouse_root)
        ingest_stage(cfg.section("toy"), "toy_pairs", "r0")
        options = cfg.project.pipelines["toy"].metrics.options()
        metrics_stage(wh, "toy", "toy_pairs", options, "r0", partial(score_pairs, options=options))
        params = cfg.project.pipelines["toy"].train[0].params
        return cfg, wh, params

    return make


@pytest.mark.slow
def test_trains_from_the_warehouse_and_records_what_it_saw(project, one_thread):
    cfg, wh, params = project()
    summary = train_method(cfg.section("toy"), "s3bert", params, "run1")
    assert summary["status"] == "ok" and summary["model"] == "s3bert:run1"
    # the broken graph is ingested as given and fails in the metrics stage: its pair is skipped, not a crash
    assert summary["left_out"] == {"failed pair rows": 0, "graph failed or missing": 0,
                                   "metrics failed or missing": 1, "negatives failed to score": 0}
    # 23 usable train pairs + one scored negative each
    assert summary["computed"] == 46 and summary["total_steps"] == 6
    meta = json.loads((wh.models_root / "s3bert" / "run1" / "model.json").read_text())
    assert meta["data"]["table_versions"] == {f"toy_pairs.{t}": wh.version("toy_pairs", t)
                                              for t in ("pairs", "amr", "amr_metrics")}
    assert meta["data"]["train_positives"] == 23 and meta["data"]["dev"]["positives"] == 8
    assert meta["data"]["dev"]["rows"] == 16
    assert list(meta["aspects"]) == ["concepts", "frames", "named_entities"]
    assert meta["metrics"]["best_step"] in (3, 6) and meta["seed"] == 0
    model = find_trained("s3bert:latest", wh.models_root)
    assert model.run_id == "run1"
    vectors = load_encoder("s3bert:latest", models_root=wh.models_root).encode(["the red cat runs"])
    assert vectors.shape == (1, 64)
    lineage = wh.read("meta", "lineage").filter(pl.col("stage") == "train:s3bert")
    assert lineage.height == 1 and lineage["rows_computed"][0] == 46 and lineage["status"][0] == "ok"


@pytest.mark.slow
def test_a_run_folder_names_no_path_of_this_machine(project, one_thread, tmp_path):
    """A run on the packaged base (`minilm`, a site-packages directory) records the base by its name and its own
    folder relative to itself, in every file it writes (model.json, request.json, configs), so the folder means the
    same wherever it is copied; a rerun of the same request still reports where the run is."""
    from amrsim.methods.training import base_model_path

    cfg, wh, params = project(model="minilm")
    first = train_method(cfg.section("toy"), "s3bert", params, "run1")
    run = wh.models_root / "s3bert" / "run1"
    assert first["status"] == "ok" and first["model_dir"] == str(run)
    site = base_model_path("minilm")
    texts = {p.relative_to(run): p.read_text(encoding="utf-8") for p in run.rglob("*")
             if p.is_file() and p.suffix in {".json", ".md", ".txt", ".py"}}
    assert {"model.json", "request.json", "config.json"} <= {str(p) for p in texts}
    for name, text in texts.items():
        assert site not in text and str(tmp_path) not in text, name
    meta = json.loads(texts[Path("model.json")])
    assert meta["base"] == "minilm" and meta["base_model"] == "minilm"
    assert json.loads(texts[Path("request.json")])["summary"]["model_dir"] == "."
    again = train_method(cfg.section("toy"), "s3bert", params, "run1")
    assert again["status"] == "ok (reused)" and again["model_dir"] == str(run)


def test_negatives_are_scored_graph1_of_one_pair_vs_graph2_of_another(project):
    cfg, wh, params = project()
    checked = method_params("s3bert", params)
    options = cfg.project.pipelines["toy"].metrics.options()
    columns = s3bert_run.required_columns(3)
    rows, _ = s3bert_run.scored_pairs(wh, "toy_pairs", "train", ["en"], "provided", options, columns)
    t1, t2, raw, dropped = s3bert_run.with_scored_negatives(rows, columns, options, checked.seed, 1)
    n = rows.height
    assert dropped == 0 and len(t1) == len(t2) == raw.shape[0] == 2 * n
    s1, s2 = rows["sentence1"].to_list(), rows["sentence2"].to_list()
    amr1, amr2 = rows["amr1"].to_list(), rows["amr2"].to_list()
    for i in range(n):
        k = n + i
        assert t1[k] == s1[i]
        j = s2.index(t2[k])  # a graph is a function of its sentence here, so any j with that sentence will do
        expected = score_pairs(pl.DataFrame({"amr1": [amr1[i]], "amr2": [amr2[j]]}), options)
        assert np.allclose(raw[k], expected.select(columns).to_numpy()[0])
    assert np.allclose(raw[:n], rows.select(columns).to_numpy())


def test_an_aspect_the_metrics_stage_leaves_out_is_a_config_error_before_training(project, monkeypatch):
    cfg, wh, params = project(aspects=["concepts", "frames"])  # no `named_entities`

    def no_training(*a, **k):
        raise AssertionError("training must not start")

    monkeypatch.setattr(s3bert_run, "train_s3bert", no_training)
    with pytest.raises(ConfigError, match="named_entities"):
        train_method(cfg.section("toy"), "s3bert", params, "run2")


def test_params_are_validated_with_the_config(write_config, tmp_path):
    (tmp_path / "p.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n")
    body = """
    default_pipeline: p
    pipelines:
      p:
        datasets:
          d: {path: p.tsv, kind: pairs}
        train:
          - method: s3bert
            params: %s
    """
    with pytest.raises(Exception, match="no_such_key"):
        load_config(write_config(body % "{datasets: [d], no_such_key: 1}"))
    with pytest.raises(Exception, match="unknown dataset 'missing'"):
        load_config(write_config(body % "{datasets: [missing]}"))
    with pytest.raises(ValidationError):
        method_params("s3bert", {"datasets": []})
    assert method_params("s3bert", {"datasets": ["d"]}).epochs == 2  # the paper's defaults


def test_explain_prints_every_aspect_and_the_contributions_add_up(project, one_thread):
    from typer.testing import CliRunner

    from amrsim.cli import app
    from amrsim.methods.s3bert import contributions, explain, layout_from_meta

    cfg, wh, params = project()
    train_method(cfg.section("toy"), "s3bert", {**params, "max_steps": None, "epochs": 1}, "run3")
    result = CliRunner().invoke(app, ["explain", "the red cat runs", "the blue dog runs", "--config", str(cfg.path)])
    assert result.exit_code == 0, result.output
    for name in ("overall", "concepts", "frames", "named_entities", "residual"):
        assert name in result.output
    model = find_trained("s3bert:latest", wh.models_root)
    layout = layout_from_meta(model.meta)
    encoder = load_encoder("s3bert:latest", models_root=wh.models_root)
    emb = encoder.encode(["the red cat runs", "the blue dog runs"])
    parts = contributions(emb[0], emb[1], layout)
    assert sum(parts.values()) == pytest.approx(explain(encoder, "the red cat runs", "the blue dog runs",
                                                        layout)["overall"], abs=1e-5)
    missing = CliRunner().invoke(app, ["explain", "a", "b", "--model", "s3bert:nope", "--config", str(cfg.path)])
    assert missing.exit_code != 0 and "nope" in str(missing.exception)


def test_a_run_with_a_dev_split_resumes_when_tables_return_rows_in_another_order(project, one_thread, monkeypatch):
    cfg, wh, params = project()
    first = train_method(cfg.section("toy"), "s3bert", {**params, "max_steps": 2}, "resumable")
    assert first["status"] == "partial" and first["steps"] == 2
    # a Delta table has no row order: after a compaction, or read from its files in another order, the same rows
    # come back shuffled; the run's data fingerprint must not change
    read = Warehouse.read

    def shuffled(self, *args, **kwargs):
        frame = read(self, *args, **kwargs)
        return frame.sample(fraction=1.0, shuffle=True, seed=7) if isinstance(frame, pl.DataFrame) else frame

    monkeypatch.setattr(Warehouse, "read", shuffled)
    second = train_method(cfg.section("toy"), "s3bert", params, "resumable")
    assert second["status"] == "ok" and second["resumed_from"] == 2 and second["steps"] == second["total_steps"]
    meta = json.loads((wh.models_root / "s3bert" / "resumable" / "model.json").read_text())
    assert meta["data"]["dev"]["rows"] == 16
