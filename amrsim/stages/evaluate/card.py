"""Model cards: `README.md` in a trained run's directory, in the sentence-transformers / Hugging Face Hub layout (YAML
front matter, then method and paper, base model, training data with Delta table versions, parameters, the run's rows
of `eval/results`, how to load it). Written when a run finishes and again when results for it are stored."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from amrsim.encoders import TrainedModel, base_model, find_trained, is_latest_name, is_trained_name, parse_name
from amrsim.files import atomic_write
from amrsim.stages.evaluate.results import EVAL, RESULTS, fmt_value, latest_results
from amrsim.warehouse import Warehouse

CARD = "README.md"


@dataclass(frozen=True)
class MethodInfo:
    title: str
    paper: str
    summary: str
    pipeline_tag: str
    tags: tuple[str, ...]


METHODS: dict[str, MethodInfo] = {
    "s3bert": MethodInfo(
        "S3BERT", 'Opitz & Frank 2022, "SBERT studies Meaning Representations: Decomposing Sentence Embeddings into '
        'Explainable Semantic Features"',
        "An SBERT embedding decomposed into AMR-aspect sub-embeddings (concepts, frames, negation, ...) plus a "
        "residual, trained to predict fine-grained AMR metric scores with a consistency loss against a frozen "
        "teacher; the cosine of each slice explains a similarity aspect by aspect.",
        "sentence-similarity", ("sentence-transformers", "sentence-similarity", "feature-extraction", "amr")),
    "dueam": MethodInfo(
        "DuEAM", 'Goswami et al. 2021, "Cross-lingual Sentence Embedding using Multi-Task Learning"',
        "A dual encoder: an anchor's Word Mover's Distance on frozen token embeddings teaches a sentence encoder "
        "(L = L_A - lambda * L_B).",
        "sentence-similarity", ("sentence-transformers", "sentence-similarity", "feature-extraction", "cross-lingual")),
    "pear": MethodInfo(
        "PEAR", "Jørgensen 2024, SemEval-2024 Task 1 (semantic textual relatedness)",
        "A cross-encoder with a sigmoid head trained with BCE on relatedness, with bi-encoder kNN re-sampling and "
        "weak labels; scores a sentence pair directly (no sentence embedding).",
        "text-ranking", ("sentence-transformers", "cross-encoder", "text-ranking", "relatedness")),
    "meaning": MethodInfo(
        "Meaning embeddings", "Tiyajamorn et al. 2021 (stage 1) and McCain et al. (stage 2)",
        "Stage 1 splits a frozen multilingual embedding into a meaning part and a language part on parallel data; "
        "stage 2 tunes an MLP on human STS scores.",
        "sentence-similarity", ("sentence-similarity", "feature-extraction", "multilingual")),
    "mse_amr": MethodInfo(
        "MSE-AMR", 'Cai et al. 2022, "Retrofitting Multilingual Sentence Embeddings with Abstract Meaning '
        'Representation"',
        "A contrastive encoder of linearised AMR graphs (supervised SimCSE on NLI triples); the sentence embedding "
        "joins the base encoder's normalised vector with the normalised graph vector.",
        "sentence-similarity", ("sentence-similarity", "feature-extraction", "amr", "multilingual")),
}

# amrsim's packaged encoder names -> what a reader finds on the Hub (muse has no Hub id)
HUB_IDS = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}


def hub_id(name: str | None) -> str | None:
    """A Hub id for the front matter's `base_model`, or None when the base is local or not on the Hub."""
    if not name:
        return None
    if name in HUB_IDS:
        return HUB_IDS[name]
    try:
        hub_id = parse_name(name).hub_id
    except ValueError:
        return None
    return hub_id if hub_id is not None and not Path(hub_id).exists() else None


