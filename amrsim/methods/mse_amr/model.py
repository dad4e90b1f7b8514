"""MSE-AMR's model: the AMR encoder (a transformer over linearised graphs, its vocabulary extended with AMR tokens,
pooled by its MLP pooler or [CLS]), the integration with a base sentence encoder, and `mse_amr:<run>` at encode
time (`load_trained`, its entry in `amrsim.methods.loaders`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from amrsim.amr.backends import BACKENDS, DEFAULT_BACKEND
from amrsim.encoders import (
    Encoder,
    EncoderLoader,
    TrainedModel,
    model_id,
    model_subdir,
    resolve_device,
    run_base_encoder,
)
from amrsim.encoders.cache import TABLE, embed_sentences
from amrsim.langs import normalise_lang
from amrsim.methods.mse_amr.data import ENGLISH, parse_now, sentence_graphs, translations
from amrsim.translate.run import TranslatorSpec, english_translations
from amrsim.warehouse import OK, Warehouse, content_key

# torch, transformers are imported inside the functions: the loader registry imports this module

if TYPE_CHECKING:
    import torch

POOLINGS = ("mlp", "cls")
INTEGRATIONS = ("concat", "sum", "s_only", "h_only")


def extend_vocabulary(tokenizer: Any, model: Any, tokens: Sequence[str]) -> int:
    """Add `tokens` (``:ARG0``, ``want-01``) as whole tokens (``single_word=True, normalized=False``: ``go-02`` is not
    found inside ``undergo-02``), each embedding the mean of the embeddings of the pieces the tokenizer cut it into
    before (unknown pieces left out unless all are unknown); returns how many were added. Known tokens and repeats
    are skipped."""
    import torch
    from transformers import AddedToken

    known = tokenizer.get_vocab()
    new = list(dict.fromkeys(tok for tok in tokens if tok and tok not in known))
    if not new:
        return 0
    unk = tokenizer.unk_token_id
    pieces: dict[str, list[int]] = {}
    for tok in new:  # the old split, taken before any token is added
        ids = tokenizer(tok, add_special_tokens=False)["input_ids"]
        pieces[tok] = [i for i in ids if i != unk] or ids
    added = tokenizer.add_tokens([AddedToken(t, single_word=True, normalized=False) for t in new])
    rows = model.get_input_embeddings().weight.shape[0]
    model.resize_token_embeddings(max(rows, len(tokenizer)), mean_resizing=False)
    weight = model.get_input_embeddings().weight
    with torch.no_grad():
        for tok in new:
            if pieces[tok]:
                weight[tokenizer.convert_tokens_to_ids(tok)] = weight[pieces[tok]].mean(0)
    return int(added)


def check_pooling(model: Any, pooling: str) -> None:
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling '{pooling}': use {' or '.join(POOLINGS)}")
    if pooling == "mlp" and getattr(model, "pooler", None) is None:
        raise ValueError(f"pooling 'mlp' needs a model with a pooler layer (BERT, XLM-R); "
                         f"{type(model).__name__} has none: use pooling='cls'")


def reset_pooler(model: Any) -> None:
    """A fresh dense layer under the pooler's tanh, as the release's new SimCSE MLP."""
    import torch

    dense = getattr(model.pooler, "dense", None)
    if dense is None:
        return
    with torch.no_grad():
        dense.weight.normal_(0.0, float(getattr(model.config, "initializer_range", 0.02)))
        if dense.bias is not None:
            dense.bias.zero_()


def embed(model: Any, tokenizer: Any, texts: Sequence[str], pooling: str, max_length: int,
          device: torch.device) -> torch.Tensor:
    """Pooled embeddings of `texts` in one padded batch, with gradients."""
    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    out = model(**batch.to(device))
    return out.pooler_output if pooling == "mlp" else out.last_hidden_state[:, 0]


def embed_by_length(model: Any, tokenizer: Any, texts: Sequence[str], pooling: str, max_length: int,
                    device: torch.device, chunk: int) -> torch.Tensor:
    """`embed` with the texts run in chunks of similar length (each padded to its own longest) and the rows put back
    in input order: the same embeddings, less padding (graphs run 2-4x longer than sentences)."""
    import torch

    if len(texts) <= chunk:
        return embed(model, tokenizer, texts, pooling, max_length, device)
    lengths = [len(ids) for ids in tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: lengths[i])
    parts = [embed(model, tokenizer, [texts[i] for i in order[start:start + chunk]], pooling, max_length, device)
             for start in range(0, len(order), chunk)]
    inverse = torch.empty(len(order), dtype=torch.long, device=device)
    inverse[torch.tensor(order, device=device)] = torch.arange(len(order), device=device)
    return torch.cat(parts)[inverse]


def encode_with(model: Any, tokenizer: Any, texts: Sequence[str], *, pooling: str = "mlp", max_length: int = 128,
                batch_size: int = 64) -> np.ndarray:
    """Embeddings (n, dim) float32 from a live model, without gradients, as the trained encoder computes them (what
    a `train_mse_amr` ``dev_eval`` should use). Batches go by length to pad less; rows keep input order."""
    import torch

    check_pooling(model, pooling)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"encode: item {i} is {type(t).__name__}, not a linearised graph string")
    device, out = next(model.parameters()).device, np.zeros((len(texts), int(model.config.hidden_size)), np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                idx = order[start:start + batch_size]
                out[idx] = embed(model, tokenizer, [texts[i] for i in idx], pooling, max_length,
                                 device).float().cpu().numpy()
    finally:
        model.train(was_training)
    return out


def combine(s: np.ndarray | None, h: np.ndarray | None, mode: str = "concat") -> np.ndarray:
    """Final embedding from the sentence embedding `s` and the graph embedding `h` (last axis = features), float32,
    C-contiguous: ``concat`` s/|s| (+) h/|h| (cosine = mean of the two cosines), ``sum`` s/|s| + h/|h| (equal dims),
    ``s_only`` s/|s|, ``h_only`` h/|h|; the side a mode does not use may be None."""
    if mode not in INTEGRATIONS:
        raise ValueError(f"unknown integration '{mode}': use {', '.join(INTEGRATIONS)}")
    used = {"s_only": (s,), "h_only": (h,)}.get(mode, (s, h))
    if any(x is None for x in used):
        raise ValueError(f"integration '{mode}' needs both the sentence and the graph embedding")
    # unit vectors; a zero vector stays zero
    units = [x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
             for x in (np.asarray(x, dtype=np.float32) for x in used)]
    if len(units) == 2 and units[0].shape[:-1] != units[1].shape[:-1]:
        raise ValueError(f"integration '{mode}': sentence vectors {units[0].shape} and graph vectors "
                         f"{units[1].shape} do not pair up")
    if mode == "sum" and units[0].shape[-1] != units[1].shape[-1]:
        raise ValueError(f"integration 'sum' needs equal dimensions, got {units[0].shape[-1]} and "
                         f"{units[1].shape[-1]}: use 'concat'")
    return np.ascontiguousarray(units[0] + units[1] if mode == "sum" else np.concatenate(units, axis=-1))


def embed_combined(base_vectors: np.ndarray, graph_vectors: np.ndarray, mode: str = "concat") -> np.ndarray:
    """`combine` for row-aligned matrices (n, d_s) and (n, d_h): one final embedding per sentence."""
    if np.ndim(base_vectors) != 2 or np.ndim(graph_vectors) != 2:
        raise ValueError(f"embed_combined: expected 2-D matrices, got {np.ndim(base_vectors)}-D and "
                         f"{np.ndim(graph_vectors)}-D")
    return combine(base_vectors, graph_vectors, mode)


@dataclass
class AmrEncoder:
    """The trained AMR encoder (`<run>/amr_encoder/`): linearised graphs -> (n, dim) float32, batched, no grad."""

    path: str | Path
    pooling: str = "mlp"
    max_length: int = 128
    batch_size: int = 64
    device: str = "auto"
    name: str = "mse_amr"
    model_id: str = ""

    def __post_init__(self) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        # a trained model in the warehouse: safetensors only, never a pickled pytorch_model.bin
        self.model = AutoModel.from_pretrained(str(self.path), use_safetensors=True).to(
            resolve_device(self.device)).eval()
        check_pooling(self.model, self.pooling)
        self.dim = int(self.model.config.hidden_size)
        self.model_id = self.model_id or f"mse_amr-graph:{self.path}"

    @classmethod
    def from_run(cls, run_dir: str | Path, batch_size: int = 64, device: str = "auto") -> AmrEncoder:
        """The encoder a `train_mse_amr` run wrote, with the pooling and length it was trained with."""
        run_dir = Path(run_dir)
        meta = json.loads((run_dir / "model.json").read_text(encoding="utf-8"))
        return cls(model_subdir(run_dir, meta.get("amr_encoder", "amr_encoder")), pooling=meta.get("pooling", "mlp"),
                   max_length=int(meta.get("max_length", 128)), batch_size=batch_size, device=device,
                   model_id=f"trained:{meta.get('method', 'mse_amr')}/{meta.get('run_id', run_dir.name)}#graph")

    def encode(self, linearized: list[str]) -> np.ndarray:
        return encode_with(self.model, self.tokenizer, linearized, pooling=self.pooling, max_length=self.max_length,
                           batch_size=self.batch_size)


# ---------------------------------------------------------------------------------------------------------------------
# mse_amr:<run> at encode time


@dataclass
class MseAmrEncoder:
    """`mse_amr:<run>` as an encoder of the evaluation suite: combine(base encoder of the text, AMR encoder of the
    sentence's linearised graph) with the run's integration.

    A sentence's graph (`graphs`): when its language is not one the AMR encoder was trained on graphs of
    (`graph_langs`) and the dataset's `parallel` table gives its English source, the English source's graph (the
    pivot the parse stage makes); otherwise its own graph. Either is looked up in the dataset's `amr` table (the
    run's parser), else parsed now with the default backend where it parses the language; else the row fails with
    the reason. A sentence no parser reads is translated into English first when the caller names a model for its
    language. Plain `encode(texts)` has no dataset: texts are parsed as English."""

    name: str
    model_id: str
    graph_encoder: AmrEncoder
    base: Encoder
    base_name: str | None  # None: the run's own trained base, whose vectors are not cached apart from the run's
    integration: str = "concat"
    parser: str = DEFAULT_BACKEND
    variant: str = "paper"
    graph_langs: tuple[str, ...] = (ENGLISH,)
    batch_size: int = 64
    device: str = "auto"
    call_batch: int = 4096  # texts per embed_sentences call: the base encoder (mUSE) prefers large calls
    cache_size: int = 200_000  # graphs parsed now and graph vectors kept: stsb_multi_mt's ten languages share graphs

    def __post_init__(self) -> None:
        s_dim, h_dim = int(self.base.dim), int(self.graph_encoder.dim)
        self.dim = {"concat": s_dim + h_dim, "sum": s_dim, "s_only": s_dim, "h_only": h_dim}[self.integration]
        self._parsed: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        self._vectors: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        """Texts parsed as English; a text that fails to parse fails the call (naming it)."""
        texts = list(texts)
        h = None
        if self.integration != "s_only":
            graphs = self._parse(texts, ENGLISH)
            for i, (g, err) in enumerate(graphs):
                if g is None:
                    raise ValueError(f"text {i} ({texts[i][:60]!r}): no AMR graph: {err}")
            h = self._encode_graphs([g for g, _ in graphs])  # type: ignore[misc]
        return combine(self.base.encode(texts) if self.integration != "h_only" else None, h, self.integration)

    def _cached(self, cache: dict[Any, Any], keys: list[Any], compute: Callable[[list[Any]], Any]) -> list[Any]:
        """The values of `keys`, each computed (`compute(todo)`) once per process while `cache` holds it."""
        todo = list(dict.fromkeys(k for k in keys if k not in cache))
        if todo:
            if len(cache) + len(todo) > self.cache_size:
                cache.clear()
            cache.update(zip(todo, compute(todo), strict=True))
        return [cache[k] for k in keys]

    def _parse(self, texts: list[str], lang: str) -> list[tuple[str | None, str | None]]:
        return self._cached(self._parsed, [(lang, t) for t in texts],
                            lambda todo: parse_now([t for _, t in todo], lang, self.parser, self.variant))

    def _encode_graphs(self, graphs: list[str]) -> np.ndarray:
        if not graphs:
            return np.zeros((0, int(self.graph_encoder.dim)), np.float32)
        return np.stack(self._cached(self._vectors, graphs, self.graph_encoder.encode))

    def graphs(self, wh: Warehouse, dataset: str, keys: list[str], texts: list[str],
               translate: dict[str, TranslatorSpec] | None = None) -> list[tuple[str | None, str]]:
        """(linearised graph or None, where it came from / why not) per sentence. A sentence to parse now whose
        language has no parser is translated into English first when `translate` names a model for it."""
        wanted = graph_sentences(wh, dataset, keys, texts, self.graph_langs)
        table = sentence_graphs(wh, dataset, self.parser, self.variant, [w[0] for w in wanted])
        parseable = BACKENDS[self.parser].langs if self.parser in BACKENDS else ()
        translate = translate or {}
        out: list[tuple[str | None, str]] = [(None, "")] * len(keys)
        todo: dict[str, list[int]] = {}
        foreign: list[int] = []  # translated into English, then parsed
        for i, (key, _, lang, how) in enumerate(wanted):
            if key in table.ok:
                out[i] = (table.ok[key][0], f"amr table ({how})")
            elif key in table.failed:
                out[i] = (None, f"AMR parse of sentence {key} failed: {table.failed[key]}")
            elif lang is None:
                out[i] = (None, f"sentence {keys[i]} is not in {dataset}/sentences (its language is unknown)")
            elif lang not in parseable and lang in translate:
                foreign.append(i)
            else:
                todo.setdefault(lang, []).append(i)
        english = english_translations(wh, dataset, pl.DataFrame(
            [wanted[i][:3] for i in foreign], schema={"key": pl.String, "text": pl.String, "lang": pl.String},
            orient="row"), translate) if foreign else {}
        for i in foreign:
            key, _, lang, _ = wanted[i]
            text, err = english[key]
            by = translate[str(lang)].id
            if text is None:
                out[i] = (None, f"English translation of sentence {keys[i]} (lang {lang}) by {by} failed: {err}")
            else:
                wanted[i] = (key, text, ENGLISH, f"translated by {by}")
                todo.setdefault(ENGLISH, []).append(i)
        for lang, rows in todo.items():
            hint = ("add the dataset to parse: with pivot, or give it an English source (parallel table)"
                    if lang in parseable else
                    f"translate it first (amrsim evaluate sts --translate {lang}=<model>, e.g. "
                    f"Helsinki-NLP/opus-mt-{lang}-en), or add "
                    f"the dataset to parse: with pivot and translate.to_english.{lang}, or give it an English "
                    f"source (parallel table)")
            for i, (graph, err) in zip(rows, self._parse([wanted[i][1] for i in rows], lang), strict=True):
                out[i] = ((graph, f"parsed now ({wanted[i][3]})") if graph is not None else
                          (None, f"no AMR graph for sentence {keys[i]} (lang {lang}): {err}; {hint}"))
        return out

    def encode_sentences(self, wh: Warehouse, dataset: str, frame: pl.DataFrame,
                         translate: dict[str, TranslatorSpec] | None = None) -> tuple[np.ndarray, list[str | None]]:
        """Vectors for `frame` (key, text) of `dataset`, and per row None or why it failed (its vector is zeros).
        `translate`: language -> model translating sentences without a parser into English (see `graphs`)."""
        keys, texts = frame["key"].to_list(), frame["text"].to_list()
        errors: list[str | None] = [None] * len(keys)
        h = s = None
        if self.integration != "s_only":
            graphs = self.graphs(wh, dataset, keys, texts, translate)
            errors = [None if g is not None else why for g, why in graphs]
            good = [i for i, e in enumerate(errors) if e is None]  # every graph found (its base may still fail)
            h = np.zeros((len(keys), int(self.graph_encoder.dim)), np.float32)
            h[good] = self._encode_graphs([graphs[i][0] for i in good])  # type: ignore[misc]
        if self.integration != "h_only" and self.base_name is None:
            s = np.asarray(self.base.encode(texts), dtype=np.float32)
        elif self.integration != "h_only":
            s, s_errors = self._base_vectors(wh, dataset, frame)
            errors = [e or se for e, se in zip(errors, s_errors, strict=True)]
        out = np.zeros((len(keys), self.dim), np.float32)
        ok = [i for i, e in enumerate(errors) if e is None]
        if ok:
            out[ok] = combine(None if s is None else s[ok], None if h is None else h[ok], self.integration)
        return out, errors

    def _base_vectors(self, wh: Warehouse, dataset: str, frame: pl.DataFrame) -> tuple[np.ndarray, list[str | None]]:
        """The base encoder's vectors through the embedding cache (computed once per sentence and model), and per
        row None or why it has none (its vector is zeros)."""
        name = str(self.base_name)
        embed_sentences(wh, dataset, name, frame.select("key", "text"), batch_size=self.batch_size,
                        device=self.device, encoder=self.base)
        table = wh.read(dataset, TABLE, columns=["sentence_key", "model_id", "vector", "status", "error"]).filter(
            (pl.col("model_id") == model_id(name, wh.models_root)) & pl.col("sentence_key").is_in(frame["key"]))
        have = {r["sentence_key"]: r for r in table.sort(pl.col("status") != OK).unique("sentence_key", keep="first")
                .iter_rows(named=True)}
        vectors, errors = np.zeros((frame.height, int(self.base.dim)), np.float32), []
        for i, key in enumerate(frame["key"].to_list()):
            row = have.get(key, {"status": None, "error": "no vector"})
            ok = row["status"] == OK and row.get("vector") is not None
            if ok:
                vectors[i] = row["vector"]
            errors.append(None if ok else f"base encoder {name}: {row['error'] or 'failed'}")
        return vectors, errors


def graph_sentences(wh: Warehouse, dataset: str, keys: list[str], texts: list[str], graph_langs: Sequence[str]
                    ) -> list[tuple[str, str, str | None, str]]:
    """Whose graph each sentence reads, as (key, text, lang, how): its English source's (from the `parallel`
    table) when its language is not one of `graph_langs` and it has one, else its own."""
    langs = dict(wh.read(dataset, "sentences", columns=["key", "lang"]).filter(pl.col("key").is_in(list(set(keys))))
                 .iter_rows()) if wh.exists(dataset, "sentences") else {}
    sources: dict[str, tuple[str, str]] = {}
    for target, *source in translations(wh, dataset).select("target_key", "source_key", "source").iter_rows():
        sources.setdefault(target, tuple(source))  # type: ignore[arg-type]
    wanted: list[tuple[str, str, str | None, str]] = []
    for key, text in zip(keys, texts, strict=True):
        lang = langs.get(key)
        lang = (normalise_lang(lang) or lang) if lang else None  # Tatoeba's 'eng' is 'en'
        wanted.append((*sources[key], ENGLISH, "pivot:en") if lang not in graph_langs and key in sources else
                      (key, text, lang, "own"))
    return wanted


def graph_inputs(model: TrainedModel, wh: Warehouse, dataset: str, frame: pl.DataFrame,
                 translate: dict[str, TranslatorSpec] | None = None) -> list[str]:
    """What `mse_amr:<run>`'s vector of each sentence of `frame` (key, text) depends on besides the run and the
    text, without loading the model (part of its embedding key): the sentence whose graph it reads (itself or its
    English source) and that sentence's `amr` rows from the run's parser (key, status, graph); with none, that the
    graph is parsed now, through the English translation by the model `translate` names for a language no parser
    reads."""
    meta = model.meta
    if meta.get("integration", "concat") == "s_only":
        return [""] * frame.height
    parser = str(meta.get("parser", DEFAULT_BACKEND))
    wanted = graph_sentences(wh, dataset, frame["key"].to_list(), frame["text"].to_list(),
                             tuple(meta.get("langs") or [ENGLISH]))
    rows: dict[str, list[tuple]] = {}
    if wh.exists(dataset, "amr"):
        amr = wh.read(dataset, "amr", columns=["key", "sentence_key", "parser", "penman", "status"]).filter(
            (pl.col("parser") == parser) & pl.col("sentence_key").is_in(list({w[0] for w in wanted})))
        for sentence, *row in amr.sort("key").select("sentence_key", "key", "status", "penman").iter_rows():
            rows.setdefault(sentence, []).append(tuple(row))
    parseable = BACKENDS[parser].langs if parser in BACKENDS else ()
    out = []
    for key, _, lang, _ in wanted:
        spec = (translate or {}).get(lang) if lang not in parseable and lang is not None else None
        out.append(content_key("graph of", key, rows.get(key) or ["parsed now", spec.key if spec else None])[:16])
    return out


def load_trained(model: TrainedModel, name: str, batch_size: int, device: str, models_root: str | None,
                 load: EncoderLoader) -> MseAmrEncoder:
    """`mse_amr:<run>` (amrsim.methods.loaders): its AMR encoder, and its base encoder loaded through `load`."""
    meta = model.meta
    integration = str(meta.get("integration", "concat"))
    if integration not in INTEGRATIONS:
        raise ValueError(f"{model.path}/model.json: unknown integration '{integration}'")
    graph_encoder = AmrEncoder.from_run(model.path, batch_size=batch_size, device=device)
    base, base_name = run_base_encoder(model, name, batch_size, device, models_root, load)
    return MseAmrEncoder(name, model.model_id, graph_encoder, base, base_name, integration,
                         str(meta.get("parser", DEFAULT_BACKEND)), str(meta.get("linearize", "paper")),
                         tuple(meta.get("langs") or [ENGLISH]), batch_size, device)
