"""`mse_amr:<run>` as an encoder of the evaluation suite: combine(base encoder of the text, AMR encoder of the
sentence's linearised graph) with the run's integration.

A sentence's graph, in order: when its language is not one the AMR encoder was trained on graphs of (`meta.langs`)
and the dataset's `parallel` table gives its English source, the English source's graph (the pivot the parse stage
makes for languages without a parser); otherwise its own graph. Either is looked up in the dataset's `amr` table
(parser `meta.parser`), else parsed now with `ud` when the language is one `ud` parses (en, fr); else the row fails
with the reason and is kept as such by `embed_sentences`. A sentence whose language no parser reads is translated
into English first (stored in `translations`) when the caller names a model for its language. Plain
`encode(texts)` has no dataset: texts are parsed as English.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from amrsim.config import PARSER_LANGS
from amrsim.encoders import load_encoder, model_id
from amrsim.encoders.cache import TABLE, embed_sentences
from amrsim.ingest.normalise import normalise_lang
from amrsim.methods.mse_amr.data import ENGLISH, english_sources, parse_now, sentence_graphs
from amrsim.translate.run import TranslatorSpec, english_translations
from amrsim.warehouse.store import OK, Warehouse

# amrsim.methods.mse_amr.train (it imports this module) is imported inside the functions: import cycle


@dataclass
class MseAmrEncoder:
    name: str
    model_id: str
    run_dir: str
    batch_size: int = 64
    device: str = "auto"
    models_root: str | None = None
    call_batch: int = 4096  # texts per embed_sentences call: the base encoder (mUSE) prefers large calls
    cache_size: int = 200_000  # graphs parsed now and graph vectors kept: stsb_multi_mt's ten languages share graphs

    def __post_init__(self) -> None:
        from amrsim.methods.mse_amr.train import INTEGRATIONS, AmrEncoder

        meta = json.loads((Path(self.run_dir) / "model.json").read_text(encoding="utf-8"))
        self.base_name = str(meta.get("base_encoder", "muse"))
        self.integration = str(meta.get("integration", "concat"))
        if self.integration not in INTEGRATIONS:
            raise ValueError(f"{self.run_dir}/model.json: unknown integration '{self.integration}'")
        self.parser = str(meta.get("parser", "ud"))
        self.variant = str(meta.get("linearize", "paper"))
        self.graph_langs = tuple(meta.get("langs") or [ENGLISH])
        self.graph_encoder = AmrEncoder.from_run(self.run_dir, batch_size=self.batch_size, device=self.device)
        self.base = load_encoder(self.base_name, batch_size=self.batch_size, device=self.device,
                                 models_root=self.models_root)
        s_dim, h_dim = int(self.base.dim), int(self.graph_encoder.dim)
        self._parsed: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self.dim = {"concat": s_dim + h_dim, "sum": s_dim, "s_only": s_dim, "h_only": h_dim}[self.integration]

    def _combine(self, s: np.ndarray | None, h: np.ndarray | None) -> np.ndarray:
        from amrsim.methods.mse_amr.train import combine

        return np.ascontiguousarray(combine(s, h, self.integration), dtype=np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Texts parsed as English with ud; a text that fails to parse fails the call (naming it)."""
        texts = list(texts)
        h = None
        if self.integration != "s_only":
            graphs = self._parse(texts, ENGLISH)
            for i, (g, err) in enumerate(graphs):
                if g is None:
                    raise ValueError(f"text {i} ({texts[i][:60]!r}): no AMR graph: {err}")
            h = self._encode_graphs([g for g, _ in graphs])  # type: ignore[misc]
        s = self.base.encode(texts) if self.integration != "h_only" else None
        return self._combine(s, h)

    def _parse(self, texts: list[str], lang: str) -> list[tuple[str | None, str | None]]:
        todo = list(dict.fromkeys(t for t in texts if (lang, t) not in self._parsed))
        if todo:
            if len(self._parsed) + len(todo) > self.cache_size:
                self._parsed.clear()
            self._parsed.update(zip(((lang, t) for t in todo), parse_now(todo, lang, self.parser, self.variant),
                                    strict=True))
        return [self._parsed[(lang, t)] for t in texts]

    def _encode_graphs(self, graphs: list[str]) -> np.ndarray:
        """Graph encoder vectors, each distinct graph encoded once per process."""
        todo = list(dict.fromkeys(g for g in graphs if g not in self._vectors))
        if todo:
            if len(self._vectors) + len(todo) > self.cache_size:
                self._vectors.clear()
            self._vectors.update(zip(todo, self.graph_encoder.encode(todo), strict=True))
        if not graphs:
            return np.zeros((0, int(self.graph_encoder.dim)), np.float32)
        return np.stack([self._vectors[g] for g in graphs])

    def graphs(self, wh: Warehouse, dataset: str, keys: list[str], texts: list[str],
               translate: dict[str, TranslatorSpec] | None = None) -> list[tuple[str | None, str]]:
        """(linearised graph or None, where it came from / why not) per sentence. A sentence to parse now whose
        language has no parser is translated into English first when `translate` names a model for it."""
        langs = _langs(wh, dataset, keys)
        sources = english_sources(wh, dataset)
        # what to look up: (key, text, lang) of the sentence itself or of its English source
        wanted: list[tuple[str, str, str | None, str]] = []
        for key, text in zip(keys, texts, strict=True):
            lang = langs.get(key)
            lang = (normalise_lang(lang) or lang) if lang else None  # Tatoeba's 'eng' is 'en'
            if lang not in self.graph_langs and key in sources:
                src_key, src_text = sources[key]
                wanted.append((src_key, src_text, ENGLISH, "pivot:en"))
            else:
                wanted.append((key, text, lang, "own"))
        table = sentence_graphs(wh, dataset, self.parser, self.variant, [w[0] for w in wanted])
        out: list[tuple[str | None, str]] = [(None, "")] * len(keys)
        todo: dict[str, list[int]] = {}
        for i, (key, _, lang, how) in enumerate(wanted):
            if key in table.ok:
                out[i] = (table.ok[key][0], f"amr table ({how})")
            elif key in table.failed:
                out[i] = (None, f"AMR parse of sentence {key} failed: {table.failed[key]}")
            elif lang is None:
                out[i] = (None, f"sentence {keys[i]} is not in {dataset}/sentences (its language is unknown)")
            else:
                todo.setdefault(lang, []).append(i)
        parseable = PARSER_LANGS.get(self.parser, ())
        translate = translate or {}
        foreign = [i for lang, rows in todo.items() if lang not in parseable and lang in translate for i in rows]
        if foreign:  # translate-then-parse: their English joins the English sentences parsed now
            english = english_translations(wh, dataset, pl.DataFrame(
                {"key": [wanted[i][0] for i in foreign], "lang": [wanted[i][2] for i in foreign],
                 "text": [wanted[i][1] for i in foreign]}, schema={"key": pl.String, "lang": pl.String,
                                                                 "text": pl.String}), translate)
            for i in foreign:
                lang = str(wanted[i][2])
                todo[lang].remove(i)
                text, err = english[wanted[i][0]]
                if text is None:
                    out[i] = (None, f"English translation of sentence {keys[i]} (lang {lang}) by "
                                    f"{translate[lang].id} failed: {err}")
                else:
                    wanted[i] = (wanted[i][0], text, ENGLISH, f"translated by {translate[lang].id}")
                    todo.setdefault(ENGLISH, []).append(i)
        for lang, rows in todo.items():
            parsed = self._parse([wanted[i][1] for i in rows], lang)
            for i, (graph, err) in zip(rows, parsed, strict=True):
                hint = ("add the dataset to parse: with pivot, or give it an English source (parallel table)"
                        if lang in parseable else
                        f"translate it first (--translate {lang}=<model>, e.g. Helsinki-NLP/opus-mt-{lang}-en), or add "
                        f"the dataset to parse: with pivot and translate.to_english.{lang}, or give it an English "
                        f"source (parallel table)")
                out[i] = ((graph, f"parsed now ({wanted[i][3]})") if graph is not None else
                          (None, f"no AMR graph for sentence {keys[i]} (lang {lang}): {err}; {hint}"))
        return out

    def encode_sentences(self, wh: Warehouse, dataset: str, frame: pl.DataFrame,
                         translate: dict[str, TranslatorSpec] | None = None) -> tuple[np.ndarray, list[str | None]]:
        """Vectors for `frame` (key, text) of `dataset`, and per row None or why it failed (its vector is zeros).
        `translate`: language -> model translating sentences without a parser into English (see `graphs`)."""
        keys, texts = frame["key"].to_list(), frame["text"].to_list()
        errors: list[str | None] = [None] * len(keys)
        h_rows: dict[int, np.ndarray] = {}
        if self.integration != "s_only":
            graphs = self.graphs(wh, dataset, keys, texts, translate)
            good = [i for i, (g, _) in enumerate(graphs) if g is not None]
            for i, (g, why) in enumerate(graphs):
                if g is None:
                    errors[i] = why
            if good:
                h = self._encode_graphs([graphs[i][0] for i in good])  # type: ignore[misc]
                h_rows = {i: h[j] for j, i in enumerate(good)}
        s_rows: dict[int, np.ndarray] = {}
        if self.integration != "h_only":
            s_rows, s_errors = _base_vectors(wh, dataset, self.base_name, self.base, frame, self.batch_size,
                                             self.device)
            for i, err in s_errors.items():
                errors[i] = errors[i] or err
        out = np.zeros((len(keys), self.dim), np.float32)
        ok = [i for i in range(len(keys)) if errors[i] is None]
        if ok:
            s = np.stack([s_rows[i] for i in ok]) if s_rows else None
            h = np.stack([h_rows[i] for i in ok]) if h_rows else None
            out[ok] = self._combine(s, h)
        return out, errors


