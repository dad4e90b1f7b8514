"""Batch sizing for beam-search generation: the token budget from a (fake) free-memory figure, batches that fill
it, out-of-memory detection, dtype selection; the translator using them on a tiny Marian model."""

from __future__ import annotations

import types

import pytest
import torch

from amrsim.generation import (
    BUDGET_FRACTION,
    MAX_BATCH_SENTENCES,
    TokenBudget,
    auto_budget,
    budget_batches,
    bytes_per_beam_token,
    is_out_of_memory,
    resolve_dtype,
)

OPUS_MT = types.SimpleNamespace(d_model=512, encoder_layers=6, decoder_layers=6)
BART_LARGE = types.SimpleNamespace(d_model=1024, encoder_layers=12, decoder_layers=12)
GIB = 2**30


def test_budget_from_free_memory_and_none_on_the_cpu():
    per = bytes_per_beam_token(OPUS_MT, 2)
    assert per == 3 * 2 * 12 * 512 * 2
    budget = auto_budget(OPUS_MT, 2, "cuda", free_bytes=78 * GIB)
    assert budget is not None and budget.tokens == int(BUDGET_FRACTION * 78 * GIB / per)
    assert "78.0 GiB free" in budget.source
    assert auto_budget(OPUS_MT, 2, "cpu") is None  # the CPU keeps fixed-size batches
    # an 80 GB card, the GPU benchmarks' settings (4 beams, 64 and 128 output tokens): batches of 1,024 and 295,
    # where 1,024 (translation) and 256 (bart-large parsing) ran in 10 and 12.5 GiB
    assert len(budget_batches([40] * 5000, 64, 4, budget.tokens)[0]) == MAX_BATCH_SENTENCES
    bart = auto_budget(BART_LARGE, 2, "cuda", free_bytes=78 * GIB)
    assert bart is not None and len(budget_batches([40] * 5000, 128, 4, bart.tokens)[0]) == 295


