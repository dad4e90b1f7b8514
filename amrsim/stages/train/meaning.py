"""Meaning embeddings in the pipeline (`Params`: `amrsim.methods.meaning.params`): translation pairs from bitext
`files` (vectors cached under the dataset `files_dataset`, shared with the bitext evaluation) and `parallel` tables,
languages compared as normalised BCP-47 codes and held out by `exclude_langs` / `langs`; STS pairs of `sts_datasets`
for stage 2. Every sentence is embedded once by the frozen encoder (the `embeddings` cache); the core
(`amrsim.methods.meaning.train`) trains on the vectors. Stage 2 is kept only where it does not lose to stage 1 alone
on held-out data (`stage2_selection: heldout`: the dev split of `sts_eval_lang_pairs` and, with `sts_genre_files`,
each genre left out in turn); model.json records both scores per held-out set and the decision."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from amrsim.config import Pipeline
from amrsim.encoders import model_id, resolve_device
from amrsim.encoders.cache import read_embeddings
from amrsim.errors import ConfigError
from amrsim.evaluate.ood import genre_of
from amrsim.files import file_digest, file_format
from amrsim.ingest.bitext import read_bitext
from amrsim.ingest.readers import LINE, read_rows
from amrsim.langs import normalise_lang
from amrsim.methods.loaders import embed_sentences
from amrsim.methods.meaning.params import Params
from amrsim.methods.training import load_sentence_encoder, swap_dir
from amrsim.stages.evaluate.sts import select_pairs
from amrsim.stages.evaluate.suite import bitext_files
from amrsim.stages.train.common import TrainingStage, sampled, score_range, table_versions
from amrsim.warehouse import OK, Warehouse, content_key

if TYPE_CHECKING:
    from amrsim.methods.meaning.model import MeaningModel, StsHead

__all__ = ["Params", "train"]

log = logging.getLogger(__name__)

METHOD = "meaning"  # the method whose stage this is (amrsim.stages.train.LAYER_STAGES)

HELD_OUT = "language held out (exclude_langs)"
NOT_LISTED = "language not in langs"
EMPTY_TEXT = "empty sentence"
SAMPLED_OUT = "over max_pairs_per_lang (sampled out)"
TEXT_ENCODER = "text_encoder"  # train_encoder: the encoder stage 1 trained, a sentence-transformers directory
PAIR_COLUMNS = ("text1", "text2", "key1", "key2", "raw1", "raw2", "lang1", "lang2")


def lang_code(code: str) -> str:
    """A language code in the project's normal form (BCP-47; 'deu' -> 'de'), or the code itself if not a tag."""
    return normalise_lang(code) or code.strip()


# ---------------------------------------------------------------------------------------------------- stage-1 data


@dataclass
class ParallelData:
    """The kept translation pairs (rows of sentence indices), their sentences (key, normalised language, text,
    vector) in order of first use, the rows left out by reason, notes on sources that gave nothing, and what was
    read (table versions, file digests)."""

    pairs: np.ndarray
    keys: list[str]
    langs: list[str]
    texts: list[str]
    vectors: np.ndarray
    rows_by_lang: Counter[str]
    skipped: dict[str, int]
    notes: list[str]
    versions: dict[str, int | None]
    digests: dict[str, str]


def _skip(skipped: dict[str, int], reason: str, n: int) -> None:
    if n:
        skipped[reason] = skipped.get(reason, 0) + n


def _kept(frame: pl.DataFrame, l1: str, l2: str, params: Params, skipped: dict[str, int]) -> pl.DataFrame | None:
    """The rows of one language pair (l1, l2) kept for training: None when its languages are left out (held out,
    not listed), else its `usable` rows (two non-empty sentences), sampled to `max_pairs_per_lang`; rows left out are
    counted by reason."""
    listed = None if params.langs is None else {lang_code(x) for x in params.langs}
    why = (HELD_OUT if {l1, l2} & {lang_code(x) for x in params.exclude_langs} else
           NOT_LISTED if listed is not None and not {l1, l2} <= listed else None)
    usable = frame.filter(pl.col("usable")) if why is None else frame.clear()
    _skip(skipped, why or EMPTY_TEXT, frame.height - usable.height)
    return None if why else sampled(usable, params.max_pairs_per_lang, params.seed, skipped, SAMPLED_OUT)


