"""Model cards: a trained run's README.md in the sentence-transformers / Hub layout, rewritten when results for the
run are stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import partial

import numpy as np
import pytest
import yaml

from amrsim.config import load_config
from amrsim.metrics.engine import score_pairs
from amrsim.stages import metrics_stage
from amrsim.stages.evaluate import bitext_eval
from amrsim.stages.evaluate.card import hub_id, refresh_cards, table_versions
from amrsim.stages.ingest import ingest_stage
from amrsim.stages.train import train_method
from amrsim.warehouse import Warehouse
from tests.helpers import sentence_transformer_run, tiny_sentence_transformer

ANIMALS, COLOURS, VERBS = ["cat", "dog", "bird", "fish"], ["red", "blue", "green", "black"], ["run", "eat", "sleep",
                                                                                              "sing"]
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
      aspects: [concepts, frames, named_entities]
    train:
      - method: s3bert
        params: {{datasets: [toy_pairs], base_model: {model}, n_aspects: 3, batch_size: 8, epochs: 1, warmup: 0,
                  lr: 1.0e-3, eval_every: 3, workers: 1, device: cpu}}
"""


def pair_rows(seed: int, n: int, split: str) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        words = [(COLOURS[a[1]], ANIMALS[a[0]], VERBS[a[2]]) for a in rng.integers(4, size=(2, 3))]
        text = ["the {} {} {}s".format(*w) for w in words]
        amr = ["(v / {2}-01 :ARG0 (a / {1} :mod (c / {0})))".format(*w) for w in words]
        rows.append({"idx": f"{split}{i}", "split": split, "gold": float(rng.random() * 5), "sentence1": text[0],
                     "sentence2": text[1], "amr1": amr[0], "amr2": amr[1]})
    return rows


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_a_trained_run_gets_a_card_that_new_results_update(tmp_path, write_config, one_thread):
    base = tiny_sentence_transformer(tmp_path / "base", hidden=64)  # 3 aspects x 16 dims + a residual
    rows = pair_rows(0, 16, "train") + pair_rows(1, 8, "dev")
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    cfg = load_config(write_config(CONFIG.format(model=json.dumps(str(base)))))
    wh = Warehouse(cfg.warehouse_root)
    ingest_stage(cfg.section("toy"), "toy_pairs", "r0")
    options = cfg.project.pipelines["toy"].metrics.options()
    metrics_stage(wh, "toy", "toy_pairs", options, "r0", partial(score_pairs, options=options))
    summary = train_method(cfg.section("toy"), "s3bert", cfg.project.pipelines["toy"].train[0].params, "run1")
    assert summary["status"] == "ok"

    path = wh.models_root / "s3bert" / "run1" / "README.md"
    card = path.read_text(encoding="utf-8")
    meta = front_matter(card)
    assert meta["library_name"] == "sentence-transformers" and meta["pipeline_tag"] == "sentence-similarity"
    assert meta["datasets"] == ["toy_pairs"] and {"s3bert", "amrsim", "sentence-transformers"} <= set(meta["tags"])
    assert "base_model" not in meta  # a local directory has no Hub id; the body names it
    assert f"`{base}`" in card and "Opitz & Frank 2022" in card
    for table in ("pairs", "amr", "amr_metrics"):
        assert f"| toy_pairs.{table} | {wh.version('toy_pairs', table)} |" in card
    assert "| n_aspects | 3 |" in card and "| lr | 0.001 |" in card
    assert "None stored yet" in card
    # the card's loading snippet is true: the directory it names loads with sentence-transformers alone
    from sentence_transformers import SentenceTransformer

    assert 'SentenceTransformer("path/to/s3bert/run1")' in card
    assert SentenceTransformer(str(path.parent), device="cpu").encode(["the red cat runs"]).shape[0] == 1

    tsv = tmp_path / "tatoeba.deu-eng.tsv"
    tsv.write_text("deu\teng\nder hund\tthe dog\ndie katze\tthe cat\n", encoding="utf-8")
    results = bitext_eval(wh, "s3bert:latest", tsv, "e1", device="cpu")
    card = path.read_text(encoding="utf-8")
    assert "None stored yet" not in card
    for row in results.iter_rows(named=True):
        assert f"| bitext | tatoeba | test | deu-eng | {row['metric']} | {row['value']:.2f} | 2 |" in card


def test_refresh_skips_names_that_are_not_runs_and_runs_without_model_json(wh, tmp_path):
    enc = tiny_sentence_transformer(tmp_path / "enc")
    sentence_transformer_run(wh.models_root, "dueam", "d1", datetime(2026, 1, 1, tzinfo=UTC), enc,
                             learner_name="minilm", data={"table_versions": {"nli.triples": 4}},
                             params={"lam": 0.003})
    (wh.models_root / "dueam" / "broken").mkdir()
    written = refresh_cards(wh, ["minilm", "hf:x/y", "dueam:latest", "dueam:d1", "dueam:broken", "x:../../etc"])
    assert written == [wh.models_root / "dueam" / "d1" / "README.md"]
    meta = front_matter(written[0].read_text(encoding="utf-8"))
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["datasets"] == ["nli"]


@pytest.mark.parametrize(("name", "expected"), [("minilm", "sentence-transformers/all-MiniLM-L6-v2"), ("muse", None),
                                                ("hf:org/model#cls", "org/model"), ("hf:./local", None), (None, None)])
def test_hub_ids(name, expected):
    assert hub_id(name) == expected


def test_table_versions_are_found_wherever_a_method_records_them():
    meta = {"data": {"table_versions": {"a.pairs": 1}}, "stage1": {"versions": {"tables": {"b.parallel": 2},
                                                                                "files": {"f": "x"}}},
            "sts_table_versions": {"c.pairs": 3}}
    assert table_versions(meta) == {"a.pairs": 1, "b.parallel": 2, "c.pairs": 3}