def test_batches_fill_the_budget_longest_first_and_keep_every_item():
    lengths = [5, 30, 12, 30, 8, 100, 1]
    batches = budget_batches(lengths, out_tokens=10, beams=2, budget=200)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[0] == [5]  # 1 x 2 x 110 = 220 > 200: an over-budget item is its own batch
    for batch in batches:
        assert [lengths[i] for i in batch] == sorted((lengths[i] for i in batch), reverse=True)
        longest = lengths[batch[0]]
        assert len(batch) == 1 or len(batch) * 2 * (longest + 10) <= 200
    assert budget_batches([3] * 10, 1, 1, 10**9, max_sentences=4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_out_of_memory_is_recognised_and_the_budget_halves():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_out_of_memory(RuntimeError("CUDA error: out of memory"))
    assert not is_out_of_memory(RuntimeError("device-side assert triggered"))
    assert TokenBudget(1000, "x").halved().tokens == 500 and TokenBudget(1, "x").halved().tokens == 1


def test_dtype_selection():
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("float32", "cuda") == torch.float32  # exact reproduction of fp32 runs
    assert resolve_dtype("bf16", "cpu") == torch.bfloat16
    if torch.cuda.is_available():
        assert resolve_dtype("auto", "cuda") in (torch.bfloat16, torch.float16)
    with pytest.raises(ValueError, match="unknown dtype 'int3'"):
        resolve_dtype("int3", "cpu")


def test_translator_batches_by_budget_and_halves_on_out_of_memory(tmp_path, monkeypatch):
    """A budget from a fake free-memory figure on the CPU: batches fill it, results equal fixed-size batches; an
    injected out-of-memory error on batches over 2 segments halves them until they fit, none lost."""
    import random

    from amrsim.translate.marian import MarianTranslator
    from tests.helpers import build_tiny_marian, random_sentence

    model = build_tiny_marian(tmp_path / "m", max_pos=64)
    fixed = MarianTranslator(model, device="cpu", batch_size=4, num_beams=1, max_length=12, batch_budget=None)
    per = bytes_per_beam_token(fixed.model.config, 4)
    budgeted = MarianTranslator(model, device="cpu", batch_size=4, num_beams=1, max_length=12,
                                free_memory=int(400 * per / BUDGET_FRACTION) + 1)
    assert fixed.budget is None and budgeted.budget is not None and budgeted.budget.tokens == 400
    rng = random.Random(0)
    texts = [random_sentence(rng) for _ in range(20)]
    expected = [r.text for r in fixed.translate(texts)]
    sizes: list[int] = []
    real = budgeted.model.generate

    def recording(*args, **kwargs):
        sizes.append(kwargs["input_ids"].shape[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(budgeted.model, "generate", recording)
    assert [r.text for r in budgeted.translate(texts)] == expected
    assert max(sizes) > 4 and sum(sizes) == 20  # fuller batches than batch_size, each segment once

    sizes.clear()

    def out_of_memory_over_two(*args, **kwargs):
        sizes.append(kwargs["input_ids"].shape[0])
        if kwargs["input_ids"].shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(budgeted.model, "generate", out_of_memory_over_two)
    results = budgeted.translate(texts)
    assert [r.text for r in results] == expected and all(r.status == "ok" for r in results)
    assert budgeted.budget is not None and budgeted.budget.tokens < 400 and "after out of memory" in \
        budgeted.budget.source
    assert sum(s for s in sizes if s <= 2) == 20  # every segment generated once, in batches that fit


def test_the_budget_a_stage_used_is_recorded_in_its_lineage_row(tmp_path):
    """translate_frame carries each row's budget (a fixed number here: the CPU has no free-memory budget); the
    stage takes the column off the rows and its lineage row says which budgets ran."""
    import json

    import polars as pl

    from amrsim.translate.run import TranslatorSpec, translate_frame
    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.lineage import StageRun, record_stage
    from tests.helpers import build_tiny_marian

    model = build_tiny_marian(tmp_path / "m", max_pos=64)
    frame = pl.DataFrame({"source": ["the cat runs", "a dog"], "source_lang": ["en", "en"],
                          "target_lang": ["de", "de"], "model": ["m", "m"]})
    done = translate_frame(frame, {"m": TranslatorSpec(model, num_beams=1, max_length=8, device="cpu",
                                                       batch_budget=300)})
    assert done["batch_budget"].to_list() == [300, 300]
    wh = Warehouse(tmp_path / "wh")
    run = StageRun(run_id="r1", pipeline="p", stage="translate:marian", dataset="d", config_hash="h")
    with record_stage(wh, run):
        rows = run.take_budgets(done)
    assert "batch_budget" not in rows.columns and run.settings == {"batch_budget": [300]}
    lineage = wh.read("meta", "lineage")
    assert json.loads(lineage["settings"][0]) == {"batch_budget": [300]}
    cpu = StageRun(run_id="r2", pipeline="p", stage="parse", dataset="d", config_hash="h")
    assert cpu.take_budgets(done.with_columns(pl.lit(None, pl.Int64).alias("batch_budget"))).width == \
        done.width - 1 and cpu.settings == {}


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:1"])
def test_cuda_asked_for_without_cuda_is_one_config_error(monkeypatch, device):
    """`--param device=cuda` (or `device: cuda`) on a machine without CUDA: one line saying so, not torch's
    AssertionError ('Torch not compiled with CUDA enabled') from deep inside loading a model."""
    import torch

    from amrsim.errors import ConfigError
    from amrsim.generation import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=rf"^device '{device}': CUDA is not available on this machine.*device=cpu"):
        resolve_device(device)
    assert resolve_device("auto") == resolve_device("cpu") == "cpu"


def test_a_cuda_index_beyond_the_devices_is_one_config_error(monkeypatch):
    import torch

    from amrsim.errors import ConfigError
    from amrsim.generation import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(ConfigError, match=r"^device 'cuda:2': this machine has 2 CUDA device\(s\), cuda:0 to cuda:1"):
        resolve_device("cuda:2")


def test_evaluate_with_device_cuda_without_cuda_is_one_line(tmp_path):
    import torch

    from tests.helpers import one_line_error, run_cli

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    pairs = tmp_path / "p.tsv"
    pairs.write_text("sentence1\tsentence2\tscore\na cat\ta dog\t1\nthe sun\tthe moon\t3\n")
    line = one_line_error(run_cli(tmp_path, "evaluate", "sts", "--encoder", "minilm", "--file", str(pairs),
                                  "--device", "cuda"))
    assert line.startswith("error: device 'cuda': CUDA is not available on this machine")