def file_pairs(pipe: Pipeline, params: Params, skipped: dict[str, int], notes: list[str]
               ) -> tuple[list[pl.DataFrame], dict[str, str]]:
    """Kept pairs of the bitext files as rows (PAIR_COLUMNS; keys of the raw language codes, as the bitext
    evaluation's sentences have), and each file's digest (what the model saw)."""
    frames, digests = [], {}
    for path in bitext_files(pipe, params.files, f"pipeline '{pipe.name}': train meaning files"):
        src_lang, tgt_lang, src, tgt = read_bitext(path)
        digests[path.name] = file_digest(path)
        l1, l2 = lang_code(src_lang), lang_code(tgt_lang)
        usable = [bool(s.strip() and t.strip()) for s, t in zip(src, tgt, strict=True)]
        kept = _kept(pl.DataFrame({"text1": src, "text2": tgt, "usable": usable}), l1, l2, params, skipped)
        if kept is not None and not kept.height:
            notes.append(f"{path.name} ({l1}-{l2}): no pair with two non-empty sentences; skipped")
            log.warning("meaning: %s", notes[-1])
        elif kept is not None:
            frames.append(kept.select(
                "text1", "text2", key1=pl.col("text1").map_elements(partial(content_key, "sentence", src_lang),
                                                                    return_dtype=pl.String),
                key2=pl.col("text2").map_elements(partial(content_key, "sentence", tgt_lang), return_dtype=pl.String),
                raw1=pl.lit(src_lang), raw2=pl.lit(tgt_lang), lang1=pl.lit(l1), lang2=pl.lit(l2)))
    return frames, digests


def table_pairs(wh: Warehouse, params: Params, skipped: dict[str, int], dataset: str) -> list[pl.DataFrame]:
    """Kept pairs of one dataset's `parallel` table (ok rows of `split`), as file_pairs gives them."""
    if not wh.exists(dataset, "parallel"):
        raise ConfigError(f"meaning: dataset '{dataset}' has no `parallel` table (give it translations or a "
                          f"kind: parallel file, and ingest it)")
    par = wh.read(dataset, "parallel")
    if params.split is not None:
        par = par.filter(pl.col("split") == params.split)
    _skip(skipped, f"{dataset}: failed parallel rows", par.filter(pl.col("status") != OK).height)
    par = par.filter(pl.col("status") == OK).with_columns(
        lang1=pl.col("source_lang").map_elements(lang_code, return_dtype=pl.String),
        lang2=pl.col("target_lang").map_elements(lang_code, return_dtype=pl.String),
        usable=(pl.col("source").str.strip_chars() != "") & (pl.col("target").str.strip_chars() != ""))
    kept = (_kept(group, str(l1), str(l2), params, skipped)
            for (l1, l2), group in par.group_by(["lang1", "lang2"], maintain_order=True))
    return [k.select(text1="source", text2="target", key1="source_key", key2="target_key", raw1="source_lang",
                     raw2="target_lang", lang1="lang1", lang2="lang2") for k in kept if k is not None]


def encoder_vectors(wh: Warehouse, dataset: str, encoder: str, frame: pl.DataFrame, register: bool = False
                    ) -> np.ndarray:
    """Vectors of the sentences (key, lang, text) in row order, through the embeddings cache (one encode pass for
    what is missing); `register` first adds unknown sentences to `<dataset>/sentences`."""
    unique = frame.unique("key", maintain_order=True)
    if register:
        have = wh.keys(dataset, "sentences")
        new = unique.filter(~pl.col("key").is_in(list(have))).select(
            "key", "lang", "text", status=pl.lit(OK), error=pl.lit(None, pl.String))
        if new.height:
            wh.upsert(dataset, "sentences", new)
    embed_sentences(wh, dataset, encoder, unique.select("key", "text"))
    return read_embeddings(wh, dataset, encoder, frame["key"].to_list())


