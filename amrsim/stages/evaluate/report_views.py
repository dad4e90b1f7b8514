"""The report's analyst views: per-phenomenon numbers (what cosine misses and the AMR aspects see), inline SVG bar
charts with scales fitted to their data, and the page's filter script. Plain text in, escaped markup out."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from amrsim.config import SAMPLE_DIR
from amrsim.errors import WarehouseError
from amrsim.ingest import read_rows
from amrsim.stages.evaluate.sts import pair_similarities, select_pairs
from amrsim.warehouse import Warehouse
from amrsim.warehouse.store import OK

# phenomenon -> the amr_metrics aspect that looks at it (benchmarks/sample_phenomena.py, the README's table); the
# README's three come first, the contrast rows (paraphrase, unrelated) last
PHENOMENON_ASPECT = {"negation": "negation", "role_swap": "srl", "quantity": "quant_sim",
                     "named_entity": "named_entities", "coreference": "reentrancies"}
PHENOMENON_LAST = ("lexical", "paraphrase", "unrelated")
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")


@dataclass
class PhenomenonRow:
    """Means over one dataset's pairs tagged with one phenomenon (gold and metrics on a 0-1 scale)."""

    dataset: str
    phenomenon: str
    pairs: int
    gold: float | None
    cosine: dict[str, float | None] = field(default_factory=dict)  # per model
    smatch: float | None = None
    aspect: str | None = None
    aspect_value: float | None = None


def _mean(values: Sequence[float] | np.ndarray) -> float | None:
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()) if arr.size else None


def _phenomenon_order(names: Sequence[str]) -> list[str]:
    first = [p for p in PHENOMENON_ASPECT if p in names]
    last = [p for p in PHENOMENON_LAST if p in names]
    return first + sorted(set(names) - set(first) - set(last)) + last


def phenomenon_tags(pairs: pl.DataFrame) -> dict[str, str]:
    """item_id -> phenomenon: the pairs table's `phenomenon` column where it has one, else the bundled sample's file
    the rows came from (ingest keeps no extra columns; the sample names each pair's phenomenon)."""
    if "phenomenon" in pairs.columns:
        return {i: p for i, p in pairs.select("item_id", "phenomenon").drop_nulls().iter_rows()}
    names = set(pairs["source_file"].drop_nulls().to_list()) if "source_file" in pairs.columns else set()
    tags: dict[str, str] = {}
    for name in sorted(names):
        path = Path(SAMPLE_DIR) / name
        if not path.is_file():
            continue
        try:
            rows = read_rows(path, "tsv", ["id", "phenomenon"])
        except Exception:  # noqa: BLE001 - a sample file without the columns has no tags
            continue
        tags.update({str(i): str(p) for i, p in rows.select("id", "phenomenon").iter_rows() if p})
    return tags


def phenomenon_view(wh: Warehouse, dataset: str, models: Sequence[str]) -> list[PhenomenonRow]:
    """Per phenomenon of a tagged dataset: mean gold, each model's mean cosine and (with an amr_metrics table) mean
    Smatch F1 and the tracked aspect, over its monolingual pairs (English where there are any), every split."""
    if not wh.exists(dataset, "pairs"):
        return []
    pairs = wh.read(dataset, "pairs")
    tags = phenomenon_tags(pairs)
    if not tags:
        return []
    mono = pairs.filter((pl.col("status") == OK) & (pl.col("lang1") == pl.col("lang2")))
    langs = sorted(set(mono["lang1"].to_list()))
    if not langs:
        return []
    lang = "en" if "en" in langs else langs[0]
    chosen = select_pairs(pairs, None, f"{lang}-{lang}")
    chosen = chosen.with_columns(pl.col("item_id").cast(pl.String).replace_strict(tags, default=None)
                                 .alias("phenomenon")).filter(pl.col("phenomenon").is_not_null())
    if chosen.height == 0:
        return []
    low, high = chosen["score"].min(), chosen["score"].max()
    span = (high - low) if high is not None and low is not None and high > low else 1.0
    chosen = chosen.with_columns(((pl.col("score") - low) / span).alias("gold01"))
    cosines: dict[str, np.ndarray] = {}
    for model in models:
        try:
            pred, _ = pair_similarities(wh, dataset, model, chosen)
        except (WarehouseError, ValueError):
            continue  # no cached embeddings of this model (a cross-encoder, a removed run)
        cosines[model] = pred
    metrics = None
    if wh.exists(dataset, "amr_metrics"):
        metrics = (wh.read(dataset, "amr_metrics").filter(pl.col("status") == OK)
                   .unique(["sentence1_key", "sentence2_key"], keep="first"))
        metrics = chosen.select("sentence1_key", "sentence2_key", "phenomenon").join(
            metrics.drop("phenomenon", strict=False), on=["sentence1_key", "sentence2_key"], how="inner")
    out = []
    tag = chosen["phenomenon"].to_numpy()
    for name in _phenomenon_order(sorted(set(tag.tolist()))):
        mask = tag == name
        aspect = PHENOMENON_ASPECT.get(name)
        row = PhenomenonRow(dataset, name, int(mask.sum()), _mean(chosen["gold01"].to_numpy()[mask]),
                            {m: _mean(c[mask]) for m, c in cosines.items()}, aspect=aspect)
        if metrics is not None and metrics.height:
            part = metrics.filter(pl.col("phenomenon") == name)
            if "smatch_f1" in part.columns:
                row.smatch = _mean(part["smatch_f1"].cast(pl.Float64).drop_nulls().to_numpy())
            if aspect and aspect in part.columns:
                row.aspect_value = _mean(part[aspect].cast(pl.Float64).drop_nulls().to_numpy())
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------------------------
# inline SVG


