"""`amrsim report`: an HTML page and a Markdown file rendered from `eval/results` (plus `lineage`), so a reader sees
the leaderboard, the per-language numbers, score distributions and which data versions and config made each number.

matplotlib is imported inside the plotting functions only: the CLI imports this module and must stay fast.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import io
import math
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import polars as pl

from amrsim.encoders import base_for
from amrsim.errors import WarehouseError
from amrsim.evaluate import UNDEFINED
from amrsim.evaluate.ood import DATASETS, ood_table
from amrsim.evaluate.sts import is_constant
from amrsim.files import own_dir
from amrsim.stages.evaluate.report_views import (
    FILTER_JS,
    PhenomenonRow,
    fitted_range,
    json_attr,
    phenomenon_view,
    svg_bars,
)
from amrsim.stages.evaluate.results import EVAL, RESULTS, fmt_value, latest_results
from amrsim.stages.evaluate.sts import pair_similarities, select_pairs
from amrsim.warehouse import Warehouse
from amrsim.warehouse.lineage import META

TASK_ORDER = ("sts", "bitext", "bucc", "transfer", "aspects")
TASK_LABEL = {"sts": "STS", "bitext": "Tatoeba", "bucc": "BUCC", "transfer": "Transfer", "aspects": "Aspects"}
LANG_LABEL = {"transfer": "lang", "aspects": "aspect"}  # what lang_pair holds, per task, in detail tables
SPLIT_PREFERENCE = ("test", "all")  # the leaderboard's split per (task, dataset); other splits sorted after these
PANELS_PER_FIGURE = 12
LANGS_PER_STRIP = 40  # Tatoeba heat strips wrap after this many languages so figures stay readable
DPI = 100
NO_RESULTS = "No results yet: the eval/results table has no rows."


@dataclass
class ScatterData:
    """Per-pair predicted cosine vs gold score of one (model, dataset, split, lang_pair), for distribution plots."""

    model: str
    dataset: str
    split: str
    lang_pair: str
    predicted: np.ndarray
    gold: np.ndarray

    def __post_init__(self) -> None:
        self.predicted = np.asarray(self.predicted, dtype=np.float64).reshape(-1)
        self.gold = np.asarray(self.gold, dtype=np.float64).reshape(-1)
        if self.predicted.shape != self.gold.shape:
            raise ValueError(f"predicted and gold differ in length: {self.predicted.size} vs {self.gold.size}")


@dataclass
class ReportPaths:
    html: Path
    markdown: Path
    figures: list[Path] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------------
# formatting


def run_anchor(run_id: str) -> str:
    """The HTML id of a run's lineage section; links elsewhere in the report use `#` plus this."""
    return "run-" + quote(run_id, safe="-_.~")


@dataclass(frozen=True)
class _Cell:
    """One table cell, rendered alike to HTML and Markdown: text, optionally bold, or a list of in-page links."""

    text: str = ""
    bold: bool = False
    links: tuple[tuple[str, str], ...] = ()  # (text, href)
    undefined: bool = False
    code: bool = False
    summary: str = ""  # set: the links and text fold under this summary (HTML <details>)


def _value_cell(value: float | None, metric: str = "", bold: bool = False, suffix: str = "") -> _Cell:
    if value is None:
        return _Cell(UNDEFINED + suffix, undefined=True)
    return _Cell(fmt_value(value, metric) + suffix, bold=bold)


def _run_cell(run_ids: Iterable[str | None]) -> _Cell:
    ids = sorted({r for r in run_ids if r})
    return _Cell(links=tuple((r, "#" + run_anchor(r)) for r in ids)) if ids else _Cell("-")


@dataclass(frozen=True)
class _Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[_Cell]]
    cls: str = ""


def md_text(value: object) -> str:
    """Markdown-safe text: HTML-escaped (renderers pass HTML through) and Markdown's table/emphasis marks escaped."""
    text = html.escape(str(value), quote=False)
    return re.sub(r"([\\`*\[\]|])", r"\\\1", text).replace("\n", " ")


def md_code(value: object) -> str:
    """Text for a Markdown code span inside a table cell (a backtick cannot be escaped there)."""
    return str(value).replace("`", "'").replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------------------------------------------------------
# leaderboard


@dataclass
class _LeaderCell:
    value: float | None
    count: int
    runs: set[str]
    configs: set[str]


@dataclass
class _Column:
    task: str
    dataset: str
    split: str
    kind: str  # "mono" / "cross" for STS, "" otherwise
    items: list[str]  # the lang_pairs (languages, aspects) any model has in this column
    cells: dict[str, _LeaderCell]

    @property
    def header(self) -> str:
        base = dataset_label(self.task, self.dataset)
        if self.split != "test":
            base += f" [{self.split}]"
        unit = {"sts": "pairs", "bitext": "langs", "bucc": "pairs", "transfer": "langs", "aspects": "aspects"}
        parts = [self.kind] if self.kind else []
        if len(self.items) > 1:
            parts.append(f"{len(self.items)} {unit.get(self.task, 'items')}")
        return f"{base} ({', '.join(parts)})" if parts else base