def parallel_data(pipe: Pipeline, wh: Warehouse, params: Params) -> ParallelData:
    """Every kept translation pair (files first, then the `datasets` in order) and its sentences, each embedded
    through the cache of the source it is first read from (the files' sentences registered under `files_dataset`)."""
    skipped: dict[str, int] = {}
    notes: list[str] = []
    files, digests = file_pairs(pipe, params, skipped, notes)
    parts = [(params.files_dataset, True, files), *((ds, False, table_pairs(wh, params, skipped, ds))
                                                     for ds in params.datasets)]
    frame = pl.concat([pl.DataFrame(schema={**dict.fromkeys(PAIR_COLUMNS, pl.String), "part": pl.Int32}),
                       *(f.with_columns(part=pl.lit(i, pl.Int32)) for i, (*_, fs) in enumerate(parts) for f in fs)],
                      how="vertical_relaxed").with_row_index("row")
    # each sentence once, in order of first use (a pair's first sentence before its second)
    sentences = pl.concat([frame.select("row", "part", key=f"key{i}", lang=f"raw{i}", text=f"text{i}",
                                        norm=f"lang{i}") for i in (1, 2)]).sort("row", maintain_order=True)
    sentences = sentences.unique("key", keep="first", maintain_order=True)
    vectors = [encoder_vectors(wh, parts[p][0], params.encoder, group, register=parts[p][1])
               for (p,), group in sentences.group_by("part", maintain_order=True)]
    rows_by_lang = Counter(lang for pair in zip(frame["lang1"], frame["lang2"], strict=True) for lang in set(pair))
    if params.langs is not None:
        held = {lang_code(x) for x in params.exclude_langs}
        for lang in sorted(params.langs, key=lambda x: lang_code(x) not in held):  # held-out ones first
            code = lang_code(lang)
            if code not in rows_by_lang:
                why = "it is also in exclude_langs" if code in held else "no translation pair in the parallel data"
                raise ConfigError(f"meaning: language '{lang}' ({code}) has no parallel rows: {why}")
    if not frame.height:
        raise ConfigError(f"meaning: no translation pairs left to train on (left out: {skipped}); check files, "
                          f"datasets, langs and exclude_langs")
    index = dict(zip(sentences["key"], range(sentences.height), strict=True))
    return ParallelData(np.array([(index[a], index[b]) for a, b in zip(frame["key1"], frame["key2"], strict=True)]),
                        sentences["key"].to_list(), sentences["norm"].to_list(), sentences["text"].to_list(),
                        np.concatenate(vectors).astype(np.float32), rows_by_lang, skipped, notes,
                        table_versions(wh, params.datasets, ["parallel", "sentences"]), digests)


# ---------------------------------------------------------------------------------------------------- stage-2 data


def item_genres(pipe: Pipeline, wh: Warehouse, dataset: str, path: str) -> dict[str, str]:
    """item id -> genre of an sts dataset's pairs, from `path`, a file with `genre`, `sentence1` and `sentence2`
    columns row-aligned with the dataset's source file: line n of both holds the same pair (checked on the text of
    the pairs read from that line); a line whose pair differs is an error naming the file and line."""
    file = pipe.resolve_path(path)
    fmt = file_format(file)
    if fmt is None:
        raise ConfigError(f"meaning: sts_genre_files.{dataset}: cannot tell the format of {file} (tsv, csv, jsonl)")
    rows = read_rows(file, fmt, ["genre", "sentence1", "sentence2"]).select(
        source_line=LINE, genre=pl.col("genre").map_elements(lambda g: genre_of(g) or (g or "").strip(),
                                                              return_dtype=pl.String),
        g1=pl.col("sentence1").str.strip_chars(), g2=pl.col("sentence2").str.strip_chars())
    pairs = wh.read(dataset, "pairs", columns=["item_id", "source_line", "sentence1", "sentence2", "status"])
    pairs = pairs.filter(pl.col("status") == OK).join(rows, on="source_line", how="left")
    same = (pl.col("sentence1") == pl.col("g1")) & (pl.col("sentence2") == pl.col("g2"))
    lines = pairs.group_by("source_line").agg(aligned=same.fill_null(False).any(), genre=pl.col("genre").first(),
                                              items=pl.col("item_id").unique()).sort("source_line")
    bad = lines.filter(~pl.col("aligned") | pl.col("genre").is_null() | (pl.col("genre") == ""))
    if bad.height:
        line = bad["source_line"][0]
        raise ConfigError(f"meaning: sts_genre_files.{dataset}: {file}:{line} does not hold the pair (or a genre) "
                          f"of line {line} of dataset '{dataset}' ({bad.height} line(s) differ); the file must be "
                          f"row-aligned with the dataset's source file")
    return {str(item): str(g) for items, g in zip(lines["items"], lines["genre"], strict=True) for item in items}


