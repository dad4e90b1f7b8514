"""DuEAM: the losses and WMD against hand-computed values, identical and empty inputs, the paper's pair
constructions, and training a tiny randomly initialised bilingual BERT end to end through the warehouse (targets
computed once, checkpoint resume, loading back as `dueam:latest`)."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
import torch

from amrsim.methods.dueam import (
    EMPTY_TOKENS,
    Anchor,
    EmptyTokensError,
    NLIItem,
    anchor_loss,
    anchor_targets,
    construct_pairs,
    cosine_term,
    dueam_loss,
    train_dueam,
    wmd,
)
from amrsim.methods.dueam import model as dueam_model

HIDDEN = 32
EN = ["the", "a", "cat", "dog", "runs", "sleeps", "red", "blue", "is", "not"]
DE = ["der", "die", "katze", "hund", "lauft", "schlaft", "rot", "blau", "ist", "nicht"]  # lower-cased, accents stripped


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    """A randomly initialised 2-layer BERT (hidden 32) with an English + German word-level vocab, saved as a plain
    transformers directory (no modules.json): the path a hub model such as xlm-roberta-base takes."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root = tmp_path_factory.mktemp("tiny_bert")
    (root / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *EN, *DE]) + "\n",
                                    encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab=str(root / "vocab.txt"))
    assert tokenizer("Die Katze läuft")["input_ids"] == [2, 5 + len(EN) + 1, 5 + len(EN) + 2, 5 + len(EN) + 4, 3]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + len(EN) + len(DE), hidden_size=HIDDEN, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    BertModel(config).save_pretrained(root)
    tokenizer.save_pretrained(root)
    return str(root)


# ---------------------------------------------------------------- losses


def test_losses_on_hand_computed_tensors():
    # pair 1: s'=(1,0), t'=(0,1): ||s'-t'|| = sqrt 2, cos 0; WMD 0 -> target exp(0) = 1
    # pair 2: s'=t'=(3,4): distance 0 -> exp(0) = 1, cos 1; WMD ln 2 -> target 1/2
    s = torch.tensor([[1.0, 0.0], [3.0, 4.0]], requires_grad=True)
    t = torch.tensor([[0.0, 1.0], [3.0, 4.0]])
    w = torch.tensor([0.0, math.log(2.0)])
    l_a = ((1.0 - math.exp(-math.sqrt(2.0))) + (1.0 - 0.5)) / 2  # (0.756883 + 0.5) / 2
    l_b = (0.0 + 1.0) / 2
    assert anchor_loss(s, t, w).item() == pytest.approx(l_a, abs=1e-6)
    assert l_a == pytest.approx(0.6284416, abs=1e-6)
    assert cosine_term(s, t).item() == pytest.approx(0.5, abs=1e-6)
    total, la, lb = dueam_loss(s, t, w, lam=0.003)
    assert total.item() == pytest.approx(l_a - 0.003 * l_b, abs=1e-6)
    assert (la.item(), lb.item()) == pytest.approx((l_a, l_b), abs=1e-6)
    assert dueam_loss(s, t, w, lam=1.0)[0].item() == pytest.approx(l_a - l_b, abs=1e-6)
    # identical embeddings (distance 0) have a finite gradient, not NaN
    total.backward()
    assert torch.isfinite(s.grad).all()


# ---------------------------------------------------------------- WMD


def test_wmd_matches_a_hand_computed_two_by_two_transport():
    x = np.array([[0.0, 0.0], [1.0, 0.0]])
    y = np.array([[0.0, 1.0], [3.0, 0.0]])
    # costs: x0-y0 1, x0-y1 3, x1-y0 sqrt 2, x1-y1 2; plans [[t, .5-t], [.5-t, t]]: cost is linear in t, so the
    # optimum is a vertex: x0->y0, x1->y1 = .5*1 + .5*2 = 1.5 (the swap costs .5*3 + .5*sqrt 2 = 2.207)
    assert wmd(x, y, "uniform", normalize=False) == pytest.approx(1.5, abs=1e-9)
    assert wmd(y, x, "uniform", normalize=False) == pytest.approx(1.5, abs=1e-9)
    # norm weights: x tokens of norm 1 and 3 carry 1/4 and 3/4 to y's single token (0, .5)
    x2, y2 = np.array([[1.0, 0.0], [0.0, 3.0]]), np.array([[0.0, 0.5]])
    assert wmd(x2, y2, "norm", normalize=False) == pytest.approx(0.25 * math.sqrt(1.25) + 0.75 * 2.5, abs=1e-9)
    # normalised tokens: (1,0), (0,1) vs (0,1): half the mass moves sqrt 2, half stays
    assert wmd(x2, y2, "uniform", normalize=True) == pytest.approx(0.5 * math.sqrt(2.0), abs=1e-9)


