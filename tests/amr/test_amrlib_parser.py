"""The amrlib backend over a tiny random parse_xfm-format model built here (offline), and the parse benchmark.

The model is garbage, so the real code path (amrlib's Inference: tokenize, beam search, decode; amrlib's
deserialiser; our validation) must turn garbage into failed rows with reasons. Beam choice, ordering and the
batch retry are checked with a fake `generate` whose beams are known strings.
"""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("amrlib")

from amrsim.amr.amrlib_parser import AmrlibParser, choose_beam  # noqa: E402
from amrsim.amr.graph import parse  # noqa: E402
from amrsim.warehouse import FAILED, OK  # noqa: E402

CORPUS = ["The boy wants to go.", "A girl sees the cat in Paris.", "Nobody came.",
          "( want-01 :ARG0 ( boy ) :ARG1 ( go-02 :ARG0 boy ) )", '( city :name ( name :op1 "Paris" ) )',
          "( see-01 :ARG0 ( girl ) :ARG1 ( cat ) :polarity - )", ":ARG0 :ARG1 :ARG2 :mod :op1 -of"]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # BART's ids 0-3 (+ mask)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 20, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", mask_token="<mask>")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A parse_xfm directory laid out like amrlib's releases: amrlib_meta.json, a config.json carrying the
    generation settings and task_specific_params.parse_amr, pytorch_model.bin, no generation_config.json; plus
    the tokenizer files (the releases name facebook/bart-large instead)."""
    from transformers import BartConfig, BartForConditionalGeneration

    d = tmp_path_factory.mktemp("model_parse_xfm_tiny")
    tokenizer = _tokenizer()
    tokenizer.save_pretrained(d)
    config = BartConfig(vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                        max_position_embeddings=128, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                        decoder_start_token_id=2)
    torch.manual_seed(0)
    model = BartForConditionalGeneration(config)
    torch.save(model.state_dict(), d / "pytorch_model.bin")
    cfg = config.to_dict()
    cfg.update(architectures=["BartForConditionalGeneration"], forced_bos_token_id=0, forced_eos_token_id=2,
               no_repeat_ngram_size=3, num_beams=4, early_stopping=True,  # what bart-large's config carries
               task_specific_params={"parse_amr": {"model_name_or_path": "facebook/bart-large", "max_in_len": 64,
                                                   "max_out_len": 24, "save_tokenizer": False}})
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (d / "amrlib_meta.json").write_text(json.dumps(
        {"model_type": "stog", "version": "0.1.0", "inference_module": ".parse_xfm.inference",
         "inference_class": "Inference", "model_fn": "pytorch_model.bin", "kwargs": {}}), encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def parser(model_dir):
    return AmrlibParser(model_dir, device="auto", batch_size=2, num_beams=2)


def test_loads_with_amrlib_inference(parser, model_dir):
    assert parser.name == "amrlib" and parser.device == "cpu"  # auto on a machine without CUDA
    assert parser.max_sent_len == 64 and parser.max_graph_len == 24
    # amrlib's no_repeat_ngram_size=0 override targets model.config, a no-op in transformers 5: we set it
    assert parser._inference.model.generation_config.no_repeat_ngram_size == 0
    assert AmrlibParser(model_dir, device="cpu", max_sent_len=16).max_sent_len == 16


def test_garbage_becomes_failed_rows_in_order(parser):
    sentences = ["The boy wants to go.", "", "Nobody came.", "   ", "A girl sees the cat in Paris, again and again.",
                 "Go!", "The boy wants to go."]
    results = parser.parse(sentences)
    assert len(results) == len(sentences)
    for s, r in zip(sentences, results, strict=True):
        if not s.strip():
            assert (r.status, r.error, r.penman) == (FAILED, "empty sentence", None)
        elif r.status == OK:  # a random model may, by chance, emit a single valid concept
            parse(r.penman)
        else:
            assert r.penman is None and r.error.startswith("no beam deserialised to a valid graph (beam 1: ")
    assert sum(r.status == FAILED and r.error != "empty sentence" for r in results) >= 1
    assert results[0] == results[6]  # deterministic per sentence, whatever its batch
    assert parser.parse([]) == []


def _fake_generate(parser, calls, beams_for, fail=lambda texts: None):
    """A `generate` returning, per input sentence, the token ids of `beams_for(sentence)` (best first)."""
    tok = parser._inference.tokenizer

    def generate(input_ids=None, attention_mask=None, num_return_sequences=1, **kwargs):
        texts = tok.batch_decode(input_ids, skip_special_tokens=True)
        calls.append(texts)
        fail(texts)
        rows = []
        for t in texts:
            beams = beams_for(t)
            assert len(beams) == num_return_sequences
            rows += [tok(b, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for b in beams]
        width = max(map(len, rows))
        return torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])

    return generate


def test_first_valid_beam_is_chosen_and_order_restored(model_dir, monkeypatch):
    p = AmrlibParser(model_dir, device="cpu", batch_size=2, num_beams=3)
    calls: list[list[str]] = []
    # beam 1: amrlib cannot deserialise it; beam 2: deserialises to "()" (amrlib would stop here and return it);
    # beam 3: a real graph naming the sentence's first word
    beams = lambda t: [":ARG0 :ARG1", ")))", f"( say-01 :ARG0 ( {t.split()[0].lower()} ) :polarity - )"]  # noqa: E731
    monkeypatch.setattr(p._inference.model, "generate", _fake_generate(p, calls, beams))
    sentences = ["Alpha is short.", "Bravo is a much longer sentence than the others.", "", "Charlie medium one."]
    results = p.parse(sentences)
    assert [r.status for r in results] == [OK, OK, FAILED, OK]
    for s, r in zip(sentences, results, strict=True):
        if s:
            g = parse(r.penman)
            assert {t.target for t in g.instances()} == {"say-01", s.split()[0].lower()}
            assert g.attributes(role=":polarity")[0].target == "-"
    assert calls == [["Bravo is a much longer sentence than the others.", "Charlie medium one."], ["Alpha is short."]]


def test_choose_beam_directly():
    ok = choose_beam([")))", "( boy )"])
    assert ok.status == OK and parse(ok.penman) and ok.penman.startswith("(b / boy")
    bad = choose_beam([":ARG0 :ARG1", ")))"])
    assert bad.status == FAILED and bad.penman is None
    assert bad.error == ("no beam deserialised to a valid graph "
                         "(beam 1: not deserialisable; beam 2: deserialised to an empty graph)")
    assert choose_beam([]).error == "the model returned no beams"


def test_choose_beam_validates_what_amrlib_accepts(monkeypatch):
    from amrlib.models.parse_xfm import penman_serializer

    # amrlib's deserialiser repairs nearly anything; make it hand back a graph amrsim rejects
    monkeypatch.setattr(penman_serializer.PenmanDeSerializer, "get_graph_string",
                        lambda self: "(a / and :op1 zz)" if "bad" in self._raw else "(o / ok)")
    monkeypatch.setattr(penman_serializer.PenmanDeSerializer, "__init__",
                        lambda self, raw, gid="x": setattr(self, "_raw", raw))
    assert choose_beam(["bad", "good"]).penman == "(o / ok)"
    r = choose_beam(["bad"])
    assert r.error == "no beam deserialised to a valid graph (beam 1: invalid graph: undefined variable zz)"


def test_batch_error_retried_one_by_one(model_dir, monkeypatch):
    p = AmrlibParser(model_dir, device="cpu", batch_size=4, num_beams=1)
    calls: list[list[str]] = []

    def fail(texts):
        if len(texts) > 1 or "boom" in texts[0]:
            raise RuntimeError("device-side assert (simulated)")

    monkeypatch.setattr(p._inference.model, "generate",
                        _fake_generate(p, calls, lambda t: [f"( {t.split()[0].lower()} )"], fail))
    results = p.parse(["first one", "boom here", "third"])
    assert [r.status for r in results] == [OK, FAILED, OK]
    assert results[1].error == "generation failed: RuntimeError: device-side assert (simulated)"
    assert results[0].penman.startswith("(f / first") and results[2].penman.startswith("(t / third")
    assert len(calls) == 1 + 3  # the batch, then each sentence


def test_out_of_memory_halves_the_batch_and_the_budget(model_dir, monkeypatch):
    """An injected CUDA out-of-memory error on batches over 2 sentences: each is halved until it fits, later
    batches get half the budget; no sentence is lost."""
    import torch

    p = AmrlibParser(model_dir, device="cpu", batch_size=4, num_beams=1, batch_budget=10_000)
    calls: list[list[str]] = []

    def fail(texts):
        if len(texts) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")

    monkeypatch.setattr(p._inference.model, "generate",
                        _fake_generate(p, calls, lambda t: [f"( {t.split()[0].lower()} )"], fail))
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    results = p.parse([f"{w} runs" for w in words])
    assert [r.status for r in results] == [OK] * 6
    assert [r.penman.split()[2].rstrip(")") for r in results] == words
    assert [len(c) for c in calls] == [6, 3, 1, 2, 3, 1, 2]
    assert p.budget is not None and p.budget.tokens == 10_000 // 8  # halved once per out-of-memory batch


def test_released_layout_without_tokenizer_files(model_dir, tmp_path):
    import shutil

    bare = tmp_path / "released"
    bare.mkdir()
    for name in ("config.json", "pytorch_model.bin", "amrlib_meta.json"):
        shutil.copy(model_dir / name, bare / name)
    try:  # the config names facebook/bart-large: fine where the HF cache has it, a clear error where not
        AmrlibParser(bare, device="cpu")
    except OSError as e:
        assert "facebook/bart-large" in str(e) and "tokenizer=" in str(e)
    p = AmrlibParser(bare, device="cpu", num_beams=1, tokenizer=model_dir)
    assert len(p.parse(["The boy wants to go."])) == 1


def test_missing_model_dir_names_the_path(tmp_path):
    missing = tmp_path / "no_such_model"
    with pytest.raises(FileNotFoundError, match="no_such_model"):
        AmrlibParser(missing)


def test_not_a_parse_model(tmp_path):
    (tmp_path / "amrlib_meta.json").write_text(json.dumps({"inference_module": ".parse_spring.inference"}))
    with pytest.raises(ValueError, match="not a parse_xfm model"):
        AmrlibParser(tmp_path)
    (tmp_path / "amrlib_meta.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        AmrlibParser(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bart"}))
    with pytest.raises(ValueError, match="task_specific_params.parse_amr"):
        AmrlibParser(tmp_path)


@pytest.mark.slow
def test_bench_parse_tiny_cpu():
    from amrsim.bench.parse import BART_SHAPES, bench_parse

    assert BART_SHAPES["large"]["d_model"] == 1024 and BART_SHAPES["base"]["encoder_layers"] == 6
    tiny = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
            "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 1000,
            "max_position_embeddings": 32}
    out = bench_parse(device="cpu", size="large", n_sentences=6, batch_size=4, out_tokens=64, num_beams=2,
                      config_overrides=tiny, n_naive=2)
    assert out["out_tokens"] == 30 and out["out_tokens_requested"] == 64  # clipped to the tiny positions
    assert out["fixed_length_ok"] and out["input_tokens_max"] <= 30
    assert out["sentences_per_s"] > 0 and out["naive"]["n_sentences"] == 2 and out["speedup_vs_naive"] > 0
    assert out["output_tokens_per_s"] == pytest.approx(6 * 30 / out["seconds"], rel=0.05)
    with pytest.raises(ValueError, match="size"):
        bench_parse(device="cpu", size="huge", config_overrides=tiny)


def test_dtype_option_and_no_budget_on_the_cpu(model_dir):
    """bf16 where asked (the CUDA default), fp32 on the CPU by default; no free-memory budget on the CPU."""
    import torch

    assert AmrlibParser(model_dir, device="cpu").budget is None
    assert next(AmrlibParser(model_dir, device="cpu")._inference.model.parameters()).dtype == torch.float32
    bf16 = AmrlibParser(model_dir, device="cpu", dtype="bf16", num_beams=1)
    assert next(bf16._inference.model.parameters()).dtype == torch.bfloat16
    assert bf16.parse(["The boy wants to go."])[0].status in (OK, FAILED)  # random weights: runs, row kept
    with pytest.raises(ValueError, match="unknown dtype 'int3'"):
        AmrlibParser(model_dir, device="cpu", dtype="int3")