StsSet = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # sentence1 vectors, sentence2 vectors, gold, genre


def sts_pairs(pipe: Pipeline, wh: Warehouse, params: Params, split: str, lang_pairs: list[str],
              strict: bool = False, genres: dict[str, dict[str, str]] | None = None,
              encode: Callable[[list[str]], np.ndarray] | None = None) -> tuple[dict[str, StsSet], dict[str, str]]:
    """lang pair -> (sentence1 vectors, sentence2 vectors, gold in [0, 1], genre of each pair ("" unknown)) of the
    split over every sts dataset; a pair with no rows is an error when `strict`, else left out with the reason
    (second return). `genres`: dataset -> item id -> genre (item_genres). Vectors are the encoder's cached ones, or
    `encode(texts)` (the encoder stage 1 trained)."""
    out: dict[str, list[StsSet]] = {}
    langs: set[str] = set()
    for ds in params.sts_datasets:
        if not wh.exists(ds, "pairs"):
            raise ConfigError(f"meaning: sts dataset '{ds}' has no `pairs` table; ingest it first")
        pairs = wh.read(ds, "pairs")
        langs |= set(pairs["lang1"].drop_nulls().unique().to_list())
        lo, hi = score_range(pipe, ds, lambda pairs=pairs: pairs,
                             f"meaning: dataset '{ds}' has no score_range and too few distinct scores to scale")
        sentences = wh.read(ds, "sentences", columns=["key", "lang", "text"])
        genre_of_item = (genres or {}).get(ds, {})
        for lp in lang_pairs:
            chosen = select_pairs(pairs, split, lp)
            if chosen.height < 2:
                continue
            keys = chosen["sentence1_key"].to_list() + chosen["sentence2_key"].to_list()
            frame = pl.DataFrame({"key": keys}).join(sentences.unique("key"), on="key", how="left",
                                                     maintain_order="left")
            vecs = (encoder_vectors(wh, ds, params.encoder, frame) if encode is None else
                    np.asarray(encode(frame["text"].to_list()), dtype=np.float32))
            gold = ((chosen["score"].to_numpy() - lo) / (hi - lo)).astype(np.float32)
            genre = np.array([genre_of_item.get(str(i), "") for i in chosen["item_id"].to_list()], dtype=object)
            out.setdefault(lp, []).append((vecs[:chosen.height], vecs[chosen.height:], gold, genre))
    missing = {lp: f"language pair '{lp}' has no '{split}' pairs in {params.sts_datasets} (languages there: "
                   f"{', '.join(map(str, sorted(langs)))})" for lp in lang_pairs if lp not in out}
    if strict and missing:
        raise ConfigError(f"meaning: {next(iter(missing.values()))}")
    return {lp: tuple(np.concatenate(x) for x in zip(*parts, strict=True))  # type: ignore[misc]
            for lp, parts in out.items()}, missing


# ---------------------------------------------------------------------------------------------------- stage 2


def _rows(sets: dict[str, StsSet], drop: str | None = None) -> StsSet | None:
    """Every language pair's rows in one set, less those of genre `drop`; None under 2 rows."""
    if not sets:
        return None
    a, b, g, genre = (np.concatenate(x) for x in zip(*sets.values(), strict=True))
    keep = genre != drop
    return (a[keep], b[keep], g[keep], genre[keep]) if keep.sum() >= 2 else None