def test_identical_token_sets_have_wmd_zero_and_empty_sets_are_refused():
    x = np.random.default_rng(0).normal(size=(5, 8))
    assert wmd(x, x) == pytest.approx(0.0, abs=1e-7) and wmd(x, x) >= 0.0
    with pytest.raises(EmptyTokensError, match="no tokens"):
        wmd(np.zeros((0, 8)), x)
    with pytest.raises(ValueError, match="token weights 'idf' unknown"):
        wmd(x, x, "idf")


def test_anchor_targets_identical_pairs_exactly_zero_empty_skipped_each_pair_once(tiny_bert, monkeypatch):
    calls = []
    real = dueam_model.wmd
    monkeypatch.setattr(dueam_model, "wmd", lambda *a, **k: calls.append(1) or real(*a, **k))
    anchor = Anchor(tiny_bert)
    t1 = ["the cat runs", "the cat runs", "die katze läuft", "\u200b", "the dog sleeps"]
    t2 = ["the cat runs", "the dog sleeps", "der hund schläft", "the cat", "the cat runs"]
    t1, t2 = t1 + t1[1:3], t2 + t2[1:3]  # repeated pairs: no new distance
    targets = anchor_targets(anchor, t1, t2)
    assert targets.wmd[0] == 0.0 and np.exp(-targets.wmd[0]) == 1.0  # identical sentences -> target exactly 1
    assert targets.skipped == {3: f"{EMPTY_TOKENS} (sentence1)"}  # a zero-width space: nothing left to embed
    assert np.isnan(targets.wmd[3]) and np.isfinite(np.delete(targets.wmd, 3)).all()
    assert (np.delete(targets.wmd, [0, 3]) > 0).all()
    assert targets.wmd[5] == targets.wmd[1] and targets.wmd[6] == targets.wmd[2]
    # the distances are those of the anchor's token embeddings without [CLS]/[SEP]
    tokens = anchor.tokens(["the cat runs", "the dog sleeps"])
    assert [len(t) for t in tokens] == [3, 3]
    # float32 token embeddings differ in the last bits with the batch's padding, hence 1e-6, not bit equality
    assert targets.wmd[1] == pytest.approx(real(tokens[0], tokens[1]), abs=1e-6)
    assert len(calls) == targets.distances_computed == 3  # (1), (2), (4): (4) is (1) reversed, a distinct pair
    assert targets.sentences_embedded == len(set(t1) | set(t2))


# ---------------------------------------------------------------- pairs


def nli_items() -> list[NLIItem]:
    return [
        NLIItem("i1", {"en": "P1", "de": "P1de"}, ({"en": "E1", "de": "E1de"}, {"en": "C1"})),
        NLIItem("i2", {"en": "P2"}, ({"en": "E2", "fr": "E2fr"},)),
        NLIItem("i3", {"de": "P3de"}, ({"de": "E3de"},)),
    ]


def as_tuples(pairs) -> set[tuple[str, str, str, str]]:
    return {(p.text1, p.text2, p.lang1, p.lang2) for p in pairs}