def _langs(wh: Warehouse, dataset: str, keys: list[str]) -> dict[str, str]:
    if not wh.exists(dataset, "sentences"):
        return {}
    rows = wh.read(dataset, "sentences", columns=["key", "lang"]).filter(pl.col("key").is_in(list(set(keys))))
    return dict(zip(rows["key"].to_list(), rows["lang"].to_list(), strict=True))


def _base_vectors(wh: Warehouse, dataset: str, name: str, encoder: Any, frame: pl.DataFrame, batch_size: int,
                  device: str) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """The base encoder's vectors through the embedding cache (computed once per sentence and model)."""

    embed_sentences(wh, dataset, name, frame.select("key", "text"), batch_size=batch_size, device=device,
                    encoder=encoder)
    mid = model_id(name, wh.models_root)
    table = wh.read(dataset, TABLE, columns=["sentence_key", "model_id", "vector", "status", "error"])
    table = table.filter((pl.col("model_id") == mid) & pl.col("sentence_key").is_in(frame["key"].to_list()))
    table = table.sort(pl.col("status") != OK).unique("sentence_key", keep="first")
    have = {k: (v, st, err) for k, v, st, err in zip(table["sentence_key"], table["vector"], table["status"],
                                                    table["error"], strict=True)}
    vectors: dict[int, np.ndarray] = {}
    errors: dict[int, str] = {}
    for i, key in enumerate(frame["key"].to_list()):
        v, st, err = have.get(key, (None, None, "no vector"))
        if st == OK and v is not None:
            vectors[i] = np.asarray(v, dtype=np.float32)
        else:
            errors[i] = f"base encoder {name}: {err or 'failed'}"
    return vectors, errors


def load_trained(name: str, mid: str, run_dir: str, batch_size: int = 64, device: str = "auto",
                 models_root: str | None = None) -> MseAmrEncoder:
    return MseAmrEncoder(name, mid, run_dir, batch_size, device, models_root)