def table_versions(meta: Any) -> dict[str, Any]:
    """Every `<dataset>.<table>` -> Delta version recorded anywhere in model.json (methods nest them differently)."""
    found: dict[str, Any] = {}
    if isinstance(meta, dict):
        for key, value in meta.items():
            if key.endswith("table_versions") and isinstance(value, dict):
                found.update({k: v for k, v in value.items() if not isinstance(v, dict)})
            elif key == "tables" and isinstance(value, dict):
                found.update(value)
            else:
                found.update(table_versions(value))
    return found


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def run_results(wh: Warehouse, name: str) -> pl.DataFrame:
    """The latest `eval/results` row of each result of model `name` (`<method>:<run id>`)."""
    rows = wh.read(EVAL, RESULTS, where=pl.col("model") == name)
    return latest_results(rows) if rows.height else rows


def loads_with_sentence_transformers(run: Path) -> bool:
    """The run directory itself loads with sentence-transformers (its own modules.json)."""
    return (run / "modules.json").is_file()


def how_to_load(run: Path, method: str, run_id: str, meta: dict[str, Any]) -> str:
    """Code that loads the run: sentence-transformers where the run directory loads that way, else amrsim."""
    name = f"{method}:{run_id}"
    texts = '["A man is playing a guitar.", "Someone plays music."]'
    pair = '("A man is playing a guitar.", "Someone plays music.")'
    cross = meta.get("kind") == "cross-encoder"
    lines = ["```python"]
    if loads_with_sentence_transformers(run) and cross:
        lines += ["from sentence_transformers import CrossEncoder", "",
                  f'model = CrossEncoder("path/to/{method}/{run_id}")', f"pairs = [{pair}]",
                  "scores = model.predict(pairs)"]
        if meta.get("symmetric"):
            lines += ["# amrsim scores this run as the mean of both sentence orders:",
                      "scores = (model.predict(pairs) + model.predict([(b, a) for a, b in pairs])) / 2"]
    elif loads_with_sentence_transformers(run):
        lines += ["from sentence_transformers import SentenceTransformer", "",
                  f'model = SentenceTransformer("path/to/{method}/{run_id}")',
                  f"embeddings = model.encode({texts})"]
    else:
        lines += ["from amrsim.methods.loaders import load_encoder", "",
                  f'model = load_encoder("{name}", models_root="path/to/warehouse/models")']
        lines += [f"scores = model.score({texts[:-1]}], {texts[:-1]}])" if cross
                  else f"embeddings = model.encode({texts})"]
    lines += ["```", "", f"In amrsim: `amrsim evaluate sts --encoder {name} --file ...` (or `{method}:latest`, the "
              "newest run)."]
    residual = meta.get("residual") if method == "pear" else None  # (S3BERT's `residual` is its free dimensions)
    if residual:
        lines += ["", f"This model is residual: its score adds the bi-encoder `{residual['base']}`'s cosine "
                  "(as a logit on the gold scale, `residual` in model.json) to the network in `cross_encoder/`, so it "
                  "loads through amrsim, which scores with both; the network alone is not the model."]
    if method == "s3bert":
        lines += ["", "The aspect layout (which dimensions carry which AMR aspect) is in the run's "
                  "`config_sentence_transformers.json` under `s3bert`; `amrsim explain` reads it there."]
    return "\n".join(lines)


def stage2_selection(selection: Any) -> list[str]:
    """Card lines of a meaning run's stage-2 selection (model.json `stage2_selection`): the decision and, per
    held-out set, stage 1's and stage 2's Spearman; none for runs without one."""
    if not isinstance(selection, dict) or not isinstance(selection.get("sets"), dict):
        return []
    kept = bool(selection.get("stage2_kept"))
    lines = ["", "## Stage 2 selection", "",
             ("Stage 2 is part of this model" + (" (`stage2_selection: always`)" if selection.get("mode") == "always"
                                                  else ": it is not below stage 1 on any held-out set")) if kept else
             "Stage 2 was dropped: it is below stage 1 alone on " + ", ".join(selection.get("below_stage1") or [])
             + "; this model is stage 1 alone (base encoder -> meaning head).", "",
             "Spearman x 100 on dev pairs stage 2 was not tuned on (held-out language pairs; each genre scored by a "
             "head trained without it), mean over language pairs:", ""]
    rows = [(name, f"{x['stage1']:.2f}", f"{x['stage2']:.2f}", f"{x['stage2'] - x['stage1']:+.2f}", x.get("n"))
            for name, x in selection["sets"].items()]
    return [*lines, _table(["held-out set", "stage 1", "stage 2", "stage 2 - stage 1", "pairs"], rows)]