def test_monolingual_and_cross_lingual_pairs_of_a_small_table():
    items = nli_items()
    mono, missing = construct_pairs(items, ["monolingual"])
    assert not missing and all(p.mode == "monolingual" and p.item_id == p.source for p in mono)
    assert as_tuples(mono) == {("P1", "E1", "en", "en"), ("P1de", "E1de", "de", "de"), ("P1", "C1", "en", "en"),
                               ("P2", "E2", "en", "en"), ("P3de", "E3de", "de", "de")}
    cross, _ = construct_pairs(items, ["cross_lingual"])
    assert as_tuples(cross) == {("P1", "E1de", "en", "de"), ("P1de", "E1", "de", "en"), ("P1de", "C1", "de", "en"),
                                ("P2", "E2fr", "en", "fr")}
    both, _ = construct_pairs(items, ["monolingual", "cross_lingual"])
    assert as_tuples(both) == as_tuples(mono) | as_tuples(cross) and len(both) == 9
    english, _ = construct_pairs(items, ["monolingual", "cross_lingual"], langs=["en"])
    assert as_tuples(english) == {("P1", "E1", "en", "en"), ("P1", "C1", "en", "en"), ("P2", "E2", "en", "en")}
    capped, _ = construct_pairs(items, ["cross_lingual"], max_cross_per_item=1, seed=3)
    # E1 has two cross layouts (en-de, de-en), one kept; C1 (de-en) and E2 (en-fr) have one each
    assert len(capped) == 3 and as_tuples(capped) <= as_tuples(cross)
    assert {("P1de", "C1", "de", "en"), ("P2", "E2fr", "en", "fr")} <= as_tuples(capped)
    one_each = construct_pairs([NLIItem("x", {"en": "P", "de": "Pd", "fr": "Pf"}, ({"en": "H", "de": "Hd"},))],
                               ["cross_lingual"], max_cross_per_item=2, seed=0)[0]
    assert len(one_each) == 2  # 4 cross layouts (en-de, de-en, fr-en, fr-de), 2 sampled


def test_unsupervised_pairs_join_a_premise_with_another_items_hypothesis_in_the_same_layout():
    items = nli_items()
    hyps = {(it.item_id, lg): set() for it in items for h in it.hypotheses for lg in h}
    for it in items:
        for h in it.hypotheses:
            for lg, text in h.items():
                hyps[(it.item_id, lg)].add(text)
    layouts = construct_pairs(items, ["monolingual", "cross_lingual"])[0]
    for seed in range(5):
        pairs, missing = construct_pairs(items, ["unsupervised"], seed=seed)
        # every layout whose hypothesis language another item has; fr exists only in i2, so i2's en-fr is missing
        assert missing == {"unsupervised: no other item has a hypothesis in fr": 1}
        assert len(pairs) == len(layouts) - 1
        expected_layouts = Counter_of((p.item_id, p.text1, p.lang1, p.lang2) for p in layouts if p.lang2 != "fr")
        assert Counter_of((p.item_id, p.text1, p.lang1, p.lang2) for p in pairs) == expected_layouts
        for p in pairs:
            assert p.mode == "unsupervised" and p.source != p.item_id
            assert p.text2 in hyps[(p.source, p.lang2)]  # a real hypothesis of the other item, in lang2
        assert construct_pairs(items, ["unsupervised"], seed=seed)[0] == pairs  # seeded: reproducible
    with pytest.raises(ValueError, match="modes"):
        construct_pairs(items, ["supervised"])


def Counter_of(values) -> dict:  # noqa: N802 (reads like collections.Counter)
    from collections import Counter

    return dict(Counter(values))


# ---------------------------------------------------------------- training


def toy_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    animals, verbs = [("cat", "katze"), ("dog", "hund")], [("runs", "läuft"), ("sleeps", "schläft")]
    t1, t2 = [], []
    for _ in range(n):
        a, v, b, w = rng.integers(2, size=4)
        t1.append(f"the {animals[a][0]} {verbs[v][0]}")
        t2.append(f"die {animals[b][1]} {verbs[w][1]}" if rng.random() < 0.5 else f"the {animals[b][0]} "
                  f"{verbs[w][0]}")
    return t1, t2