def dataset_label(task: str, dataset: str) -> str:
    """"STS sample_sts", "Tatoeba" (not "Tatoeba tatoeba"): the task's label plus the dataset unless they agree."""
    label = TASK_LABEL.get(task, task)
    return label if dataset.lower() == label.lower() else f"{label} {dataset}"


def _headline_metric(task: str) -> str | None:
    return {"sts": "spearman", "bitext": "accuracy", "bucc": "f1", "transfer": "accuracy",
            "aspects": "spearman"}.get(task)


def _pick_split(splits: Iterable[str]) -> str:
    present = sorted(set(splits))
    return next((s for s in SPLIT_PREFERENCE if s in present), present[0])


def _is_cross(lang_pair: str) -> bool:
    parts = lang_pair.split("-")
    return len(parts) == 2 and parts[0] != parts[1]


def _task_order(tasks: Iterable[str]) -> list[str]:
    known = [t for t in TASK_ORDER if t in set(tasks)]
    return known + sorted(set(tasks) - set(TASK_ORDER))


def _headline_rows(latest: pl.DataFrame, task: str) -> tuple[pl.DataFrame, dict[str, str]]:
    """Rows of the headline metric of `task` and the split chosen per dataset."""
    metric = _headline_metric(task)
    rows = latest.filter((pl.col("task") == task) & (pl.col("metric") == metric))
    chosen = {ds: _pick_split(g["split"].to_list()) for (ds,), g in rows.group_by(["dataset"])}
    return rows, chosen


def leaderboard_columns(latest: pl.DataFrame) -> list[_Column]:
    """Leaderboard columns, one per (task, dataset) and for STS per mono/cross-lingual half: each cell is the mean
    of the headline metric over the column's lang_pairs; undefined when any of them is undefined."""
    columns: list[_Column] = []
    for task in _task_order(latest["task"].unique().to_list()):
        if _headline_metric(task) is None:
            continue
        rows, chosen = _headline_rows(latest, task)
        for dataset in sorted(chosen):
            split = chosen[dataset]
            sub = rows.filter((pl.col("dataset") == dataset) & (pl.col("split") == split))
            kinds = ["mono", "cross"] if task == "sts" else [""]
            for kind in kinds:
                part = sub
                if kind:
                    part = sub.filter(pl.col("lang_pair").map_elements(_is_cross, return_dtype=pl.Boolean)
                                      == (kind == "cross"))
                if part.height == 0:
                    continue
                cells: dict[str, _LeaderCell] = {}
                for (model,), g in part.group_by(["model"]):
                    values = g["value"].to_list()
                    mean = None if any(v is None for v in values) else float(np.mean(values))
                    cells[str(model)] = _LeaderCell(mean, len(values), {r for r in g["run_id"].to_list() if r},
                                                    {c for c in g["config_hash"].to_list() if c})
                columns.append(_Column(task, dataset, split, kind, sorted(set(part["lang_pair"].to_list())), cells))
    return columns


def _leaderboard_table(columns: list[_Column], models: list[str]) -> tuple[list[str], list[list[_Cell]]]:
    best: dict[int, float] = {}
    for i, col in enumerate(columns):
        full = [round(c.value, 2) for c in col.cells.values() if c.value is not None and c.count == len(col.items)]
        if len(full) >= 2:
            best[i] = max(full)
    headers = ["model", *(c.header for c in columns), "runs and configs"]
    rows: list[list[_Cell]] = []
    for model in models:
        row = [_Cell(model)]
        runs: set[str] = set()
        configs: set[str] = set()
        for i, col in enumerate(columns):
            cell = col.cells.get(model)
            if cell is None:
                row.append(_Cell("-"))
                continue
            runs |= cell.runs
            configs |= cell.configs
            partial = cell.count < len(col.items)
            bold = (not partial and cell.value is not None and i in best and round(cell.value, 2) == best[i])
            suffix = f" ({cell.count} of {len(col.items)})" if partial else ""
            row.append(_value_cell(cell.value, bold=bold, suffix=suffix))
        row.append(_provenance_cell(runs, configs))
        rows.append(row)
    return headers, rows


def _provenance_cell(runs: set[str], configs: set[str]) -> _Cell:
    """Run ids (linked to their lineage) and config hashes folded under a count, so the table stays numbers."""
    ids = sorted(runs)
    summary = f"{len(ids)} run{'s' * (len(ids) != 1)}, {len(configs)} config{'s' * (len(configs) != 1)}"
    return _Cell(", ".join(sorted(configs)) or "-", links=tuple((r, "#" + run_anchor(r)) for r in ids),
                 code=bool(configs), summary=summary)


