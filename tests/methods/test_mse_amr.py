"""MSE-AMR core: the SimCSE loss by hand, vocabulary extension, mixed sampling, integration, and a tiny BERT trained
for a few steps on CPU (outputs, model selection, exact resume, NaN detection)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from amrsim.methods.mse_amr import (  # noqa: E402
    ROLES,
    AmrEncoder,
    Params,
    combine,
    embed_combined,
    encode_with,
    extend_vocabulary,
    mixed_view,
    simcse_loss,
    train_mse_amr,
)
from amrsim.methods.mse_amr import train as mse_amr_train  # noqa: E402

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "(", ")", ":", "-", "arg", "##0", "##1", "01", "02",
    "polarity", "mod", "want", "eat", "see", "like", "chase", "boy", "girl", "cat", "dog", "apple", "ball", "big",
    "the", "a", "to", "wants", "eats", "sees", "likes", "chases", "does", "not", "der", "die", "das",
]
AGENTS = ["boy", "girl", "cat", "dog"]
OBJECTS = ["apple", "ball", "cat", "dog"]
VERBS = [("want-01", "wants", "want"), ("eat-01", "eats", "eat"), ("see-01", "sees", "see"),
         ("like-01", "likes", "like"), ("chase-01", "chases", "chase")]

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest)


def _tiny_bert(dropout: float = 0.1):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    # transformers 5 ignores BertTokenizerFast(vocab_file=...); the vocabulary goes in as a dict
    tokenizer = BertTokenizerFast(vocab={t: i for i, t in enumerate(VOCAB)})
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    torch.manual_seed(0)
    return tokenizer, BertModel(config)




@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiny_bert")
    tokenizer, model = _tiny_bert()
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def _triples(n: int = 8) -> list[dict]:
    out = []
    for i in range(n):
        frame, verb_s, verb = VERBS[i % len(VERBS)]
        agent, obj = AGENTS[i % 4], OBJECTS[(i + 1) % 4]
        g_p = f"( {frame} :ARG0 ( {agent} ) :ARG1 ( {obj} ) )"
        g_e = f"( {frame} :ARG0 ( {agent} :mod ( big ) ) :ARG1 ( {obj} ) )"
        g_c = f"( {frame} :polarity - :ARG0 ( {agent} ) :ARG1 ( {obj} ) )"
        out.append({
            "premise": {"en": {"text": f"the {agent} {verb_s} the {obj}", "graph": g_p},
                        "de": {"text": f"der {agent} {verb_s} das {obj}", "graph": g_p}},
            "entailment": {"en": {"text": f"the big {agent} {verb_s} a {obj}", "graph": g_e},
                           "de": {"text": f"der big {agent} {verb_s} das {obj}", "graph": g_e}},
            "contradiction": {"en": {"text": f"the {agent} does not {verb} the {obj}", "graph": g_c},
                              "de": {"text": f"der {agent} not {verb_s} das {obj}", "graph": g_c}},
        })
    return out


def params(encoder_dir: Path, **settings) -> Params:
    """MSE-AMR params for the tiny model: CPU, short inputs, tokens seen twice added, the checkpoint kept."""
    return Params(datasets=["toy_nli"], encoder=str(encoder_dir), device="cpu", min_count=2, max_length=64,
                  keep_checkpoint=True, **settings)


PROBES = ["( want-01 :ARG0 ( boy ) :ARG1 ( apple ) )", "( see-01 :polarity - :ARG0 ( cat ) )", "the girl likes the dog"]


# --- loss ---------------------------------------------------------------------------------------------------------


def test_simcse_loss_by_hand():
    # anchors a1=(1,0), a2=(0,1); positives p1=(3,0), p2=(0,2); hard negatives n1=(0,1), n2=(-1,0); temperature 0.5.
    # cosines: a1 -> [p1 1, p2 0, n1 0, n2 -1]; a2 -> [p1 0, p2 1, n1 1, n2 0]; logits = cosines / 0.5
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[3.0, 0.0], [0.0, 2.0]])
    n = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    e = math.exp
    row1 = -math.log(e(2) / (e(2) + e(0) + e(0) + e(-2)))
    row2 = -math.log(e(2) / (e(0) + e(2) + e(2) + e(0)))
    got = simcse_loss(a, p, n, temperature=0.5)
    assert got.item() == pytest.approx((row1 + row2) / 2, rel=1e-6)
    # the released code's symmetric term: p1 picks a1 among [a1 2, a2 0], p2 picks a2 among [a1 0, a2 2]
    sym = -math.log(e(2) / (e(2) + e(0)))
    assert simcse_loss(a, p, n, temperature=0.5, symmetric=True).item() == pytest.approx(
        (row1 + row2) / 2 + sym, rel=1e-6)
    # without hard negatives: b x b logits
    assert simcse_loss(a, p, None, temperature=0.5).item() == pytest.approx(sym, rel=1e-6)


# --- vocabulary ---------------------------------------------------------------------------------------------------


def test_extend_vocabulary_mean_of_old_pieces():
    tokenizer, model = _tiny_bert()
    ids = {t: i for i, t in enumerate(VOCAB)}
    old = model.get_input_embeddings().weight.detach().clone()
    assert tokenizer.tokenize(":ARG0") == [":", "arg", "##0"]  # what the unextended tokenizer does

    added = extend_vocabulary(tokenizer, model, [":ARG0", "want-01", ":ARG0", "boy", ":polarity"])
    assert added == 3  # "boy" is known, the second ":ARG0" a repeat
    weight = model.get_input_embeddings().weight.detach()
    assert weight.shape[0] == len(tokenizer) == len(VOCAB) + 3
    torch.testing.assert_close(weight[: len(VOCAB)], old)  # old rows untouched
    expect = {":ARG0": [":", "arg", "##0"], "want-01": ["want", "-", "01"], ":polarity": [":", "polarity"]}
    for tok, pieces in expect.items():
        new_id = tokenizer.convert_tokens_to_ids(tok)
        assert new_id >= len(VOCAB)
        torch.testing.assert_close(weight[new_id], old[[ids[p] for p in pieces]].mean(0))
    assert tokenizer.tokenize(":ARG0") == [":ARG0"]
    assert tokenizer.tokenize("( want-01 :ARG0 ( boy ) )") == ["(", "want-01", ":ARG0", "(", "boy", ")", ")"]
    assert tokenizer.tokenize(":ARG01") == [":", "arg", "##0", "##1"]  # whole words only
    assert extend_vocabulary(tokenizer, model, [":ARG0"]) == 0


def test_pooling_definitions():
    tokenizer, model = _tiny_bert()
    model.eval()  # no dropout in the reference computation below
    texts = ["( want-01 ( boy ) )", "the cat sees a ball"]
    mlp = encode_with(model, tokenizer, texts, pooling="mlp")
    cls = encode_with(model, tokenizer, texts, pooling="cls")
    with torch.no_grad():
        hidden = model(**tokenizer(texts, padding=True, return_tensors="pt")).last_hidden_state[:, 0]
        expect = torch.tanh(model.pooler.dense(hidden))  # SimCSE's supervised MLP: dense + tanh over [CLS]
    np.testing.assert_allclose(cls, hidden.numpy(), atol=1e-5)
    np.testing.assert_allclose(mlp, expect.numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="unknown pooling"):
        encode_with(model, tokenizer, texts, pooling="mean")


# --- mixed sampling -----------------------------------------------------------------------------------------------


def _example(langs=("en", "de", "fr", "es")) -> dict:
    return {role: {lang: {"text": f"T-{lang}-{role}", "graph": f"G-{lang}-{role}"} for lang in langs}
            for role in ROLES}


def test_mixed_view_english_graph_share_is_p_graph():
    rng = random.Random(7)
    draws = [mixed_view(_example(), ("en",), rng, p_graph=0.3) for _ in range(4000)]
    for role in ROLES:
        share = sum(d[role] == f"G-en-{role}" for d in draws) / len(draws)
        assert share == pytest.approx(0.3, abs=0.03)
        assert all(d[role] in (f"G-en-{role}", f"T-en-{role}") for d in draws)
    always = [mixed_view(_example(), ("en",), rng, p_graph=1.0) for _ in range(200)]
    assert all(d["premise"] == "G-en-premise" for d in always)


def test_mixed_view_non_english_graph_langs_honoured_per_sentence():
    rng = random.Random(11)
    langs = ("en", "de", "fr")
    draws = [mixed_view(_example(), langs, rng, p_graph=0.5) for _ in range(3000)]
    seen = {lang: 0 for lang in langs}
    for d in draws:
        for value in d.values():
            form, lang, _ = value.split("-", 2)
            assert lang in langs  # "es" is in the example, not in langs
            assert form == "G" or lang == "en"  # non-English sentences are always graphs
            seen[lang] += 1
    for lang in langs:
        assert seen[lang] / (3 * len(draws)) == pytest.approx(1 / 3, abs=0.03)
    # languages are drawn per sentence: a triple's roles often differ in language
    mixed = sum(len({v.split("-")[1] for v in d.values()}) > 1 for d in draws) / len(draws)
    assert mixed == pytest.approx(1 - 3 * (1 / 3) ** 3, abs=0.04)


def test_mixed_view_missing_graphs_and_weights():
    rng = random.Random(3)
    ex = _example(("en", "de"))
    ex["premise"]["de"]["graph"] = None  # a failed parse: German premise unusable
    ex["premise"]["en"]["graph"] = None  # English premise: only its text remains
    draws = [mixed_view(ex, ("en", "de"), rng, p_graph=0.9) for _ in range(500)]
    assert all(d["premise"] == "T-en-premise" for d in draws)
    weighted = [mixed_view(_example(), ("en", "de"), rng, lang_weights=(3, 1)) for _ in range(4000)]
    en_share = sum(d["entailment"].split("-")[1] == "en" for d in weighted) / len(weighted)
    assert en_share == pytest.approx(0.75, abs=0.03)
    ex["premise"]["en"]["text"] = None
    with pytest.raises(ValueError, match="premise"):
        mixed_view(ex, ("en", "de"), rng)
    with pytest.raises(ValueError, match="lang_weights"):
        mixed_view(_example(), ("en", "de"), rng, lang_weights=(1,))


# --- integration --------------------------------------------------------------------------------------------------


def test_combine_modes():
    rng = np.random.default_rng(0)
    s, h, h2 = rng.normal(size=(5, 6)), rng.normal(size=(5, 4)), rng.normal(size=(5, 6))
    cat = combine(s, h)
    assert cat.shape == (5, 10) and cat.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(cat[:, :6], axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(cat[:, 6:], axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(cat, axis=1), math.sqrt(2), rtol=1e-5)
    # cosine of concatenated unit vectors = mean of the two cosines
    def cos(x, y):
        return float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))
    assert cos(cat[0], cat[1]) == pytest.approx((cos(s[0], s[1]) + cos(h[0], h[1])) / 2, abs=1e-5)

    summed = combine(s, h2, mode="sum")
    np.testing.assert_allclose(summed, s / np.linalg.norm(s, axis=1, keepdims=True)
                               + h2 / np.linalg.norm(h2, axis=1, keepdims=True), rtol=1e-5)
    with pytest.raises(ValueError, match="equal dimensions"):
        combine(s, h, mode="sum")
    s_only, h_only = combine(s, None, mode="s_only"), combine(None, h, mode="h_only")
    assert s_only.shape == (5, 6) and h_only.shape == (5, 4)
    np.testing.assert_allclose(np.linalg.norm(s_only, axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(h_only, axis=1), 1, rtol=1e-5)
    with pytest.raises(ValueError, match="unknown integration"):
        combine(s, h, mode="max")
    with pytest.raises(ValueError, match="needs both"):
        combine(s, None)
    assert combine(np.zeros(3), np.ones(2)).tolist()[:3] == [0, 0, 0]  # a zero vector stays zero, no NaN


def test_embed_combined_checks_rows():
    s, h = np.ones((3, 4)), np.ones((3, 2))
    out = embed_combined(s, h)
    assert out.shape == (3, 6) and out.flags["C_CONTIGUOUS"]
    with pytest.raises(ValueError, match="graph vectors"):
        embed_combined(s, np.ones((2, 2)))
    with pytest.raises(ValueError, match="2-D"):
        embed_combined(np.ones(4), np.ones(2))


# --- training -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_train_outputs_selection_and_reload(encoder_dir, tmp_path):
    out = tmp_path / "run-a"
    scores = iter([1.0, 5.0, 2.0, 3.0])  # the model at step 4 must be the one written
    captured: dict[int, np.ndarray] = {}
    steps_seen: list[int] = []

    def dev_eval(model, tokenizer) -> float:
        assert not model.training
        captured[len(captured)] = encode_with(model, tokenizer, PROBES, pooling="mlp", max_length=64)
        steps_seen.append(len(captured))
        return next(scores)

    result = train_mse_amr(_triples(), out, params(encoder_dir, batch_size=8, micro_batch=4, epochs=8, lr=2e-3,
                                                    p_graph=1.0, eval_every=2, base_encoder="minilm"),
                           dev_eval=dev_eval)
    losses = result["losses"]
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses)
    assert np.mean(losses[-2:]) < np.mean(losses[:2]) - 0.1  # it learns
    assert result["best_step"] == 4 and result["best_dev"] == 5.0 and result["completed"]

    meta = json.loads((out / "model.json").read_text())
    assert meta["method"] == "mse_amr" and meta["run_id"] == "run-a" and meta["amr_encoder"] == "amr_encoder"
    assert meta["base_encoder"] == "minilm" and meta["integration"] == "concat" and meta["langs"] == ["en"]
    assert meta["seed"] == 0 and meta["created_at"].endswith("+00:00")
    # :ARG0 :ARG1 :polarity :mod and the five frames each occur at least twice
    assert meta["added_tokens"] == result["added_tokens"] == 9
    assert meta["params"]["grad_accum"] == 2 and meta["params"]["micro_batch"] == 4
    assert meta["metrics"]["best_step"] == 4 and [s for s, _ in meta["metrics"]["dev_history"]] == [2, 4, 6, 8]
    assert (out / "amr_encoder" / "model.safetensors").is_file()
    assert (out / "checkpoint" / "train_state.pt").is_file() and (out / "checkpoint" / "state.json").is_file()

    enc = AmrEncoder.from_run(out, device="cpu")
    assert enc.tokenizer.tokenize(":ARG0 want-01") == [":ARG0", "want-01"]
    got = enc.encode(PROBES)
    assert got.shape == (3, 32) and got.dtype == np.float32
    np.testing.assert_allclose(got, captured[1], atol=1e-5)  # the step-4 model (second evaluation)
    assert not np.allclose(got, captured[3], atol=1e-4)  # not the last one
    np.testing.assert_allclose(enc.encode(PROBES[::-1]), got[::-1], atol=1e-5)  # batching keeps row order
    assert enc.encode([]).shape == (0, 32)


def test_resume_continues_exactly(encoder_dir, tmp_path):
    kwargs = dict(langs=["en", "de"], batch_size=4, micro_batch=2, epochs=3, lr=1e-3, seed=5)
    full = train_mse_amr(_triples(), tmp_path / "full", params(encoder_dir, **kwargs))
    assert full["steps"] == full["total_steps"] == 6 and full["resumed_from"] is None

    cut = train_mse_amr(_triples(), tmp_path / "cut", params(encoder_dir, max_steps=2, **kwargs))
    assert cut["steps"] == 2 and not cut["completed"]
    state = json.loads((tmp_path / "cut" / "checkpoint" / "state.json").read_text(encoding="utf-8"))
    assert state["step"] == 2 and len(state["losses"]) == 2
    assert set(torch.load(tmp_path / "cut" / "checkpoint" / "train_state.pt", weights_only=True)) == {
        "optimizer", "scheduler", "rng"}
    assert json.loads((tmp_path / "cut" / "model.json").read_text())["metrics"]["completed"] is False

    torch.manual_seed(12345)  # a new process would start from another RNG state: the checkpoint's must be restored
    resumed = train_mse_amr(_triples(), tmp_path / "cut", params(encoder_dir, **kwargs))
    assert resumed["resumed_from"] == 2 and resumed["steps"] == 6 and resumed["completed"]
    assert resumed["added_tokens"] == full["added_tokens"]
    np.testing.assert_allclose(resumed["losses"], full["losses"], rtol=1e-5)
    a = AmrEncoder.from_run(tmp_path / "full", device="cpu").encode(PROBES)
    b = AmrEncoder.from_run(tmp_path / "cut", device="cpu").encode(PROBES)
    np.testing.assert_allclose(a, b, atol=1e-5)

    with pytest.raises(ValueError, match="lr"):  # a checkpoint made with other settings is not picked up
        train_mse_amr(_triples(), tmp_path / "cut", params(encoder_dir, **{**kwargs, "lr": 1e-4}))


def test_nan_loss_names_step_and_triples(encoder_dir, tmp_path, monkeypatch):
    real = simcse_loss
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        loss = real(*args, **kwargs)
        return loss * float("nan") if calls["n"] == 2 else loss

    monkeypatch.setattr(mse_amr_train, "simcse_loss", flaky)
    with pytest.raises(FloatingPointError, match=r"step 2 .*triples: \[0, 1, 2, 3, 4, 5, 6, 7\]"):
        train_mse_amr(_triples(), tmp_path / "nan", params(encoder_dir, batch_size=8, micro_batch=8, epochs=3))


# --- train_base: the base sentence encoder trained beside the AMR encoder ----------------------------------------


@pytest.fixture(scope="module")
def text_base_dir(tmp_path_factory) -> str:
    """A tiny sentence-transformers model (mean pooling over a tiny BERT without dropout) that reads the toy texts."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    root = tmp_path_factory.mktemp("text_base")
    tokenizer, model = _tiny_bert(dropout=0.0)
    model.save_pretrained(str(root / "hf"))
    tokenizer.save_pretrained(str(root / "hf"))
    st = SentenceTransformer(modules=[Transformer(str(root / "hf"), max_seq_length=32), Pooling(32, "mean")],
                             device="cpu")
    st.save(str(root / "st"), create_model_card=False)
    return str(root / "st")