@pytest.mark.slow
def test_train_resumes_without_recomputing_targets_and_saves_an_encoder(tiny_bert, tmp_path, monkeypatch,
                                                                        one_thread):
    from amrsim.methods.loaders import load_encoder

    t1, t2 = toy_pairs(40, 0)
    t1 += ["the cat runs", "\u200b"]  # an identical pair (target 1) and an empty one (skipped, counted)
    t2 += ["the cat runs", "the dog"]
    calls = []
    real = dueam_model.wmd
    monkeypatch.setattr(dueam_model, "wmd", lambda *a, **k: calls.append(1) or real(*a, **k))
    dev = (["the cat runs", "the dog sleeps", "the cat sleeps", "the dog runs"],
           ["the cat runs", "the cat runs", "the dog sleeps", "die katze läuft"], np.array([5.0, 1.0, 2.0, 3.0]))
    out_dir = tmp_path / "models" / "dueam" / "run1"
    kwargs = {"dev": dev, "batch_size": 8, "lr": 1e-3, "warmup": 1, "epochs": 3, "eval_every": 5, "device": "cpu"}
    first = train_dueam(tiny_bert, tiny_bert, t1, t2, out_dir, max_steps=5, **kwargs)
    assert not first["completed"] and first["steps"] == 5 and (out_dir / "checkpoint" / "anchor_wmd.npy").is_file()
    distinct = {(a, b) for a, b in zip(t1, t2, strict=True) if a != b and a != "\u200b"}
    assert len(calls) == len(distinct)  # each distinct pair once, not per epoch
    assert first["skipped"] == {f"{EMPTY_TOKENS} (sentence1)": 1} and first["train_pairs"] == 41

    done = train_dueam(tiny_bert, tiny_bert, t1, t2, out_dir, **kwargs)
    assert len(calls) == len(distinct)  # the resumed run read the targets from the checkpoint
    assert done["completed"] and done["resumed_from"] == 5 and done["steps"] == done["total_steps"] == 18
    assert {"config_sentence_transformers.json", "config.json", "model.json", "model.safetensors",
            "modules.json"} <= {p.name for p in out_dir.iterdir()} and not (out_dir / "checkpoint").exists()
    meta = json.loads((out_dir / "model.json").read_text(encoding="utf-8"))
    assert meta["method"] == "dueam" and meta["pooling"] == "mean" and meta["params"]["lam"] == 0.003
    identical = sum(a == b for a, b in zip(t1, t2, strict=True))
    assert identical >= 1 and meta["metrics"]["anchor"]["identical_pairs"] == identical
    assert meta["metrics"]["anchor"]["wmd_min"] == 0.0
    losses = [h["loss"] for h in meta["history"]]
    assert all(math.isfinite(v) for v in losses) and meta["metrics"]["best_step"] in (5, 10, 15, 18)
    enc = load_encoder("dueam:run1", models_root=tmp_path / "models", device="cpu")
    vectors = enc.encode(["the cat runs", "die katze läuft"])
    assert vectors.shape == (2, HIDDEN) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    # the anchor may read other texts than the learner (both sentences in the anchor's language): its targets are
    # then those texts' WMDs, and a run key of its own
    calls.clear()
    other = tmp_path / "models" / "dueam" / "anchored"
    swapped = train_dueam(tiny_bert, tiny_bert, t1[:4], t2[:4], other, anchor_texts1=t2[:4], anchor_texts2=t2[:4],
                          max_steps=1, **kwargs)
    assert swapped["anchor"]["identical_pairs"] == 4 and swapped["anchor"]["wmd_max"] == 0.0 and calls == []
    with pytest.raises(ValueError, match="3 anchor sentence1s for 4 pairs"):
        train_dueam(tiny_bert, tiny_bert, t1[:4], t2[:4], tmp_path / "x", anchor_texts1=t1[:3], **kwargs)

    changed = tmp_path / "models" / "dueam" / "run2"
    train_dueam(tiny_bert, tiny_bert, t1, t2, changed, max_steps=2, **kwargs)
    with pytest.raises(ValueError, match="different settings or data"):
        train_dueam(tiny_bert, tiny_bert, t1[:-1], t2[:-1], changed, **kwargs)


