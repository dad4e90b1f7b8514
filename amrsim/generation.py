"""Batches for beam-search generation on a GPU (translation, parsing): a token budget sized from the device's free
memory, batches that fill it, and out-of-memory detection for the generators' halving back-off. torch is imported
only when asked; nothing here reads the warehouse (the GPU check runs with torch and transformers alone).

A batch's cost is counted in beam tokens: sentences x beams x (longest input + output tokens), the positions whose
key/value caches and activations generation holds at once. A beam token of a model costs about
OVERHEAD x 2 (keys and values) x layers x width x bytes of its dtype; the budget is BUDGET_FRACTION of the free memory
divided by that. On the reference GPU runs this predicted 4.6 GB for opus-mt-en-de at batch 1,024 (10 GiB measured)
and 8.3 GB for bart-large at batch 256 (12.5 GiB measured): OVERHEAD 3 keeps a margin over both."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BUDGET_FRACTION = 0.7  # of the free device memory at start: the rest for the allocator's fragmentation and peaks
OVERHEAD = 3.0  # measured peak / predicted cache bytes was 1.5-2.2: a margin over both
MAX_BATCH_SENTENCES = 1024  # past this, a larger batch no longer paid on the reference GPU runs


@dataclass(frozen=True)
class TokenBudget:
    """Beam tokens per batch and how they were chosen (for the log and lineage)."""

    tokens: int
    source: str

    def halved(self) -> TokenBudget:
        return TokenBudget(max(1, self.tokens // 2), f"{self.tokens // 2} after out of memory at {self.tokens}")


_DTYPES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16", "half": "float16",
           "bfloat16": "bfloat16", "bf16": "bfloat16"}


def resolve_dtype(dtype: str, device: str):
    """'auto' -> bf16 on a CUDA device that supports it, else fp16 on CUDA, fp32 elsewhere."""
    import torch

    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected 'auto' or one of {sorted(_DTYPES)}")
    return getattr(torch, _DTYPES[dtype])


def resolve_device(device: str = "auto") -> str:
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; anything else ('cpu', 'cuda:1', ...) is kept."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):  # else torch fails deep inside loading with an AssertionError or a CUDA error
        from amrsim.errors import ConfigError

        index = device.partition(":")[2]
        if not torch.cuda.is_available():
            built = "" if torch.version.cuda else ", this torch is built without CUDA"
            raise ConfigError(f"device '{device}': CUDA is not available on this machine{built}; use device=auto "
                              f"(CUDA when present, else CPU) or device=cpu")
        if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
            raise ConfigError(f"device '{device}': this machine has {torch.cuda.device_count()} CUDA device(s), "
                              f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return device


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, longest first (an OOM shows up on the first batch)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int, device: Any):
    """Right-padded input_ids and attention_mask tensors for a list of token-id lists."""
    import torch

    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, s in enumerate(seqs):
        ids[row, :len(s)] = torch.tensor(list(s), dtype=torch.long)
        mask[row, :len(s)] = 1
    return ids.to(device), mask.to(device)


def dtype_bytes(dtype: Any) -> int:
    import torch

    return int(torch.empty((), dtype=dtype).element_size())


def bytes_per_beam_token(config: Any, element_bytes: int) -> int:
    """Device bytes one beam token costs a seq2seq model of this transformers `config` (see the module docstring)."""
    width = int(getattr(config, "d_model", None) or config.hidden_size)
    layers = int(getattr(config, "decoder_layers", None) or getattr(config, "num_hidden_layers", 1))
    layers += int(getattr(config, "encoder_layers", None) or 0)
    return max(1, int(OVERHEAD * 2 * layers * width * element_bytes))


def free_device_memory(device: str) -> int | None:
    """Free bytes on a CUDA device; None on the CPU (no budget: batches keep their fixed size)."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    return int(torch.cuda.mem_get_info(torch.device(device))[0])


def auto_budget(config: Any, element_bytes: int, device: str, free_bytes: int | None = None) -> TokenBudget | None:
    """The token budget for `device` (free memory measured now unless `free_bytes` is given); None on the CPU."""
    free = free_bytes if free_bytes is not None else free_device_memory(device)
    if free is None:
        return None
    per = bytes_per_beam_token(config, element_bytes)
    tokens = max(1, int(BUDGET_FRACTION * free / per))
    return TokenBudget(tokens, f"{BUDGET_FRACTION:g} x {free / 2**30:.1f} GiB free / {per} B per beam token")


def token_budget(batch_budget: int | str | None, config: Any, dtype: Any, device: str,
                 free_bytes: int | None = None) -> TokenBudget | None:
    """What a generator's `batch_budget` option means: None (fixed-size batches), a number of beam tokens, or
    "auto" (`auto_budget` for the model `config` in `dtype` on `device`)."""
    if batch_budget is None:
        return None
    if isinstance(batch_budget, int) and not isinstance(batch_budget, bool) and batch_budget >= 1:
        return TokenBudget(batch_budget, "batch_budget")
    if batch_budget != "auto":
        raise ValueError(f"batch_budget {batch_budget!r}: 'auto', a positive number of beam tokens, or None")
    return auto_budget(config, dtype_bytes(dtype), device, free_bytes)


def budget_batches(lengths: Sequence[int], out_tokens: int, beams: int, budget: int,
                   max_sentences: int = MAX_BATCH_SENTENCES) -> list[list[int]]:
    """Indices, longest first, cut into batches whose beam tokens (n x beams x (longest + out_tokens)) stay within
    `budget` (a single over-budget item is its own batch) and at most `max_sentences` long."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches:
            batch = batches[-1]
            longest = lengths[batch[0]]  # sorted: the first is the longest
            if len(batch) < max_sentences and (len(batch) + 1) * beams * (longest + out_tokens) <= budget:
                batch.append(i)
                continue
        batches.append([i])
    return batches


def release_device_memory(device: str) -> None:
    """Return the CUDA allocator's cached blocks after a failed batch, so the retry starts from free memory."""
    if str(device).startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def is_out_of_memory(error: BaseException) -> bool:
    """A CUDA (or other accelerator) allocation failure: the batch may fit when halved."""
    import torch

    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()