LEADERBOARD_NOTES = [
    "STS: mean Spearman x 100 over the dataset's monolingual (mono) or cross-lingual (cross) language pairs.",
    "Tatoeba: mean accuracy x 100 (both directions) over languages. BUCC: F1 x 100 (mean over pairs if several).",
    "Transfer: mean test accuracy x 100 over evaluation languages. Aspects: mean Spearman x 100 over aspects.",
    "The count in a header is how many values a cell averages; a cell marked (k of N) averages only k of them "
    "and is not ranked. A mean with an undefined component is undefined.",
    "Each column uses the test split where there is one, else the split named in brackets. Best value per column "
    "in bold. Runs link to the lineage section.",
]


# ---------------------------------------------------------------------------------------------------------------
# figures (matplotlib imported here only; Figure objects without pyplot: no global state)


@dataclass
class _Figure:
    name: str  # file name under figures/
    caption: str
    png: bytes


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:limit] or "x"


def _figure_name(prefix: str, label: str, png: bytes) -> str:
    """Content-addressed name: a new report never overwrites a figure the previous report still references."""
    return f"{prefix}-{_slug(label)}-{hashlib.sha256(png).hexdigest()[:10]}.png"


def _new_figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    finally:
        fig.clear()
    return buf.getvalue()


def _heatmap_axes(ax: Any, matrix: list[list[float | None]], present: list[list[bool]], row_labels: list[str],
                  col_labels: list[str], scale: tuple[float, float] | None = None) -> Any:
    """imshow of a matrix with the numbers written in, coloured over `scale` (default: fitted to the matrix, so 69
    and 80 differ visibly); absent cells grey, undefined ones hatched."""
    import matplotlib
    from matplotlib.patches import Rectangle

    data = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=np.float64)
    masked = np.ma.masked_invalid(data)
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#d9d9d9")
    vmin, vmax = scale or fitted_range([v for row in matrix for v in row], include_zero=False)
    image = ax.imshow(masked, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=60, ha="right", fontsize=8, parse_math=False)
    ax.set_yticks(range(len(row_labels)), row_labels, fontsize=8, parse_math=False)
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if not present[i][j]:
                continue
            if value is None:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor="#999999",
                                       hatch="//", linewidth=0.5))
                ax.text(j, i, "undef", ha="center", va="center", fontsize=7, color="black", parse_math=False)
            else:
                dark = (value - vmin) / (vmax - vmin) < 0.6 if vmax > vmin else False  # viridis: dark below
                ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=7,
                        color="white" if dark else "black", parse_math=False)
    return image


def plot_sts_heatmap(model: str, dataset: str, split: str, langs: list[str],
                     values: dict[tuple[str, str], float | None], scale: tuple[float, float] | None = None) -> bytes:
    """lang1 x lang2 matrix of Spearman x 100 of one (model, dataset) as PNG bytes (colours over `scale`)."""
    index = {lang: i for i, lang in enumerate(langs)}
    matrix: list[list[float | None]] = [[None] * len(langs) for _ in langs]
    present = [[False] * len(langs) for _ in langs]
    for (l1, l2), value in values.items():
        matrix[index[l1]][index[l2]] = value
        present[index[l1]][index[l2]] = True
    size = min(3.0 + 0.55 * len(langs), 20.0)
    fig = _new_figure(size + 1.2, size)
    ax = fig.add_subplot(1, 1, 1)
    image = _heatmap_axes(ax, matrix, present, langs, langs, scale)
    ax.set_xlabel("sentence 2 language", fontsize=8)
    ax.set_ylabel("sentence 1 language", fontsize=8)
    ax.set_title(f"{model}\n{dataset} [{split}]: Spearman x 100", fontsize=9, parse_math=False)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return _png(fig)


def plot_bitext_heatmap(dataset: str, split: str, models: list[str], pairs: list[str],
                        values: dict[tuple[str, str], float | None], scale: tuple[float, float] | None = None) -> bytes:
    """models x languages strip of Tatoeba accuracy x 100 as PNG bytes (colours over `scale`)."""
    matrix = [[values.get((m, p)) for p in pairs] for m in models]
    present = [[(m, p) in values for p in pairs] for m in models]
    width = min(3.0 + 0.5 * len(pairs) + 0.05 * max(len(m) for m in models), 30.0)
    fig = _new_figure(width, 1.6 + 0.45 * len(models))
    ax = fig.add_subplot(1, 1, 1)
    image = _heatmap_axes(ax, matrix, present, models, pairs, scale)
    ax.set_title(f"{dataset} [{split}]: accuracy x 100 per language", fontsize=9, parse_math=False)
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    fig.tight_layout()
    return _png(fig)


def scatter_spearman(data: ScatterData) -> float | None:
    """Spearman x 100 of predicted vs gold; None (undefined) for fewer than 2 points or constant input."""
    if data.predicted.size < 2 or is_constant(data.predicted) or is_constant(data.gold):
        return None
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = float(spearmanr(data.predicted, data.gold)[0])
    return rho * 100 if math.isfinite(rho) else None