TRIPLES = [
    ("t1", "train", "the cat runs", "the cat is not red", "the dog sleeps",
     "die katze läuft", "die katze ist nicht rot", "der hund schläft"),
    ("t2", "train", "the red dog runs", "the dog runs", "the blue cat sleeps",
     "der rote hund läuft", "der hund läuft", "die blaue katze schläft"),
    ("t3", "train", "a blue dog sleeps", "the dog sleeps", "a red cat runs", "", "", ""),
    ("t4", "train", "the cat sleeps", "the cat sleeps", "", "", "", ""),  # empty contradiction: failed at ingest
    ("t5", "dev", "the dog", "a dog", "a cat", "", "", ""),
]
CONFIG = """
default_pipeline: toy
warehouse: warehouse
run_dir: .amrsim
pipelines:
  toy:
    datasets:
      toy_nli:
        path: nli.tsv
        kind: triples
        lang: en
        columns: {{id: id, split: split, premise: premise, entailment: entailment, contradiction: contradiction}}
        translations:
          de: {{premise: premise_de, entailment: entailment_de, contradiction: contradiction_de}}
      toy_dev:
        path: dev.tsv
        kind: pairs
        split: dev
        score_range: [0, 5]
    train:
      - method: dueam
        params: {{datasets: [toy_nli], anchor: {model}, learner: {model}, dev_dataset: toy_dev, batch_size: 4,
                  epochs: 2, warmup: 0, lr: 1.0e-3, eval_every: 2, max_length: 16, device: cpu}}
"""


def write_toy_data(write_tsv) -> None:
    """CONFIG's files: the triples with German columns, and four dev pairs."""
    write_tsv("nli.tsv", ["id", "split", "premise", "entailment", "contradiction", "premise_de", "entailment_de",
                          "contradiction_de"], [list(r) for r in TRIPLES])
    write_tsv("dev.tsv", ["sentence1", "sentence2", "score"],
              [["the cat runs", "the cat runs", "5"], ["the dog sleeps", "a red cat", "0.5"],
               ["the dog runs", "the dog sleeps", "3"], ["a cat", "the cat", "4"]])


@pytest.mark.slow
def test_trains_from_nli_triples_with_translations_and_loads_as_latest(tiny_bert, tmp_path, write_config,
                                                                       write_tsv, one_thread):
    from amrsim.config import load_config
    from amrsim.encoders import find_trained
    from amrsim.methods.loaders import load_encoder
    from amrsim.stages.ingest import ingest_stage
    from amrsim.stages.train import train_method
    from amrsim.stages.train.dueam import load_items
    from amrsim.warehouse import Warehouse

    write_toy_data(write_tsv)
    cfg = load_config(write_config(CONFIG.format(model=json.dumps(tiny_bert))))
    wh = Warehouse(cfg.warehouse_root)
    for ds in ("toy_nli", "toy_dev"):
        ingest_stage(cfg.section("toy"), ds, "r0")

    items, left_out, rows = load_items(wh, {"toy_nli": "triples"}, "train", {})
    assert [it.item_id for it in items] == ["toy_nli:t1", "toy_nli:t2", "toy_nli:t3"]
    # ok: t1 and t2 in en + de, t3 in en; failed at ingest: t3's empty German variant, t4 in en and de
    assert left_out == {"row failed at ingest": 3} and rows == 8
    assert dict(items[0].premise) == {"en": "the cat runs", "de": "die katze läuft"}
    assert [dict(h) for h in items[0].hypotheses] == [{"en": "the cat is not red", "de": "die katze ist nicht rot"},
                                                     {"en": "the dog sleeps", "de": "der hund schläft"}]
    assert dict(items[2].premise) == {"en": "a blue dog sleeps"}
    # t3's entailment is t1's contradiction: its German translation comes with the sentence (parallel table)
    assert dict(items[2].hypotheses[0]) == {"en": "the dog sleeps", "de": "der hund schläft"}

    params = cfg.project.pipelines["toy"].train[0].params
    summary = train_method(cfg.section("toy"), "dueam", params, "run1")
    # t1, t2: 2 hypotheses x (en-en, de-de, en-de, de-en); t3: 2 x en-en + en-de (premise en, entailment de)
    assert summary["status"] == "ok" and summary["pairs"] == {"monolingual": 10, "cross_lingual": 9}
    assert summary["computed"] == 19 and summary["failed"] == 3 and summary["total_steps"] == 10
    assert summary["left_out"] == {"row failed at ingest": 3}
    meta = json.loads((wh.models_root / "dueam" / "run1" / "model.json").read_text(encoding="utf-8"))
    assert meta["data"]["lang_pairs_used"] == {"en-en": 6, "de-de": 4, "en-de": 5, "de-en": 4}
    assert meta["data"]["table_versions"]["toy_nli.triples"] == wh.version("toy_nli", "triples")
    assert meta["data"]["dev"]["pairs"] == 4 and meta["metrics"]["initial_dev"] is not None
    assert "languages" not in meta  # no packaged English-only model involved
    assert find_trained("dueam:latest", wh.models_root).run_id == "run1"
    assert load_encoder("dueam:latest", models_root=wh.models_root).encode(["der hund"]).shape == (1, HIDDEN)
    lineage = wh.read("meta", "lineage").filter(pl.col("stage") == "train:dueam")
    assert lineage.height == 1 and lineage["rows_computed"][0] == 19 and lineage["status"][0] == "ok"
    # the same request again: nothing trains
    assert train_method(cfg.section("toy"), "dueam", params, "run2")["status"] == "ok (reused)"
    assert not (wh.models_root / "dueam" / "run2").exists()
    # unless asked to train anyway (`amrsim train --retrain`): a new run beside the first
    again = train_method(cfg.section("toy"), "dueam", params, "run3", reuse=False)
    assert again["status"] == "ok" and (wh.models_root / "dueam" / "run3" / "model.json").is_file()


