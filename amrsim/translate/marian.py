"""The `marian` translation backend: OPUS-MT (MarianMT) models through transformers, batched and row-safe.

Why it is shaped this way:

* Throughput: inputs are tokenised once, sorted by token length and generated in batches of similar length
  (little padding), then put back in input order. Greedy results equal one-at-a-time results. On a GPU a batch
  fills a budget of beam tokens sized from the free memory at load (`batch_budget`, `amrsim.generation`); on the
  CPU it holds `batch_size` inputs.
* No silent truncation: an input longer than the model accepts (the smallest of the model's
  `max_position_embeddings`, the tokenizer's `model_max_length` and `max_input_tokens`) is split into
  sentences, packed greedily into pieces that fit, a sentence that alone is too long is cut into token chunks
  (at word starts where possible); the pieces are translated and joined with a space, and the row is flagged
  `split`.
* No lost rows: empty input is a failed row; a batch out of memory is halved (and so is the budget of later
  batches) and retried; a batch that raises otherwise is retried one segment at a time, and a segment that
  still raises fails only its own row. The output always has the
  input's length and order.
* Loading is eager (in `__init__`), so a missing directory or an unloadable hub id fails fast with the path or
  id in the message. Pickling ships only the options; the model is loaded again on unpickling (Ray actors,
  worker processes), so no tensors or file handles travel.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amrsim.files import looks_like_path
from amrsim.generation import (
    TokenBudget,
    budget_batches,
    is_out_of_memory,
    length_sorted_batches,
    pad_batch,
    release_device_memory,
    resolve_device,
    resolve_dtype,
    token_budget,
)
from amrsim.text import blank, empty_reason
from amrsim.translate import TranslationResult

log = logging.getLogger(__name__)

# torch, transformers are imported inside the functions: importing this module must stay cheap

SPLIT = "split"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
@contextmanager
def quiet_hub_requests() -> Iterator[None]:
    """huggingface_hub logs each failed request ('... thrown while requesting HEAD ...') before the load fails;
    the failure is reported once, as the load error, so those lines are held back while loading."""
    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hub_log.setLevel(level)


@dataclass
class _Segment:
    """One unit of generation: all of an input, or one piece of an over-long input."""

    row: int
    ids: list[int]
    text: str | None = None
    error: str | None = None


@dataclass
class _Row:
    segments: list[_Segment] = field(default_factory=list)
    split: bool = False


class MarianTranslator:
    """Translate with a MarianMT (OPUS-MT) model from the hub (`Helsinki-NLP/opus-mt-en-de`) or a directory.

    `max_length` is the most new tokens generated per input (or per piece of a split input); it is capped by
    the model's position table. `max_input_tokens` further caps the input length above which inputs are split.
    """

    name = "marian"

    def __init__(self, model: str, device: str = "auto", batch_size: int = 32, num_beams: int = 4,
                 max_length: int = 256, dtype: str = "auto", max_input_tokens: int | None = None,
                 batch_budget: int | str | None = "auto", free_memory: int | None = None):
        if batch_size < 1 or num_beams < 1 or max_length < 1:
            raise ValueError("batch_size, num_beams and max_length must be >= 1")
        if max_input_tokens is not None and max_input_tokens < 2:
            raise ValueError("max_input_tokens must be >= 2 (one token plus </s>)")
        self.model_name = str(model)
        self.device = resolve_device(device)
        self.dtype_name = dtype
        self.batch_size = batch_size
        self.num_beams = num_beams
        self.max_length = max_length
        self.max_input_tokens = max_input_tokens
        self.batch_budget, self.free_memory = batch_budget, free_memory
        self._load()

    # -- loading and pickling ---------------------------------------------------------------------------

    def _load(self) -> None:
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        self.torch_dtype = resolve_dtype(self.dtype_name, self.device)  # validates dtype before any loading
        source = self.model_name
        path = Path(source).expanduser()
        if path.exists():
            source = str(path)
        elif looks_like_path(source):
            raise FileNotFoundError(f"translation model directory not found: {source}")
        try:
            with quiet_hub_requests():
                self.tokenizer = AutoTokenizer.from_pretrained(source)
                model = AutoModelForSeq2SeqLM.from_pretrained(source)
        except Exception as e:  # offline hub, missing files, bad config: name the model, keep the cause's first line
            cause = " ".join(str(e).split("\n")[0].split())
            raise OSError(f"cannot load translation model '{self.model_name}' ({type(e).__name__}: {cause})") from e
        self.model = model.to(device=self.device, dtype=self.torch_dtype).eval()
        limits = [getattr(model.config, "max_position_embeddings", None), self.tokenizer.model_max_length,
                  self.max_input_tokens]
        self.input_limit = min(int(x) for x in limits if x and 1 < int(x) < 1_000_000)
        positions = getattr(model.config, "max_position_embeddings", None) or self.max_length
        self.max_new_tokens = min(self.max_length, int(positions))
        self.pad_id = self.tokenizer.pad_token_id
        self.eos_id = self.tokenizer.eos_token_id
        self.budget = self._budget(model.config)

    def _budget(self, config: Any) -> TokenBudget | None:
        """Beam tokens per batch: sized from free GPU memory (`auto`, CUDA only), given, or none (fixed
        `batch_size` batches, as on the CPU)."""
        budget = token_budget(self.batch_budget, config, self.torch_dtype, self.device, self.free_memory)
        if budget is not None:
            log.info("translation %s on %s: %d beam tokens per batch (%s)", self.model_name, self.device,
                     budget.tokens, budget.source)
        return budget

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for key in ("model", "tokenizer", "torch_dtype"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._load()

    # -- segmentation -----------------------------------------------------------------------------------

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids with </s>, never truncated."""
        return self.tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]

    def _chunk(self, body: list[int]) -> list[list[int]]:
        """Cut token ids (no </s>) into pieces of at most limit-1 tokens, preferring cuts before a word start."""
        cap = self.input_limit - 1
        tokens = self.tokenizer.convert_ids_to_tokens(body)
        pieces, start = [], 0
        while len(body) - start > cap:
            cut = next((j for j in range(start + cap, start, -1) if tokens[j].startswith("▁")), start + cap)
            pieces.append(body[start:cut])
            start = cut
        pieces.append(body[start:])
        return pieces

    def _split(self, text: str) -> list[list[int]]:
        """Pieces (token ids with </s>) of an over-long text: whole sentences packed greedily, long ones chunked."""
        cap = self.input_limit - 1  # room for </s>
        units: list[list[int]] = []
        for ids in self._encode([s for s in _SENTENCE_END.split(text.strip()) if s.strip()]):
            body = ids[:-1] if ids and ids[-1] == self.eos_id else ids
            units.extend(self._chunk(body) if len(body) > cap else [body])
        pieces: list[list[int]] = []
        for unit in units:
            if pieces and len(pieces[-1]) + len(unit) <= cap:
                pieces[-1] = pieces[-1] + unit
            else:
                pieces.append(list(unit))
        return [p + [self.eos_id] for p in pieces if p]

    # -- generation -------------------------------------------------------------------------------------

    def _generate(self, seqs: Sequence[Sequence[int]]) -> list[str]:
        import torch

        ids, mask = pad_batch(seqs, self.pad_id, self.model.device)
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, num_beams=self.num_beams,
                                      max_new_tokens=self.max_new_tokens)
        return self.tokenizer.batch_decode(out, skip_special_tokens=True)

    def _run_batch(self, batch: list[_Segment]) -> None:
        """Generate a batch. Out of memory: halve it (and the budget of the batches after it) and retry each half;
        any other error: retry its segments one at a time, failing only those that still raise."""
        try:
            for seg, text in zip(batch, self._generate([s.ids for s in batch]), strict=True):
                seg.text = text
            return
        except Exception as e:
            if len(batch) == 1:
                batch[0].error = f"{type(e).__name__}: {e}"
                return
            if is_out_of_memory(e):
                self._free_cache()
                if self.budget is not None:
                    self.budget = self.budget.halved()
                    log.warning("translation: out of memory at %d segments; %s", len(batch), self.budget.source)
                half = len(batch) // 2
                self._run_batch(batch[:half])
                self._run_batch(batch[half:])
                return
        self._free_cache()
        for seg in batch:
            try:
                seg.text = self._generate([seg.ids])[0]
            except Exception as e:
                seg.error = f"{type(e).__name__}: {e}"
                self._free_cache()

    def _free_cache(self) -> None:
        release_device_memory(self.device)

    def batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Segment indices by batch: filling the token budget when there is one, else `batch_size` at a time."""
        if self.budget is None:
            return length_sorted_batches(lengths, self.batch_size)
        return budget_batches(lengths, self.max_new_tokens, self.num_beams, self.budget.tokens)

    def translate(self, texts: Sequence[str], on_progress: Callable[[int], None] | None = None
                  ) -> list[TranslationResult]:
        """One result per input, same order; failed rows carry the reason, split rows the `split` flag.
        `on_progress(n)`: told the rows whose every piece is translated, batch by batch."""
        texts = ["" if t is None else str(t) for t in texts]
        rows = [_Row() for _ in texts]
        live = [i for i, t in enumerate(texts) if not blank(t)]  # a text of only '\u200b' is empty too
        segments: list[_Segment] = []
        for i, ids in zip(live, self._encode([texts[i] for i in live]) if live else [], strict=True):
            if len(ids) <= self.input_limit:
                pieces = [ids]
            else:
                pieces, rows[i].split = self._split(texts[i]), True
            rows[i].segments = [_Segment(i, p) for p in pieces]
            segments.extend(rows[i].segments)
        left = [len(row.segments) for row in rows]  # pieces a row waits for
        if on_progress is not None and 0 in left:
            on_progress(left.count(0))  # empty texts
        for batch in self.batches([len(s.ids) for s in segments]):
            self._run_batch([segments[j] for j in batch])
            if on_progress is not None:
                for j in batch:
                    left[segments[j].row] -= 1
                if finished := sum(left[r] == 0 for r in {segments[j].row for j in batch}):
                    on_progress(finished)  # rows whose last piece was in this batch
        results = []
        for source, row in zip(texts, rows, strict=True):
            if not row.segments:
                results.append(TranslationResult.failed(empty_reason(source, "text") or "empty text"))
                continue
            errors = [s.error for s in row.segments if s.error is not None]
            if errors:
                where = f" ({len(errors)} of {len(row.segments)} pieces)" if row.split else ""
                results.append(TranslationResult.failed(f"translation failed{where}: {errors[0]}"))
            else:
                text = " ".join(s.text.strip() for s in row.segments if s.text is not None)
                results.append(TranslationResult(text, flags=SPLIT if row.split else None))
        return results