def plot_scatter_panels(panels: Sequence[ScatterData]) -> bytes:
    """Small multiples (up to PANELS_PER_FIGURE) of predicted cosine vs gold as PNG bytes."""
    ncols = min(4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _new_figure(3.2 * ncols, 3.0 * nrows)
    for k, data in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        ax.scatter(data.gold, data.predicted, s=6, alpha=0.4, linewidths=0)
        rho = scatter_spearman(data)
        shown = UNDEFINED if rho is None else f"{rho:.2f}"
        title = f"{data.model}\n{data.dataset} [{data.split}] {data.lang_pair}\nSpearman {shown}, n={data.gold.size}"
        ax.set_title(title, fontsize=8, parse_math=False)
        ax.set_xlabel("gold", fontsize=8)
        ax.set_ylabel("cosine", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    return _png(fig)


def _sts_figures(latest: pl.DataFrame) -> list[_Figure]:
    """One heat map per (model, dataset) whose STS rows span more than one language pair."""
    rows, chosen = _headline_rows(latest, "sts")
    figures: list[_Figure] = []
    for dataset in sorted(chosen):
        sub = rows.filter((pl.col("dataset") == dataset) & (pl.col("split") == chosen[dataset]))
        split_pairs = {lp: (p[0], p[1]) for lp in set(sub["lang_pair"].to_list()) if len(p := lp.split("-")) == 2}
        langs = sorted({lang for p in split_pairs.values() for lang in p})
        scale = fitted_range(sub["value"].to_list(), include_zero=False)  # one scale per dataset: maps compare
        for model in sorted(set(sub["model"].to_list())):
            values = {split_pairs[lp]: v for lp, v in sub.filter(pl.col("model") == model)
                      .select("lang_pair", "value").iter_rows() if lp in split_pairs}
            if len(values) < 2:
                continue
            png = plot_sts_heatmap(model, dataset, chosen[dataset], langs, values, scale)
            caption = (f"{dataset_label('sts', dataset)} [{chosen[dataset]}], {model}: Spearman x 100 per language "
                       f"pair (rows: sentence 1, columns: sentence 2; colours span {scale[0]:g} to {scale[1]:g}, "
                       "the range of this dataset's values; grey: not evaluated; hatched: undefined)")
            figures.append(_Figure(_figure_name("sts-heatmap", f"{dataset}-{model}", png), caption, png))
    return figures


def _bitext_figures(latest: pl.DataFrame) -> list[_Figure]:
    """Per Tatoeba dataset a models x languages heat strip, wrapped every LANGS_PER_STRIP languages."""
    rows, chosen = _headline_rows(latest, "bitext")
    figures: list[_Figure] = []
    for dataset in sorted(chosen):
        sub = rows.filter((pl.col("dataset") == dataset) & (pl.col("split") == chosen[dataset]))
        models = sorted(set(sub["model"].to_list()))
        pairs = sorted(set(sub["lang_pair"].to_list()))
        values = {(m, lp): v for m, lp, v in sub.select("model", "lang_pair", "value").iter_rows()}
        scale = fitted_range(list(values.values()), include_zero=False)
        for start in range(0, len(pairs), LANGS_PER_STRIP):
            chunk = pairs[start:start + LANGS_PER_STRIP]
            png = plot_bitext_heatmap(dataset, chosen[dataset], models, chunk,
                                      {k: v for k, v in values.items() if k[1] in chunk}, scale)
            caption = (f"{dataset_label('bitext', dataset)} [{chosen[dataset]}]: accuracy x 100 per language "
                       f"({chunk[0]} .. {chunk[-1]}; colours span {scale[0]:g} to {scale[1]:g})")
            figures.append(_Figure(_figure_name("bitext-heatmap", dataset, png), caption, png))
    return figures


def _scatter_figures(scatters: Sequence[ScatterData]) -> list[_Figure]:
    figures: list[_Figure] = []
    for start in range(0, len(scatters), PANELS_PER_FIGURE):
        chunk = list(scatters[start:start + PANELS_PER_FIGURE])
        png = plot_scatter_panels(chunk)
        figures.append(_Figure(_figure_name("scatter", f"{start // PANELS_PER_FIGURE + 1:02d}", png),
                               f"Predicted cosine vs gold score, panels {start + 1}-{start + len(chunk)}", png))
    return figures


# ---------------------------------------------------------------------------------------------------------------
# sections


DETAIL_COLUMNS = ["model", "dataset", "split", "lang_pair", "metric", "value", "n", "run_id", "config_hash"]
LINEAGE_COLUMNS = ["stage", "dataset", "table", "input_versions", "output_version", "config_hash", "code_version",
                   "rows_in", "rows_computed", "rows_failed", "rows_out", "seconds", "status", "error"]


def _detail_tables(latest: pl.DataFrame) -> list[tuple[str, list[str], list[list[_Cell]]]]:
    tables = []
    for task in _task_order(latest["task"].unique().to_list()):
        sub = latest.filter(pl.col("task") == task).sort(["dataset", "split", "lang_pair", "metric", "model"])
        headers = [LANG_LABEL.get(task, c) if c == "lang_pair" else c for c in DETAIL_COLUMNS]
        rows = [[_Cell(r["model"]), _Cell(r["dataset"]), _Cell(r["split"]), _Cell(r["lang_pair"]),
                 _Cell(r["metric"]), _value_cell(r["value"], r["metric"]),
                 _Cell("" if r["n"] is None else str(r["n"])), _run_cell([r["run_id"]]),
                 _Cell(r["config_hash"] or "-", code=bool(r["config_hash"]))] for r in sub.iter_rows(named=True)]
        tables.append((TASK_LABEL.get(task, task), headers, rows))
    return tables


def _fmt_lineage(name: str, value: object) -> _Cell:
    if value is None:
        return _Cell("")
    if name == "seconds" and isinstance(value, float):
        return _Cell(f"{value:.2f}")
    return _Cell(str(value), code=name in ("input_versions", "config_hash", "code_version"))


def _lineage_sections(latest: pl.DataFrame, lineage: pl.DataFrame) -> list[tuple[str, list[str], list[list[_Cell]]]]:
    """(run_id, headers, rows) for each run that produced a shown number, oldest run first where known."""
    runs = [r for r in latest["run_id"].unique().to_list() if r]
    cols = [c for c in LINEAGE_COLUMNS if c in lineage.columns]
    first_seen = {r: t for r, t in latest.group_by("run_id").agg(pl.col("created_at").min()).iter_rows()}
    sections = []
    for run in sorted(runs, key=lambda r: (first_seen.get(r) is None, str(first_seen.get(r)), r)):
        sub = lineage.filter(pl.col("run_id") == run) if "run_id" in lineage.columns else lineage.clear()
        if "started_at" in sub.columns:
            sub = sub.sort("started_at", nulls_last=True, maintain_order=True)
        if "error" in cols and sub.height and sub["error"].null_count() == sub.height:
            shown = [c for c in cols if c != "error"]
        else:
            shown = cols
        rows = [[_fmt_lineage(c, r[c]) for c in shown] for r in sub.iter_rows(named=True)]
        sections.append((run, shown, rows))
    return sections


# ---------------------------------------------------------------------------------------------------------------
# documents: the numbers, tables and figures are computed here; templates/report.{html,md}.j2 only lay them out


TEXT = {  # prose shared by the HTML and Markdown templates, so both say the same
    "no_leaderboard": "No headline metrics among the results: see the detail tables.",
    "ood": "STS Spearman (x100). in: test pairs of the training distribution; ood: the held-out test pairs. "
           "Each trained model is compared with its base (the encoder its model.json records, else minilm).",
    "heatmaps": "Each map's colours span the range of its dataset's values (the caption gives it), so close "
                "numbers still differ; grey cells were not evaluated, hatched cells are undefined.",
    "lineage": "Which data versions and config produced each number: the lineage rows of every run above.",
    "no_lineage": "No lineage rows recorded for this run.",
    "no_results": NO_RESULTS,
    "phenomena": "What cosine misses and the graphs see: per phenomenon a tagged dataset tests (a negation, swapped "
                 "roles, a changed number, ...), the mean gold score (0-1 over the dataset's range), each model's "
                 "mean cosine, the mean Smatch F1 and the mean of the AMR aspect that tracks the phenomenon "
                 "(negation: negation, role swap: srl, quantity: quant_sim), over the dataset's English pairs. "
                 "A pair whose meaning changed scores low in gold; a cosine near 1 means the model did not see it.",
    "no_phenomena": "No evaluated dataset tags its pairs with a phenomenon (the bundled sample does: make run).",
    "aspects": "Spearman x 100 of each model's similarity (a decomposed model: its aspect's sub-embedding) against "
               "each AMR metric aspect of the dataset's graph pairs; the mean row is the leaderboard's Aspects "
               "number. An aspect with one value on every pair (wikification where no graph has a :wiki) cannot "
               "rank pairs and is not evaluated.",
    "no_aspects": "No aspect evaluation among the results (amrsim evaluate aspects, after the metrics stage).",
    "provenance": "The runs (linked to their lineage) and config hashes behind each model's numbers, and the "
                  "pipelines those runs belong to (the leaderboard's pipeline filter).",
}


def _ood_table(latest: pl.DataFrame, bases: Mapping[str, str | None]) -> _Table | None:
    """The out-of-distribution protocol's table (amrsim.evaluate.ood), a model below its base flagged."""
    table = ood_table(latest, {m: bases.get(m) for m in latest["model"].unique().to_list()})
    if not table.height:
        return None
    headers = ["split", "train -> ood", "model", "in", "ood", "base", "base in", "base ood", "delta in", "delta ood",
               "below base"]
    rows = []
    for r in table.iter_rows(named=True):
        flag = r["below_base"]
        rows.append([_Cell(r["split"]), _Cell(r["train -> ood"]), _Cell(r["model"], code=True),
                     *(_value_cell(r[c]) if r[c] is not None else _Cell("-") for c in ("in", "ood")),
                     _Cell(r["base"] or "-", code=bool(r["base"])),
                     *(_value_cell(r[c]) if r[c] is not None else _Cell("-") for c in ("base in", "base ood")),
                     *(_Cell(f"{r[c]:+.2f}") if r[c] is not None else _Cell("-") for c in ("delta in", "delta ood")),
                     _Cell("-" if flag is None else f"BELOW BASE: {flag}" if flag else "no", bold=bool(flag))])
    return _Table(headers, rows, "ood")


def current_aspects(latest: pl.DataFrame) -> pl.DataFrame:
    """`latest` less aspect rows superseded by a newer aspects evaluation of the same (model, dataset, split): one
    evaluation scores every aspect at once, so the newest one's set is the set (an aspect no longer evaluated, such
    as one constant on the data, is not carried over from an older run)."""
    if latest.height == 0:
        return latest
    aspects = latest.filter(pl.col("task") == "aspects")
    if aspects.height == 0 or aspects["run_id"].null_count() == aspects.height:
        return latest
    newest = (aspects.filter(pl.col("run_id").is_not_null())
              .sort("created_at", nulls_last=False, maintain_order=True)
              .group_by(["model", "dataset", "split"], maintain_order=True).agg(pl.col("run_id").last()
                                                                                .alias("_newest")))
    stale = (aspects.join(newest, on=["model", "dataset", "split"], how="inner")
             .filter(pl.col("run_id").is_not_null() & (pl.col("run_id") != pl.col("_newest"))))
    if stale.height == 0:
        return latest
    return latest.join(stale.select("task", "model", "dataset", "split", "lang_pair", "metric"),
                       on=["task", "model", "dataset", "split", "lang_pair", "metric"], how="anti",
                       nulls_equal=True)


@dataclass
class _Chart:
    """A titled inline SVG chart with the table of its numbers."""

    title: str
    anchor: str
    svg: str
    table: _Table
    note: str = ""


def _aspect_charts(latest: pl.DataFrame) -> list[_Chart]:
    """Per (dataset, split) of the aspect evaluation: Spearman x 100 per aspect and model, with each model's mean
    (the leaderboard's Aspects number), as a table and a bar chart on a scale fitted to the values."""
    rows = latest.filter((pl.col("task") == "aspects") & (pl.col("metric") == "spearman"))
    charts = []
    for (dataset, split), sub in sorted(rows.group_by(["dataset", "split"]), key=lambda kv: kv[0]):
        models = sorted(set(sub["model"].to_list()))
        aspects = sorted(set(sub["lang_pair"].to_list()))
        value = {(m, a): v for m, a, v in sub.select("model", "lang_pair", "value").iter_rows()}
        means = {}
        for m in models:
            vals = [value.get((m, a)) for a in aspects]
            means[m] = None if any(v is None for v in vals) else float(np.mean(vals))
        body = [[_Cell(a), *(_value_cell(value.get((m, a))) if (m, a) in value else _Cell("-") for m in models)]
                for a in aspects]
        body.append([_Cell("mean", bold=True), *(_value_cell(means[m], bold=True) for m in models)])
        svg = svg_bars(f"{dataset} [{split}]: Spearman x 100 of each model's similarity vs each aspect",
                       aspects, [(m, [value.get((m, a)) for a in aspects]) for m in models])
        charts.append(_Chart(f"{dataset} [{split}]", f"aspects-{_slug(str(dataset))}-{_slug(str(split))}", svg,
                             _Table(["aspect", *models], body, "aspects")))
    return charts


def _phenomenon_charts(phenomena: Sequence[PhenomenonRow]) -> list[_Chart]:
    """Per tagged dataset: mean gold, each model's mean cosine, mean Smatch F1 and the phenomenon's own aspect."""
    charts = []
    for dataset in sorted({r.dataset for r in phenomena}):
        part = [r for r in phenomena if r.dataset == dataset]
        models = sorted({m for r in part for m in r.cosine})
        headers = ["phenomenon", "pairs", "gold (0-1)", *(f"{m} cosine" for m in models), "Smatch F1",
                   "its aspect"]
        body = []
        for r in part:
            aspect = (f"{r.aspect} {_f01(r.aspect_value)}" if r.aspect and r.aspect_value is not None
                      else r.aspect or "-")
            body.append([_Cell(r.phenomenon.replace("_", " ")), _Cell(str(r.pairs)), _Cell(_f01(r.gold)),
                         *(_Cell(_f01(r.cosine.get(m))) for m in models), _Cell(_f01(r.smatch)),
                         _Cell(aspect, code=bool(r.aspect))])
        series = [("gold (0-1)", [r.gold for r in part]),
                  *((f"{m} cosine", [r.cosine.get(m) for r in part]) for m in models),
                  ("Smatch F1", [r.smatch for r in part]),
                  ("the phenomenon's aspect", [r.aspect_value for r in part])]
        series = [(name, vals) for name, vals in series if any(v is not None for v in vals)]
        svg = svg_bars(f"{dataset}: means per phenomenon", [r.phenomenon.replace("_", " ") for r in part], series)
        charts.append(_Chart(dataset, f"phenomena-{_slug(dataset)}", svg, _Table(headers, body, "phenomena")))
    return charts


def _f01(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _provenance(latest: pl.DataFrame, lineage: pl.DataFrame) -> tuple[_Table, dict[str, list[str]]]:
    """Per model: its runs (linked to their lineage), config hashes and pipelines; and model -> pipelines for the
    leaderboard's filter (a run's pipeline is the one its lineage rows name)."""
    pipes: dict[str, set[str]] = {}
    if {"run_id", "pipeline"} <= set(lineage.columns):
        for run, pipe in lineage.select("run_id", "pipeline").drop_nulls().unique().iter_rows():
            pipes.setdefault(str(run), set()).add(str(pipe))
    body, by_model = [], {}
    for (model,), g in sorted(latest.group_by(["model"]), key=lambda kv: str(kv[0])):
        runs = sorted({r for r in g["run_id"].to_list() if r})
        configs = sorted({c for c in g["config_hash"].to_list() if c})
        pipelines = sorted({p for r in runs for p in pipes.get(r, ())})
        by_model[str(model)] = pipelines
        body.append([_Cell(str(model)), _Cell(", ".join(pipelines) or "-"), _run_cell(runs),
                     _Cell(", ".join(configs) or "-", code=bool(configs))])
    return _Table(["model", "pipelines", "runs", "config hashes"], body, "provenance"), by_model


@dataclass
class _Section:
    """A titled subsection (a task's detail table, a run's lineage) with its anchor; a run without lineage rows
    has no table."""

    title: str
    anchor: str
    table: _Table | None


def _context(latest: pl.DataFrame, lineage: pl.DataFrame, scatters: Sequence[ScatterData], title: str,
             ood_bases: Mapping[str, str | None] | None, phenomena: Sequence[PhenomenonRow] = ()) -> dict[str, Any]:
    """Everything the templates show, computed; figures are rendered to PNG here."""
    ctx: dict[str, Any] = {
        "title": title, "text": TEXT, "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "result_rows": latest.height, "runs": 0, "leaderboard": None, "leaderboard_notes": LEADERBOARD_NOTES,
        "ood": None, "heatmaps": [], "scatters": _scatter_figures(scatters) if scatters else [], "details": [],
        "lineage": [], "aspects": [], "phenomena": _phenomenon_charts(phenomena), "provenance": None,
        "filter": None, "script": FILTER_JS, "toc": [],
    }
    if latest.height == 0:
        ctx["toc"] = _toc(ctx)
        return ctx
    latest = current_aspects(latest)
    ctx["result_rows"] = latest.height
    ctx["runs"] = latest["run_id"].drop_nulls().n_unique()
    columns = leaderboard_columns(latest)
    ctx["provenance"], pipelines = _provenance(latest, lineage)
    if columns:
        ctx["leaderboard"] = _Table(*_leaderboard_table(columns, sorted(set(latest["model"].to_list()))),
                                    "leaderboard")
        tasks = list(dict.fromkeys(c.task for c in columns))
        ctx["filter"] = {"models": json_attr(pipelines), "columns": json_attr([c.task for c in columns]),
                         "pipelines": sorted({p for ps in pipelines.values() for p in ps}),
                         "tasks": [(t, TASK_LABEL.get(t, t)) for t in tasks]}
    ctx["aspects"] = _aspect_charts(latest)
    ctx["ood"] = _ood_table(latest, ood_bases or {})
    ctx["heatmaps"] = _sts_figures(latest) + _bitext_figures(latest)
    ctx["details"] = [_Section(label, f"details-{_slug(label)}", _Table(headers, rows, "details"))
                      for label, headers, rows in _detail_tables(latest)]
    ctx["lineage"] = [_Section(f"Run {run}", run_anchor(run), _Table(headers, rows, "lineage") if rows else None)
                      for run, headers, rows in _lineage_sections(latest, lineage)]
    ctx["toc"] = _toc(ctx)
    return ctx


def _toc(ctx: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(anchor, title) of each section the page has, in page order."""
    has = {"leaderboard": bool(ctx["result_rows"]), "phenomena": True, "aspects": bool(ctx["result_rows"]),
           "ood": bool(ctx["ood"]), "heatmaps": bool(ctx["heatmaps"]), "distributions": bool(ctx["scatters"]),
           "details": bool(ctx["result_rows"]), "provenance": bool(ctx["provenance"]),
           "lineage": bool(ctx["result_rows"])}
    return [(anchor, SECTION_TITLES[anchor]) for anchor in SECTION_TITLES if has[anchor]]


SECTION_TITLES = {"leaderboard": "Leaderboard", "phenomena": "Phenomena", "aspects": "AMR aspects",
                  "ood": "Out-of-distribution protocol", "heatmaps": "Per-language heat maps",
                  "distributions": "Score distributions", "details": "Details",
                  "provenance": "Runs and configurations", "lineage": "Run lineage"}


@functools.cache
def _templates() -> Any:
    import jinja2  # here, not at module level: the CLI imports this module and must stay fast

    env = jinja2.Environment(loader=jinja2.PackageLoader("amrsim.stages.evaluate", "templates"),
                             autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters["md"] = md_text
    env.filters["md_code"] = md_code
    env.filters["b64"] = lambda data: base64.b64encode(data).decode("ascii")
    return env


def _build(latest: pl.DataFrame, lineage: pl.DataFrame, scatters: Sequence[ScatterData],
           title: str, ood_bases: Mapping[str, str | None] | None = None,
           phenomena: Sequence[PhenomenonRow] = ()) -> tuple[str, str, list[_Figure]]:
    """HTML text, Markdown text and the figures of one report."""
    ctx = _context(latest, lineage, scatters, title, ood_bases, phenomena)
    env = _templates()
    page = env.get_template("report.html.j2").render(ctx)
    markdown = env.get_template("report.md.j2").render(ctx)
    return page, markdown, ctx["heatmaps"] + ctx["scatters"]


# ---------------------------------------------------------------------------------------------------------------
# writing


def _commit(staging: Path, out_dir: Path, figure_names: set[str]) -> None:
    """Move a finished report from `staging` into `out_dir`. A new out_dir is one rename. An existing one gets the
    new (content-named) figures first, then report.md and report.html replaced atomically, then figures no longer
    referenced removed: at every moment the visible report is complete; other files in out_dir are left alone."""
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    figures = out_dir / "figures"
    if figures.exists() and not figures.is_dir():
        figures.unlink()
    own_dir(figures)  # a linked folder: its other .png files would be removed below
    for path in sorted((staging / "figures").iterdir()):
        path.replace(figures / path.name)
    (staging / "report.md").replace(out_dir / "report.md")
    (staging / "report.html").replace(out_dir / "report.html")
    for path in figures.iterdir():
        if path.is_file() and path.suffix == ".png" and path.name not in figure_names:
            path.unlink()
    shutil.rmtree(staging, ignore_errors=True)


def render_report(results: pl.DataFrame, lineage: pl.DataFrame, out_dir: Path,
                  scatters: Sequence[ScatterData] = (), title: str = "amrsim evaluation report",
                  ood_bases: Mapping[str, str | None] | None = None,
                  phenomena: Sequence[PhenomenonRow] = ()) -> ReportPaths:
    """Write report.html (self-contained, figures embedded), report.md and figures/*.png into out_dir. Everything
    is built in a temporary sibling directory first, so a failure leaves the previous report as it was. `ood_bases`
    names each model's base for the out-of-distribution table (a model without one is not compared);
    `phenomena` are the per-phenomenon means of tagged datasets (`report_views.phenomenon_view`)."""
    out_dir = Path(out_dir)
    latest = latest_results(results)
    page, markdown, figures = _build(latest, lineage, scatters, title, ood_bases, phenomena)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        (staging / "figures").mkdir()
        for fig in figures:
            (staging / "figures" / fig.name).write_bytes(fig.png)
        (staging / "report.md").write_text(markdown, encoding="utf-8")
        (staging / "report.html").write_text(page, encoding="utf-8")
        _commit(staging, out_dir, {f.name for f in figures})
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    names = sorted({f.name for f in figures})
    return ReportPaths(out_dir / "report.html", out_dir / "report.md", [out_dir / "figures" / n for n in names])


def write_report(wh: Warehouse, out_dir: Path | None = None, max_scatters: int = 24) -> ReportPaths:
    """Render `eval/results` (latest row per result) into `<warehouse>/reports/report.{html,md}` with STS score
    distributions from the cached embeddings."""
    results = wh.read(EVAL, RESULTS)
    scatters = []
    if results.height:
        sts = (latest_results(results).filter((pl.col("task") == "sts") & (pl.col("metric") == "spearman"))
               .unique(["model", "dataset", "split", "lang_pair"], maintain_order=True)
               .sort(["dataset", "lang_pair", "model"]))
        for row in sts.head(max_scatters).iter_rows(named=True):
            if not wh.exists(row["dataset"], "pairs"):
                continue  # results of a warehouse dataset since removed
            chosen = select_pairs(wh.read(row["dataset"], "pairs"), row["split"], row["lang_pair"])
            try:
                pred, gold = pair_similarities(wh, row["dataset"], row["model"], chosen)
            except (WarehouseError, ValueError):
                continue  # embeddings no longer cached (or a trained model removed): no scatter for it
            if len(pred):
                scatters.append(ScatterData(row["model"], row["dataset"], row["split"], row["lang_pair"], pred, gold))
    ood_models = results.filter(pl.col("dataset").is_in(list(DATASETS)))["model"].unique().to_list()
    phenomena: list[PhenomenonRow] = []
    if results.height:
        sts_rows = results.filter(pl.col("task") == "sts") if "task" in results.columns else results
        for dataset in sorted(set(sts_rows["dataset"].to_list())):
            models = sorted(set(sts_rows.filter(pl.col("dataset") == dataset)["model"].to_list()))
            phenomena += phenomenon_view(wh, dataset, models)
    return render_report(results, wh.read(META, "lineage"), out_dir or wh.root / "reports", scatters,
                         ood_bases={m: base_for(m, wh.models_root) for m in ood_models}, phenomena=phenomena)