def test_params_are_strict_and_a_wrong_kind_is_a_config_error(tmp_path, write_config, write_tsv):
    from pydantic import ValidationError

    from amrsim.config import load_config
    from amrsim.errors import ConfigError
    from amrsim.methods import method_params
    from amrsim.stages.train import train_method

    with pytest.raises(ValidationError, match="lamda"):
        method_params("dueam", {"datasets": ["x"], "lamda": 0.1})
    with pytest.raises(ValidationError, match="modes"):
        method_params("dueam", {"datasets": ["x"], "modes": ["supervised"]})
    assert method_params("dueam", {"datasets": ["x"]}).lam == 0.003
    write_tsv("p.tsv", ["sentence1"], [["a"]])
    cfg = load_config(write_config("""
    default_pipeline: p
    pipelines:
      p:
        datasets:
          s: {path: p.tsv, kind: sentences, columns: {text: sentence1}}
    """))
    with pytest.raises(ConfigError, match="needs 'triples' or 'pairs'"):
        train_method(cfg.section("p"), "dueam", {"datasets": ["s"]}, "run1")


# ---------------------------------------------------------------- muse (the multilingual base, in PyTorch)


def test_parallel_pairs_meet_a_sentence_and_its_translations_and_anchor_on_one_language():
    items = nli_items()
    parallel, _ = construct_pairs(items, ["parallel"])
    assert as_tuples(parallel) == {("P1", "P1de", "en", "de"), ("P1de", "P1", "de", "en"), ("E1", "E1de", "en", "de"),
                                   ("E1de", "E1", "de", "en"), ("E2", "E2fr", "en", "fr"), ("E2fr", "E2", "fr", "en")}
    assert all(p.lang1 != p.lang2 and p.anchor_text2(True) == p.text1 for p in parallel)  # anchor target WMD 0
    assert all(p.anchor_text2(False) == p.text2 for p in parallel)
    cross, _ = construct_pairs(items, ["cross_lingual"])
    by_text = {(p.text1, p.text2): p for p in cross}
    assert by_text[("P1", "E1de")].anchor_text2(True) == "E1"  # the hypothesis in the premise's language
    assert by_text[("P2", "E2fr")].anchor_text2(True) == "E2"
    assert by_text[("P1de", "C1")].anchor_text2(True) == "C1"  # C1 has no German: the anchor compares as given