def render_card(wh: Warehouse, model: TrainedModel) -> str:
    run, method, run_id, meta = model.path, model.method, model.run_id, model.meta
    info = METHODS.get(method, MethodInfo(method, "", "", "sentence-similarity", ()))
    base = base_model(meta)
    versions = table_versions(meta)
    datasets = sorted({k.partition(".")[0] for k in versions})
    front: dict[str, Any] = {"library_name": "sentence-transformers" if loads_with_sentence_transformers(run)
                             else "amrsim",
                             "pipeline_tag": info.pipeline_tag}
    if hub_id(base):
        front["base_model"] = hub_id(base)
    front["tags"] = [*info.tags, "amrsim", method]
    if datasets:
        front["datasets"] = datasets
    parts = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(), "---", "",
             f"# {info.title}: run `{run_id}`", "",
             f"Trained by amrsim (`amrsim train {method}`) on {meta.get('created_at', 'an unknown date')}; "
             f"amrsim names it `{method}:{run_id}`.", "",
             "## Method and paper", "", info.paper + ("." if info.paper else ""), "", info.summary, "",
             "## Base model", "", f"`{base}`" + (f" (Hub: `{hub_id(base)}`)" if hub_id(base) else "") if base
             else "Not recorded.", ""]
    parts += ["## Training data", ""]
    if versions:
        parts += ["Warehouse tables read, at these Delta versions (`Warehouse.read(dataset, table, version=...)` "
                  "reads exactly this data again):", "",
                  _table(["table", "Delta version"], sorted(versions.items())), ""]
    else:
        parts += ["No table versions recorded.", ""]
    params = meta.get("params") or {k: meta[k] for k in ("stage1", "stage2") if meta.get(k)}
    parts += ["## Parameters", ""]
    if params:
        flat = sorted((k, v) for k, v in params.items() if not isinstance(v, dict)) + sorted(
            (f"{k}.{k2}", v2) for k, v in params.items() if isinstance(v, dict) for k2, v2 in v.items())
        parts += [_table(["parameter", "value"], flat)]
    if meta.get("seed") is not None:
        parts += ["", f"Seed: {meta['seed']}."]
    parts += stage2_selection(meta.get("stage2_selection"))
    parts += ["", "## Evaluation results", ""]
    rows = run_results(wh, f"{method}:{run_id}")
    if rows.height:
        parts += ["Latest rows of `eval/results` for this run (scores × 100):", "",
                  _table(["task", "dataset", "split", "lang pair", "metric", "value", "n"],
                         [(r["task"], r["dataset"], r["split"], r["lang_pair"], r["metric"],
                           fmt_value(r["value"], r["metric"]), r["n"]) for r in rows.iter_rows(named=True)])]
    else:
        parts += ["None stored yet: `amrsim evaluate ... --encoder " f"{method}:{run_id}` adds them here."]
    parts += ["", "## How to load", "", how_to_load(run, method, run_id, meta), ""]
    return "\n".join(parts)


def write_card(wh: Warehouse, name: str) -> Path | None:
    """(Re)write `README.md` of trained run `name` (`<method>:<run id>`) atomically; None when it is no run with a
    readable model.json."""
    try:
        model = find_trained(name, wh.models_root)
    except (OSError, ValueError):
        return None
    card = model.path / CARD
    text = render_card(wh, model)
    atomic_write(card, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return card


def refresh_cards(wh: Warehouse, models: Iterable[str]) -> list[Path]:
    """Rewrite the cards of the trained runs among result `models` (`<method>:<run id>`; others are skipped)."""
    runs = sorted({m for m in models if is_trained_name(m) and not is_latest_name(m)})
    return [card for name in runs if (card := write_card(wh, name)) is not None]