def test_text_views_draw_each_sentence_in_a_language_with_text(encoder_dir):
    triples = _triples(2)
    triples[0]["contradiction"]["de"] = {"text": None, "graph": None}  # no German text: English only
    steps = mse_amr_train.TripleSteps(None, None, triples, ["en"], params(encoder_dir),
                                      torch.device("cpu"), base=object(), text_langs=["en", "de"])
    rng = random.Random(0)
    seen = {role: set() for role in ROLES}
    for _ in range(60):
        view = steps.text_view(triples[0], rng)
        for role in ROLES:
            lang = next(lg for lg in ("en", "de") if triples[0][role][lg]["text"] == view[role])
            seen[role].add(lang)
    assert seen["premise"] == seen["entailment"] == {"en", "de"} and seen["contradiction"] == {"en"}
    with pytest.raises(ValueError, match="'premise' has no text in any of \\['fr'\\]"):
        mse_amr_train.TripleSteps(None, None, triples, ["en"], params(encoder_dir),
                                  torch.device("cpu"), base=object(), text_langs=["fr"]).text_view(triples[0], rng)


def test_train_base_learns_keeps_the_best_base_and_resumes_exactly(encoder_dir, text_base_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    from amrsim.encoders import SentenceTransformerEncoder

    texts = ["the boy wants the apple", "der girl sees das dog", "the cat does not eat the ball"]
    before = SentenceTransformer(text_base_dir, device="cpu").encode(texts)
    scores = iter([1.0, 5.0, 2.0, 3.0])
    captured: list[np.ndarray] = []

    def dev_eval(model, tokenizer, base) -> float:
        assert not model.training and not base.training
        captured.append(base.encode(texts))
        return next(scores)

    kwargs = dict(batch_size=8, micro_batch=4, epochs=8, lr=2e-3, eval_every=2, train_base=True,
                  base_encoder=text_base_dir, base_lr=1e-3)
    result = train_mse_amr(_triples(), tmp_path / "full", params(encoder_dir, **kwargs), dev_eval=dev_eval)
    assert result["best_step"] == 4 and result["completed"]
    meta = json.loads((tmp_path / "full" / "model.json").read_text())
    assert meta["text_encoder"] == "text_encoder" and meta["text_langs"] == ["en", "de"]
    assert meta["params"]["train_base"] is True and meta["params"]["base_lr"] == 1e-3
    history = json.loads((tmp_path / "full" / "checkpoint" / "state.json").read_text())["history"]
    assert all({"loss", "graph_loss", "text_loss"} <= set(h) for h in history)
    assert history[-1]["text_loss"] < history[0]["text_loss"]  # the base learns
    assert not any(p.name == mse_amr_train.BASE_WEIGHTS for p in (tmp_path / "full" / "amr_encoder").iterdir())

    trained = SentenceTransformerEncoder("t", "t", str(tmp_path / "full" / "text_encoder"), device="cpu",
                                         safetensors_only=True)
    got = trained.encode(texts)
    assert not np.allclose(got, before, atol=1e-3)
    np.testing.assert_allclose(got, captured[1], atol=1e-5)  # the step-4 base (second evaluation), not the last
    assert not np.allclose(got, captured[3], atol=1e-4)

    # a run cut at step 3 and resumed gives the uninterrupted run's losses and both encoders
    plain = {k: v for k, v in kwargs.items() if k != "eval_every"}
    full = train_mse_amr(_triples(), tmp_path / "plain", params(encoder_dir, **plain))
    train_mse_amr(_triples(), tmp_path / "cut", params(encoder_dir, max_steps=3, **plain))
    torch.manual_seed(999)
    resumed = train_mse_amr(_triples(), tmp_path / "cut", params(encoder_dir, **plain))
    assert resumed["resumed_from"] == 3 and resumed["completed"]
    np.testing.assert_allclose(resumed["losses"], full["losses"], rtol=1e-5)
    a, b = (SentenceTransformerEncoder("t", "t", str(tmp_path / run / "text_encoder"), device="cpu",
                                       safetensors_only=True).encode(texts) for run in ("plain", "cut"))
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_train_base_leaves_the_amr_encoder_as_a_frozen_base_run_trains_it(encoder_dir, tmp_path):
    """The base (muse, whose port draws random numbers as its layers are built) takes nothing from the AMR encoder's
    randomness (views, dropout): the graph side trains exactly as a frozen-base run's, so the runs differ only by
    the base."""
    kwargs = dict(batch_size=8, micro_batch=4, epochs=2, lr=2e-3, base_encoder="muse")
    frozen = train_mse_amr(_triples(), tmp_path / "frozen", params(encoder_dir, **kwargs))
    trained = train_mse_amr(_triples(), tmp_path / "trained", params(encoder_dir, train_base=True,
                                                                     base_train_embedding=False, **kwargs))
    history = json.loads((tmp_path / "trained" / "checkpoint" / "state.json").read_text())["history"]
    np.testing.assert_allclose([h["graph_loss"] for h in history],
                               [h["loss"] for h in json.loads((tmp_path / "frozen" / "checkpoint" / "state.json")
                                                              .read_text())["history"]], rtol=1e-6)
    assert frozen["losses"] != trained["losses"]  # the trained run's loss adds the text loss
    a, b = (AmrEncoder.from_run(tmp_path / run, device="cpu").encode(PROBES) for run in ("frozen", "trained"))
    np.testing.assert_allclose(a, b, atol=1e-6)