def test_a_monolingual_anchor_reads_every_pair_in_its_language_where_both_sentences_have_it():
    items = nli_items()
    pairs, _ = construct_pairs(items, ["monolingual", "cross_lingual", "parallel", "unsupervised"], seed=1)
    by_text = {(p.text1, p.text2, p.mode): p for p in pairs}
    assert by_text[("P1de", "E1de", "monolingual")].anchor_texts("en") == ("P1", "E1")
    assert by_text[("P1de", "E1", "cross_lingual")].anchor_texts("en") == ("P1", "E1")
    assert by_text[("E1de", "E1", "parallel")].anchor_texts("en") == ("E1", "E1")  # a translation: WMD 0
    assert by_text[("P1de", "C1", "cross_lingual")].anchor_texts("en") == ("P1", "C1")  # C1 is English only
    # item i3 has no English: as given, or with same_language the hypothesis in the premise's language
    assert by_text[("P3de", "E3de", "monolingual")].anchor_texts("en") == ("P3de", "E3de")
    assert by_text[("P1", "E1de", "cross_lingual")].anchor_texts(None, same_language=True) == ("P1", "E1")
    for p in pairs:
        if p.mode == "unsupervised":  # the other item's hypothesis, in English where both have it
            other = next(i for i in items if i.item_id == p.source)
            hyp = next(h for h in other.hypotheses if p.text2 in h.values())
            mine = next(i for i in items if i.item_id == p.item_id).premise
            expected = (mine["en"], hyp["en"]) if "en" in mine and "en" in hyp else (p.text1, p.text2)
            assert p.anchor_texts("en") == expected


def test_muse_anchor_tokens_without_specials_and_a_translation_is_far_in_its_token_space():
    from amrsim.encoders.muse_torch import MuseTokenizer
    from amrsim.methods.dueam import MuseAnchor

    texts = ["The cat sleeps on the sofa.", "Die Katze schläft auf dem Sofa.", ""]
    ids = MuseTokenizer().encode(texts)
    features, rows = MuseAnchor(-1).tokens(texts), MuseAnchor(0).tokens(texts)
    assert [f.shape for f in features] == [(len(i) - 2, 1280) for i in ids]
    assert [r.shape for r in rows] == [(len(i) - 2, 512) for i in ids]
    same = anchor_targets(MuseAnchor(-1), texts[:1], texts[:1]).wmd[0]
    translated = anchor_targets(MuseAnchor(-1), texts[:1], texts[1:2]).wmd[0]
    # why `anchor_same_language` exists: muse's token features are not aligned across languages
    assert same == 0.0 and translated > 0.8


@pytest.mark.slow
def test_trains_muse_end_to_end_and_the_run_loads_in_amrsim_and_sentence_transformers(tmp_path, write_config,
                                                                                      write_tsv, one_thread):
    from sentence_transformers import SentenceTransformer

    from amrsim.config import load_config
    from amrsim.encoders.muse_torch import TorchMuse
    from amrsim.methods.loaders import load_encoder
    from amrsim.stages.ingest import ingest_stage
    from amrsim.stages.train import train_method
    from amrsim.warehouse import Warehouse

    write_toy_data(write_tsv)
    config = CONFIG.format(model="muse").replace(
        "max_length: 16, device: cpu}", "max_length: 16, device: cpu, train_embedding: false,\n"
        "                  modes: [monolingual, cross_lingual, parallel], anchor_same_language: true}")
    cfg = load_config(write_config(config))
    wh = Warehouse(cfg.warehouse_root)
    for ds in ("toy_nli", "toy_dev"):
        ingest_stage(cfg.section("toy"), ds, "r0")
    summary = train_method(cfg.section("toy"), "dueam", cfg.project.pipelines["toy"].train[0].params, "m1")
    assert summary["status"] == "ok" and summary["pairs"]["parallel"] > 0, summary
    run = wh.models_root / "dueam" / "m1"
    meta = json.loads((run / "model.json").read_text(encoding="utf-8"))
    assert meta["params"]["train_embedding"] is False and meta["anchor"] == meta["learner"] == "muse"
    texts = ["die katze schläft", "the cat sleeps"]
    ours = load_encoder("dueam:m1", models_root=wh.models_root).encode(texts)
    theirs = SentenceTransformer(str(run), trust_remote_code=True, device="cpu").encode(texts)
    assert ours.shape == (2, 512) and np.abs(ours - theirs).max() <= 1e-6
    assert np.abs(ours - TorchMuse().encode(texts)).max() > 1e-6  # trained: not muse any more