def fitted_range(values: Sequence[float | None], include_zero: bool = True) -> tuple[float, float]:
    """A scale that spans the data (and 0 for bars), rounded outwards to a readable step."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return 0.0, 1.0
    low, high = min(vals), max(vals)
    if include_zero:
        low, high = min(low, 0.0), max(high, 0.0)
    if high - low < 1e-9:
        low, high = low - 1.0, high + 1.0
    step = _step(high - low, 10)
    return math.floor(low / step) * step, math.ceil(high / step) * step


def _step(span: float, ticks: int = 5) -> float:
    """A 1, 2 or 5 times a power of ten that cuts `span` into about `ticks` parts."""
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def svg_bars(title: str, categories: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]],
             fmt: str = "{:.2f}") -> str:
    """Grouped horizontal bars (one group per category, one bar per series) on a scale fitted to the values."""
    label_w, plot_w, bar_h, gap, top = 170, 460, 11, 10, 28 + 16 * math.ceil(len(series) / 3)
    low, high = fitted_range([v for _, vals in series for v in vals])

    def x(v: float) -> float:
        return label_w + (v - low) / (high - low) * plot_w

    group_h = bar_h * len(series) + gap
    height = top + group_h * len(categories) + 24
    width = label_w + plot_w + 70
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(title)}">',
           f'<text x="0" y="14" font-size="13" font-weight="bold">{_esc(title)}</text>']
    for k, (name, _) in enumerate(series):  # legend, three per line
        lx, ly = 10 + (k % 3) * 230, 30 + 16 * (k // 3)
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{PALETTE[k % len(PALETTE)]}"/>'
                   f'<text x="{lx + 14}" y="{ly}" font-size="11">{_esc(name)}</text>')
    bottom = top + group_h * len(categories)
    step = _step(high - low)
    for tick in np.arange(math.ceil(low / step) * step, high + step / 2, step):
        out.append(f'<line x1="{x(tick):.1f}" y1="{top - 4}" x2="{x(tick):.1f}" y2="{bottom}" stroke="#ddd"/>'
                   f'<text x="{x(tick):.1f}" y="{bottom + 14}" font-size="10" text-anchor="middle">'
                   f'{_esc(f"{tick:.3g}")}</text>')
    if low < 0 < high:
        out.append(f'<line x1="{x(0):.1f}" y1="{top - 4}" x2="{x(0):.1f}" y2="{bottom}" stroke="#666"/>')
    for i, cat in enumerate(categories):
        y0 = top + i * group_h
        out.append(f'<text x="{label_w - 6}" y="{y0 + group_h / 2:.1f}" font-size="11" text-anchor="end" '
                   f'dominant-baseline="middle">{_esc(cat)}</text>')
        for k, (name, vals) in enumerate(series):
            v = vals[i]
            y = y0 + k * bar_h
            if v is None or not math.isfinite(v):
                continue  # no bar: the table beside the chart says why
            x1, x2 = sorted((x(0.0 if low <= 0 <= high else low), x(v)))
            out.append(f'<rect x="{x1:.1f}" y="{y}" width="{max(x2 - x1, 0.5):.1f}" height="{bar_h - 1}" '
                       f'fill="{PALETTE[k % len(PALETTE)]}"><title>{_esc(f"{cat}, {name}: " + fmt.format(v))}'
                       f'</title></rect><text x="{max(x1, x2) + 3:.1f}" y="{y + bar_h - 2}" font-size="9">'
                       f'{_esc(fmt.format(v))}</text>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------------------------------------------------
# the page's script: runs from <body onload> (the page has no <script> element), records any error into the DOM


FILTER_JS = """
var errs = document.getElementById('js-errors');
window.onerror = function (msg) { errs.hidden = false; errs.textContent += String(msg) + '\\n'; };
try {
  var box = document.getElementById('board');
  if (box) {
    var table = box.querySelector('table.leaderboard');
    var models = JSON.parse(box.getAttribute('data-models'));
    var tasks = JSON.parse(box.getAttribute('data-columns'));
    var fm = document.getElementById('f-model'), fp = document.getElementById('f-pipeline');
    var fc = document.getElementById('f-column');
    var boxes = Array.prototype.slice.call(document.querySelectorAll('input.f-task'));
    var q = new URLSearchParams(location.search);
    if (q.has('model')) fm.value = q.get('model');
    if (q.has('pipeline')) fp.value = q.get('pipeline');
    if (q.has('columns')) fc.value = q.get('columns');
    if (q.has('tasks')) {
      var want = q.get('tasks').split(',');
      boxes.forEach(function (b) { b.checked = want.indexOf(b.value) >= 0; });
    }
    var shade = function () {
      for (var c = 1; c <= tasks.length; c++) {
        var cells = [], vals = [];
        for (var r = 0; r < table.tBodies[0].rows.length; r++) {
          var row = table.tBodies[0].rows[r], cell = row.cells[c];
          if (!cell || row.hidden) continue;
          var v = parseFloat(cell.textContent);
          if (isFinite(v)) { cells.push(cell); vals.push(v); }
          else if (cell) cell.style.background = '';
        }
        var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
        cells.forEach(function (cell, i) {
          var t = hi > lo ? (vals[i] - lo) / (hi - lo) : 0.5;
          cell.style.background = 'rgba(78, 121, 167, ' + (0.06 + 0.5 * t).toFixed(3) + ')';
        });
      }
    };
    var apply = function () {
      var text = fm.value.trim().toLowerCase(), pipe = fp.value, shown = 0;
      var rows = table.tBodies[0].rows;
      for (var i = 0; i < rows.length; i++) {
        var name = rows[i].cells[0].textContent;
        var ok = name.toLowerCase().indexOf(text) >= 0 && (!pipe || (models[name] || []).indexOf(pipe) >= 0);
        rows[i].hidden = !ok;
        if (ok) shown++;
      }
      var on = {}, ctext = fc.value.trim().toLowerCase(), head = table.tHead.rows[0].cells;
      boxes.forEach(function (b) { on[b.value] = b.checked; });
      for (var r = 0; r < table.rows.length; r++) {
        for (var c = 1; c <= tasks.length; c++) {
          var cell = table.rows[r].cells[c];
          var want = on[tasks[c - 1]] && head[c].textContent.toLowerCase().indexOf(ctext) >= 0;
          if (cell) cell.hidden = !want;
        }
      }
      document.getElementById('f-count').textContent = shown + ' of ' + rows.length + ' models shown';
      shade();
    };
    fm.addEventListener('input', apply);
    fp.addEventListener('change', apply);
    fc.addEventListener('input', apply);
    boxes.forEach(function (b) { b.addEventListener('change', apply); });
    apply();
  }
  document.body.setAttribute('data-report-ready', 'yes');
} catch (e) {
  errs.hidden = false;
  errs.textContent += String(e && e.stack || e) + '\\n';
}
"""


def json_attr(value: Mapping | Sequence) -> str:
    """JSON for a data- attribute (the template escapes it as attribute text)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
