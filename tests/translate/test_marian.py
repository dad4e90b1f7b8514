"""The marian backend end to end on a tiny randomly initialised Marian model built offline in a temp dir.

Random weights translate into garbage; these tests check the mechanics: order, batching, splitting, failures.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import warnings

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch = pytest.importorskip("torch")
spm = pytest.importorskip("sentencepiece")
transformers = pytest.importorskip("transformers")

from tests.helpers import build_tiny_marian, random_sentence  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

MAX_POS = 64


def _sentence(rng: random.Random) -> str:
    return random_sentence(rng)


@pytest.fixture(scope="session")
def tiny_marian(tmp_path_factory) -> str:
    """A directory holding a 1+1-layer, d_model 16 Marian model and its SentencePiece tokenizer."""
    return build_tiny_marian(tmp_path_factory.mktemp("tiny_marian"), max_pos=MAX_POS)


@pytest.fixture(scope="session")
def translator(tiny_marian):
    from amrsim.translate.marian import MarianTranslator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MarianTranslator(tiny_marian, device="cpu", batch_size=4, num_beams=1, max_length=12)


def _texts() -> list[str]:
    rng = random.Random(1)
    texts = [" ".join(_sentence(rng) for _ in range(rng.randint(1, 3))) for _ in range(11)]
    texts[3] = "Cat."
    return texts


def test_batched_equals_one_at_a_time_in_input_order(translator):
    texts = _texts()
    lengths = [len(ids) for ids in translator._encode(texts)]
    assert max(lengths) > 3 * min(lengths) and max(lengths) <= translator.input_limit  # the sort reorders
    batched = translator.translate(texts)
    alone = [translator.translate([t])[0] for t in texts]
    assert len(batched) == len(texts)
    assert all(r.status == "ok" and r.error is None and r.flags is None for r in batched)
    assert len({r.text for r in batched}) > len(texts) // 2  # the model does not ignore its input
    assert [r.text for r in batched] == [r.text for r in alone]


def test_empty_and_whitespace_rows_fail_and_keep_their_place(translator):
    texts = ["", "The cat sees the dog.", "   \n\t", "A small bird sings."]
    results = translator.translate(texts)
    assert [r.status for r in results] == ["failed", "ok", "failed", "ok"]
    assert results[0].error == results[2].error == "empty text"
    assert results[0].text is None
    assert results[1].text == translator.translate([texts[1]])[0].text
    assert translator.translate([]) == []


def test_over_long_input_is_split_and_flagged_not_truncated(translator):
    rng = random.Random(2)
    long_text = " ".join(_sentence(rng) for _ in range(20))
    n_tokens = len(translator._encode([long_text])[0])
    assert n_tokens > MAX_POS
    pieces = translator._split(long_text)
    assert len(pieces) >= 2 and all(len(p) <= translator.input_limit for p in pieces)
    # every token of the input is in some piece: nothing was dropped
    sentences = re.split(r"(?<=[.!?])\s+", long_text)
    assert sum(len(p) - 1 for p in pieces) == sum(len(ids) - 1 for ids in translator._encode(sentences))
    results = translator.translate(["The dog runs.", long_text, "Cat."])
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert results[1].flags == "split" and results[0].flags is None
    expected = " ".join(translator._generate([p])[0].strip() for p in pieces)
    assert results[1].text == expected


def test_sentence_longer_than_the_model_is_chunked(translator):
    one_sentence = " ".join(["green"] * 3 + ["cat river stone"] * 40)  # no sentence end at all
    pieces = translator._split(one_sentence)
    assert len(pieces) >= 2 and all(len(p) <= translator.input_limit for p in pieces)
    result = translator.translate([one_sentence])[0]
    assert result.status == "ok" and result.flags == "split"


def test_max_input_tokens_lowers_the_split_threshold(tiny_marian):
    from amrsim.translate.marian import MarianTranslator

    t = MarianTranslator(tiny_marian, device="cpu", num_beams=1, max_length=4, max_input_tokens=8)
    assert t.input_limit == 8
    results = t.translate(["The cat sees the dog. A small bird sings near the old house.", "Cat."])
    assert results[0].flags == "split" and results[1].flags is None
    assert all(r.status == "ok" for r in results)


def test_failing_batches_fall_back_to_one_at_a_time(translator, monkeypatch):
    texts = _texts()[:6] + ["  "]
    expected = translator.translate(texts)
    real = translator.model.generate
    calls = []

    def flaky(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        if kwargs["input_ids"].shape[0] > 1:
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(translator.model, "generate", flaky)
    results = translator.translate(texts)
    assert [r.text for r in results] == [r.text for r in expected]
    assert [r.status for r in results] == ["ok"] * 6 + ["failed"]
    assert max(calls) > 1 and calls.count(1) == 6


def test_an_item_that_still_fails_becomes_a_failed_row(translator, monkeypatch):
    real = translator.model.generate
    poison = translator._encode(["Cat."])[0]

    def poisoned(*args, **kwargs):
        ids = kwargs["input_ids"]
        if ids.shape[0] > 1 or ids[0].tolist() == poison:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(translator.model, "generate", poisoned)
    texts = ["The old cat sees the young dog near the river.", "Cat.", "A small bird sings in the garden."]
    results = translator.translate(texts)
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert "RuntimeError: boom" in results[1].error and results[1].text is None


def test_missing_directory_names_the_path(tmp_path):
    from amrsim.translate.marian import MarianTranslator

    missing = tmp_path / "no" / "such" / "model"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        MarianTranslator(str(missing), device="cpu")


def test_unloadable_hub_id_names_the_model(monkeypatch):
    from amrsim.translate.marian import MarianTranslator

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="Helsinki-NLP/opus-mt-xx-yy-does-not-exist"):
        MarianTranslator("Helsinki-NLP/opus-mt-xx-yy-does-not-exist", device="cpu")


def test_a_model_that_does_not_load_fails_the_stage_naming_its_translation_direction(monkeypatch, tmp_path):
    import polars as pl

    from amrsim.errors import ConfigError
    from amrsim.translate.run import TranslatorSpec, translate_frame

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    frame = pl.DataFrame({"source": ["Hallo.", "Hola."], "source_lang": ["de", "es"], "target_lang": ["en", "en"],
                          "model": ["broken", "broken"]})
    missing = str(tmp_path / "not-a-model")
    with pytest.raises(ConfigError, match=r"^translate: model 'broken' for de->en, es->en: translation model "):
        translate_frame(frame, {"broken": TranslatorSpec(missing, device="cpu")})


def test_pickles_without_the_model_and_reloads(translator):
    blob = pickle.dumps(translator)
    assert len(blob) < 10_000  # options only, no weights
    clone = pickle.loads(blob)
    texts = _texts()[:3]
    assert [r.text for r in clone.translate(texts)] == [r.text for r in translator.translate(texts)]


def test_device_and_dtype_resolution():
    from amrsim.errors import ConfigError
    from amrsim.generation import resolve_device, resolve_dtype

    if torch.cuda.device_count() > 1:
        assert resolve_device("cuda:1") == "cuda:1"
    else:  # no such device: one line saying so (tests/test_generation.py), never torch's AssertionError later
        with pytest.raises(ConfigError, match="cuda:1"):
            resolve_device("cuda:1")
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("bf16", "cpu") == torch.bfloat16
    with pytest.raises(ValueError):
        resolve_dtype("int3", "cpu")


def test_bench_runs_tiny_on_cpu():
    from amrsim.bench.translate import bench_translate

    tiny = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=101, max_position_embeddings=64,
                pad_token_id=100, decoder_start_token_id=100)
    r = bench_translate(device="cpu", n_sentences=8, batch_size=4, out_tokens=4, num_beams=2, n_naive=3,
                        config_overrides=tiny)
    assert r["n_sentences"] == 8 and r["naive_sentences"] == 3 and r["out_tokens"] == 4
    assert r["batched_generated_tokens"] == 8 * 4  # fixed output length
    assert r["batched_sentences_per_s"] > 0 and r["naive_sentences_per_s"] > 0 and r["speedup"] > 0
    assert r["dtype"] == "float32" and r["device"] == "cpu"
