"""English text to AMR with amrlib's parse_xfm seq2seq models (BART/T5), one result per sentence, never a crash.

A parse_xfm model directory (as released by amrlib, e.g. ``model_parse_xfm_bart_large-v0_1_0``) holds:

* ``amrlib_meta.json`` -- ``{"model_type": "stog", "inference_module": ".parse_xfm.inference",
  "inference_class": "Inference", "model_fn": "pytorch_model.bin", "kwargs": {}}`` (``.parse_t5.inference`` in the
  older T5 releases, same code);
* the Hugging Face model (``config.json`` + ``pytorch_model.bin`` or ``model.safetensors``), whose
  ``config.task_specific_params["parse_amr"]`` carries ``max_in_len``, ``max_out_len`` and the tokenizer's name
  (``tok_name_or_path``, else ``model_name_or_path``, e.g. ``facebook/bart-large``);
* optionally the tokenizer files. The released models ship none (``save_tokenizer: false``) and name the hub
  tokenizer; offline, that needs the Hugging Face cache, so tokenizer files found in the model directory win, and
  ``tokenizer=`` names another directory.

Generation is amrlib's own: its ``Inference`` class loads the model and tokenizer and, per batch, tokenizes,
generates ``num_beams`` beams with ``num_return_sequences = num_beams`` and decodes them
(``parse_sents(..., ret_raw_gen=True)``). Post-processing is ours, with amrlib's pieces: each beam, best first, goes
through amrlib's ``PenmanDeSerializer`` (variables restored, minor defects repaired) and then
`amrsim.amr.graph.parse`; the first beam passing both wins. amrlib itself stops at the first beam that deserialises,
and its deserialiser returns ``()`` (no graph) for garbage rather than failing, so amrlib would hand back ``()``
where a later beam is a real graph; validating before choosing fixes that. Graphs come back as the deserialiser
writes them (PENMAN, indent 6) without the ``# ::snt`` line amrlib adds: the row already holds the sentence.

Sentences are parsed longest first in batches (padding waste is small), results come back in input order. On a GPU
a batch fills a budget of beam tokens sized from the free memory at load (`batch_budget`, `amrsim.generation`) and
the model runs in bf16 (fp16 where bf16 is unsupported; `dtype: float32` reproduces fp32 runs); on the CPU batches
hold `batch_size` sentences in fp32. Empty sentences fail without reaching the model; a batch out of memory is
halved (and so is the budget of later batches) and retried; a batch that raises otherwise is retried one sentence at
a time, and a sentence still raising fails with the error.

transformers 5.x compatibility of amrlib 0.8.1 (checked with 5.23): loading, tokenizing, ``generate`` and
decoding work. One silent difference: ``Inference.__init__`` forces ``no_repeat_ngram_size = 0`` on
``model.config``, but in 5.x generation settings live in ``model.generation_config`` (``hasattr(config,
"no_repeat_ngram_size")`` is False), so its override never runs; we set it on the generation config (a model
trained from bart-large's config would otherwise generate with its ``no_repeat_ngram_size: 3``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from amrsim.amr.graph import AMRError, parse
from amrsim.amr.result import ParseResult
from amrsim.generation import (
    budget_batches,
    is_out_of_memory,
    length_sorted_batches,
    release_device_memory,
    resolve_dtype,
    token_budget,
)
from amrsim.text import empty_reason

# amrlib, torch are imported inside the functions: importing this module must stay cheap

__all__ = ["AmrlibParser", "choose_beam"]

log = logging.getLogger(__name__)

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "spiece.model")
_PARSE_MODULES = (".parse_xfm.inference", ".parse_t5.inference")
_MAX_ERROR = 300


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 3] + "..."


def choose_beam(beams: Sequence[str]) -> ParseResult:
    """The first beam (best first) that amrlib deserialises to a graph `amrsim.amr.graph.parse` accepts, else a
    failed result saying why each beam was rejected."""
    from amrlib.models.parse_xfm.penman_serializer import PenmanDeSerializer

    reasons: list[str] = []
    for b, raw in enumerate(beams, start=1):
        try:
            graph = PenmanDeSerializer(raw).get_graph_string()
        except Exception as e:  # the deserialiser catches its own errors; be safe anyway
            graph, why = None, _short(e)
        else:
            why = "not deserialisable"
        if graph is None:
            reasons.append(f"beam {b}: {why}")
            continue
        if graph.strip() == "()":  # amrlib's deserialiser found no triple in it
            reasons.append(f"beam {b}: deserialised to an empty graph")
            continue
        try:
            parse(graph)
        except AMRError as e:
            reasons.append(f"beam {b}: invalid graph: {e}")
            continue
        return ParseResult(graph)
    if not beams:
        return ParseResult.failed("the model returned no beams")
    detail = "; ".join(reasons)
    if len(detail) > _MAX_ERROR:
        detail = detail[: _MAX_ERROR - 3] + "..."
    return ParseResult.failed(f"no beam deserialised to a valid graph ({detail})")


class AmrlibParser:
    """An `AMRParser` over an amrlib parse_xfm model directory (see the module docstring)."""

    name = "amrlib"

    def __init__(self, model_dir: str | Path, device: str = "auto", batch_size: int = 16, num_beams: int = 4,
                 max_sent_len: int | None = None, tokenizer: str | Path | None = None, dtype: str = "auto",
                 batch_budget: int | str | None = "auto", free_memory: int | None = None):
        model_dir = Path(model_dir).expanduser()
        if not model_dir.is_dir():
            raise FileNotFoundError(f"amrlib model directory not found: {model_dir}")
        if batch_size < 1 or num_beams < 1:
            raise ValueError(f"batch_size and num_beams must be >= 1 (got {batch_size}, {num_beams})")
        meta_path = model_dir / "amrlib_meta.json"
        model_fn = "pytorch_model.bin"
        meta_kwargs: dict = {}
        if meta_path.is_file():
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            module = meta.get("inference_module", "")
            if module not in _PARSE_MODULES:
                raise ValueError(f"{meta_path}: inference_module '{module}' is not a parse_xfm model "
                                 f"(AmrlibParser runs {' / '.join(_PARSE_MODULES)} models)")
            model_fn = meta.get("model_fn", model_fn)
            meta_kwargs = dict(meta.get("kwargs") or {})
        config_path = model_dir / "config.json"
        if not config_path.is_file():
            raise FileNotFoundError(f"no config.json in amrlib model directory {model_dir}")
        params = json.loads(config_path.read_text(encoding="utf-8")).get("task_specific_params") or {}
        gen_args = params.get("parse_amr") or params.get("translation_amr_to_text")  # the latter: t5 v0_1_0
        if not gen_args:
            raise ValueError(f"{config_path} has no task_specific_params.parse_amr: not an amrlib parse_xfm model")

        if tokenizer is not None:
            tok_name = str(tokenizer)
        elif any((model_dir / f).is_file() for f in _TOKENIZER_FILES):
            tok_name = str(model_dir)
        else:  # the released models: a hub name such as facebook/bart-large (from the HF cache when offline)
            tok_name = gen_args.get("tok_name_or_path", gen_args.get("model_name_or_path"))

        import torch
        from amrlib.models.parse_xfm.inference import Inference

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.torch_dtype = resolve_dtype(dtype, device)  # validated before loading: bf16 (fp16) on CUDA
        self.device = device
        self.batch_size = batch_size
        self.num_beams = num_beams
        self.model_dir = model_dir
        kwargs = {**meta_kwargs, "device": device, "batch_size": batch_size, "num_beams": num_beams,
                  "tok_name_or_path": tok_name}
        try:
            self._inference = Inference(str(model_dir), model_fn, **kwargs)
        except OSError as e:
            raise OSError(f"cannot load the amrlib model in {model_dir} (tokenizer '{tok_name}'): {e}. Put the "
                          "tokenizer files in the model directory or pass tokenizer=") from e
        model = self._inference.model.to(dtype=self.torch_dtype)
        self._inference.model = model
        model.eval()
        model.generation_config.no_repeat_ngram_size = 0  # amrlib sets it on model.config: a no-op in transformers 5
        if max_sent_len is not None:
            self._inference.max_sent_len = max_sent_len
        self.max_sent_len = self._inference.max_sent_len
        self.max_graph_len = self._inference.max_graph_len
        self.budget = token_budget(batch_budget, model.config, self.torch_dtype, device, free_memory)
        if self.budget is not None:
            log.info("amrlib parsing on %s: %d beam tokens per batch (%s)", device, self.budget.tokens,
                     self.budget.source)

    def _generate(self, sentences: list[str]) -> list[list[str]]:
        """Raw beams per sentence (amrlib's tokenize / generate / decode), in the order given."""
        self._inference.ret_raw_gen = True
        flat = self._inference.parse_sents(list(sentences), add_metadata=False, disable_progress=True)
        k = self._inference.num_ret_seq
        return [flat[i * k:(i + 1) * k] for i in range(len(sentences))]

    def _release_memory(self) -> None:
        release_device_memory(self.device)

    def batches(self, sentences: Sequence[str]) -> list[list[int]]:
        """Indices, longest first: batches filling the token budget (lengths in the model's tokens, capped at
        `max_sent_len`) when there is one, else `batch_size` at a time."""
        if self.budget is None:  # amrlib's own order: by characters, longest first
            return length_sorted_batches([len(s) for s in sentences], self.batch_size)
        ids = self._inference.tokenizer(list(sentences))["input_ids"]
        lengths = [min(len(x), self.max_sent_len) for x in ids]
        return budget_batches(lengths, self.max_graph_len, self.num_beams, self.budget.tokens)

    def _beams(self, batch: list[str]) -> list[list[str] | Exception]:
        """Beams per sentence of a batch. Out of memory: halve the batch (and the budget after it) and retry each
        half; any other error: one sentence at a time, a sentence that still raises gets its error."""
        try:
            self._inference.batch_size = len(batch)
            return list(self._generate(batch))
        except Exception as e:
            self._release_memory()
            if len(batch) > 1 and is_out_of_memory(e):
                if self.budget is not None:
                    self.budget = self.budget.halved()
                log.warning("amrlib batch of %d out of memory; halving it (%s)", len(batch),
                            self.budget.source if self.budget else "no budget")
                half = len(batch) // 2
                return self._beams(batch[:half]) + self._beams(batch[half:])
            if len(batch) == 1:
                return [e]
            log.warning("amrlib batch of %d failed (%s); retrying one sentence at a time", len(batch), _short(e))
            return [b for s in batch for b in self._beams([s])]

    def parse(self, sentences: Sequence[str], on_progress: Callable[[int], None] | None = None
              ) -> list[ParseResult]:
        told = on_progress or (lambda n: None)
        results: list[ParseResult | None] = [None] * len(sentences)
        todo: list[tuple[int, str]] = []
        for i, s in enumerate(sentences):
            if empty := empty_reason(s if isinstance(s, str) else None, "sentence"):  # '\u200b' too
                results[i] = ParseResult.failed(empty)
            else:
                todo.append((i, s.strip()))
        if len(todo) < len(sentences):
            told(len(sentences) - len(todo))  # the empty ones
        for batch in self.batches([s for _, s in todo]):
            rows = [todo[j] for j in batch]
            for (i, _), b in zip(rows, self._beams([s for _, s in rows]), strict=True):
                results[i] = ParseResult.failed(f"generation failed: {_short(b)}") if isinstance(b, Exception) \
                    else choose_beam(b)
            told(len(rows))
        return results  # type: ignore[return-value]