def _summary(by_lang_pair: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A held-out set's stage-1 and stage-2 score: the mean Spearman over its language pairs (those where both
    are defined); None when none is."""
    both = [x for x in by_lang_pair.values() if x["meaning"] is not None and x["sts_head"] is not None]
    return None if not both else {"stage1": float(np.mean([x["meaning"] for x in both])),
                                  "stage2": float(np.mean([x["sts_head"] for x in both])),
                                  "n": int(sum(x["n"] for x in both)), "by_lang_pair": by_lang_pair}


def train_sts_stage(pipe: Pipeline, wh: Warehouse, params: Params, model: MeaningModel, device: str,
                    encode: Callable[[list[str]], np.ndarray] | None = None
                    ) -> tuple[StsHead | None, dict[str, Any], dict[str, Any]]:
    """Stage 2 on the frozen meaning embeddings, then its selection against stage 1 alone on held-out data.
    Returns (the head, None when stage 1 alone is kept; stage-2 metrics; the selection record). `encode`: as
    `sts_pairs`'."""
    from amrsim.methods.meaning.model import apply_module, cosines, meaning_of, spearman
    from amrsim.methods.meaning.train import train_stage2

    genres = {ds: item_genres(pipe, wh, ds, path) for ds, path in params.sts_genre_files.items()}
    read = partial(sts_pairs, pipe, wh, params, genres=genres, encode=encode)
    trained, _ = read(params.sts_train_split, params.sts_train_lang_pairs, strict=True)
    dev_sets, held_out, missing = {}, {}, {}  # type: ignore[var-annotated]
    if params.sts_dev_split:
        dev_sets, _ = read(params.sts_dev_split, params.sts_train_lang_pairs)
        held_out, missing = read(params.sts_dev_split, params.sts_eval_lang_pairs)

    def meaning(rows: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return meaning_of(model, rows[0]), meaning_of(model, rows[1]), rows[2]

    def fit(train_rows: StsSet, dev_rows: StsSet | None) -> tuple[StsHead, dict[str, Any]]:
        return train_stage2(*meaning(train_rows), None if dev_rows is None else meaning(dev_rows), params, device)

    def compare(head: StsHead, a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> dict[str, Any]:
        ma, mb, _ = meaning((a, b, gold))
        return {"n": len(gold), "encoder": spearman(cosines(a, b), gold), "meaning": spearman(cosines(ma, mb), gold),
                "sts_head": spearman(cosines(apply_module(head, ma), apply_module(head, mb)), gold)}

    all_train = _rows(trained)
    assert all_train is not None  # strict: every training pair has >= 2 rows
    head, m2 = fit(all_train, _rows(dev_sets))
    lang_scores = {lp: compare(head, a, b, g) for lp, (a, b, g, _) in held_out.items()}
    m2["held_out_dev_spearman"] = lang_scores
    m2["held_out_missing"] = missing
    m2["train_pairs_by_lang_pair"] = {lp: len(x[2]) for lp, x in trained.items()}
    sets: dict[str, Any] = {}
    notes: list[str] = []
    if (summary := _summary(lang_scores)) is not None:
        sets["lang_pairs"] = summary
    for genre in sorted({str(x) for s in trained.values() for x in s[3]} - {""}):
        # the same recipe without this genre: its dev pairs are data the head was not tuned on
        others = _rows(trained, genre)
        scored = {lp: (a[m], b[m], g[m]) for lp, (a, b, g, gen) in dev_sets.items() if (m := gen == genre).sum() >= 2}
        if others is None or not scored:
            notes.append(f"genre '{genre}' not held out: " + ("no training pairs in the other genres"
                                                              if others is None else "no dev pairs of it"))
            continue
        head_g, m_g = fit(others, _rows(dev_sets, genre))
        summary = _summary({lp: compare(head_g, *x) for lp, x in scored.items()})
        if summary is not None:
            sets[f"genre:{genre}"] = {**summary, "train_pairs": m_g["train_pairs"], "best_epoch": m_g["best_epoch"]}
    below = [name for name, x in sets.items() if x["stage2"] < x["stage1"]]
    if params.stage2_selection == "heldout" and not sets:
        raise ConfigError(f"meaning: stage2_selection heldout found no held-out pairs to compare stage 2 with stage 1 "
                          f"on (sts_eval_lang_pairs: {missing or 'none given'}; genres: {notes or 'none given'}); "
                          f"give held-out data or set stage2_selection: always")
    kept = params.stage2_selection == "always" or not below
    selection = {"mode": params.stage2_selection, "stage2_kept": kept, "below_stage1": below, "sets": sets,
                 "notes": notes}
    log.info("meaning stage 2 %s: %s", "kept" if kept else "dropped (stage 1 alone is saved)",
             {k: (round(x["stage1"], 2), round(x["stage2"], 2)) for k, x in sets.items()})
    return (head if kept else None), m2, selection


# ---------------------------------------------------------------------------------------------------- train


def train(pipe: Pipeline, params: Params, run_id: str) -> dict[str, Any]:
    from amrsim.methods.meaning.model import save_model
    from amrsim.methods.meaning.train import train_stage1

    stage = TrainingStage(pipe, METHOD, run_id)
    device = resolve_device(params.device)
    with stage.record(params):
        if (stage.out_dir / "model.json").exists():
            raise ConfigError(f"{stage.out_dir / 'model.json'} exists: that run finished; train under a new run id")
        data = parallel_data(pipe, stage.wh, params)
        stage.versions = data.versions
        lang_names = sorted(set(data.langs))
        lang_index = {lang: i for i, lang in enumerate(lang_names)}
        log.info("meaning: %d pairs, %d sentences, %d languages; left out %s", len(data.pairs), len(data.keys),
                 len(lang_names), data.skipped)
        encoder = encode = None
        if params.train_encoder:  # muse through its PyTorch port (Params checks the encoder is muse)
            encoder = load_sentence_encoder("muse", False, device=device,
                                            train_embedding=params.encoder_train_embedding)
            encode = partial(encoder.encode, batch_size=256, convert_to_numpy=True, show_progress_bar=False)
        model, m1 = train_stage1(data.vectors, np.array([lang_index[x] for x in data.langs]), data.pairs,
                                 len(lang_names), params, device, encoder, data.texts if encoder else None)
        head, m2, selection = None, None, None
        if params.sts_datasets:
            head, m2, selection = train_sts_stage(pipe, stage.wh, params, model, device, encode)
        data_meta = {"pipeline": pipe.name, "files": params.files, "files_dataset": params.files_dataset,
                     "datasets": params.datasets, "split": params.split, "table_versions": data.versions,
                     "file_digests": data.digests, "exclude_langs": params.exclude_langs,
                     "langs_trained": {lang: data.rows_by_lang.get(lang, 0) for lang in lang_names},
                     "pairs": len(data.pairs), "sentences": len(data.keys), "left_out": data.skipped,
                     "notes": data.notes, "sts_datasets": params.sts_datasets,
                     "sts_table_versions": table_versions(stage.wh, params.sts_datasets, ["pairs", "sentences"]),
                     "sts_train_lang_pairs": params.sts_train_lang_pairs,
                     "sts_eval_lang_pairs": params.sts_eval_lang_pairs}
        if encoder is not None:
            swap_dir(stage.out_dir / TEXT_ENCODER, lambda path: encoder.save(str(path)))
        save_model(stage.out_dir, model, params.encoder, lang_names, params, head,
                   extra_meta={**({"text_encoder": TEXT_ENCODER} if encoder is not None else {}),
                               "base_model_id": model_id(params.encoder, stage.wh.models_root), "seed": params.seed,
                               "device": device, "params": params.model_dump(mode="json"), "data": data_meta,
                               "metrics": {"stage1": m1, "stage2": m2}, "stage2_selection": selection})
        stage.count(len(data.pairs) + sum(data.skipped.values()), len(data.pairs),
                    sum(n for reason, n in data.skipped.items() if reason == EMPTY_TEXT or "failed" in reason))
        stage.completed = True
    extra: dict[str, Any] = {"pairs": len(data.pairs), "languages": len(lang_names), "best_epoch": m1["best_epoch"],
                             "dev_retrieval": m1.get("dev_retrieval"), "left_out": data.skipped, "notes": data.notes}
    if m2 is not None:
        assert selection is not None
        extra |= {"sts_best_dev_spearman": m2["best_dev_spearman"],
                  "sts_held_out_dev_spearman": m2["held_out_dev_spearman"], "stage2_kept": selection["stage2_kept"],
                  "stage2_vs_stage1": {k: [x["stage1"], x["stage2"]] for k, x in selection["sets"].items()}}
    return stage.summary(**extra)
