"""`amrsim.stages.evaluate.report`: leaderboard means, undefined values, figures, lineage, escaping, atomic writes."""

from __future__ import annotations

import base64
import html
import json
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from amrsim.evaluate import Score
from amrsim.stages.evaluate import report
from amrsim.stages.evaluate.report import ScatterData, render_report, scatter_spearman
from amrsim.stages.evaluate.results import RESULT_SCHEMA, fmt_value, latest_results, score_rows
from tests.helpers import ROOT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EVIL = "<script>alert(1)</script>"
INPUT_VERSIONS_A = json.dumps({"sample_sts/pairs": 3, "sample_sts/embeddings": 7})
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _scores(run_id: str, config_hash: str, scores: list[Score], at: datetime) -> pl.DataFrame:
    return score_rows(scores, run_id, config_hash).with_columns(pl.lit(at, dtype=pl.Datetime("us", "UTC"))
                                                                .alias("created_at"))


def sts(model: str, pair: str, value: float | None, metric: str = "spearman") -> Score:
    return Score("sts", model, "sample_sts", "test", pair, metric, value, 50)


def bitext(model: str, pair: str, value: float) -> Score:
    return Score("bitext", model, "tatoeba", "test", pair, "accuracy", value, 100)


@pytest.fixture
def results() -> pl.DataFrame:
    run_a = [
        sts("minilm", "en-en", 80.0), sts("minilm", "de-de", 70.0), sts("minilm", "fr-fr", 75.5),
        sts("minilm", "en-de", 60.0), sts("minilm", "en-fr", 65.0), sts("minilm", "en-en", 81.0, "pearson"),
        sts("muse", "en-en", 82.0), sts("muse", "de-de", 71.0), sts("muse", "fr-fr", 76.0),
        sts("muse", "en-de", 64.0), sts("muse", "en-fr", None),  # undefined: e.g. constant predictions
        bitext("minilm", "deu-eng", 90.0), bitext("minilm", "fra-eng", 85.0), bitext("minilm", "jpn-eng", 60.0),
        bitext("muse", "deu-eng", 95.0), bitext("muse", "fra-eng", 88.0), bitext("muse", "jpn-eng", 70.0),
        Score("bitext", "minilm", "tatoeba", "test", "deu-eng", "accuracy_src2tgt", 91.0, 100),
    ]
    run_b = [
        Score("transfer", "minilm", "sick_e", "test", "en", "accuracy", 80.5, 500),
        Score("transfer", "minilm", "sick_e", "dev", "all", "dev_accuracy", 79.0, 400),
        Score("transfer", "minilm", "sick_e", "dev", "all", "C", 0.001, 400),
        Score("aspects", "minilm", "sts_aspects", "test", "Frames", "spearman", 40.25, 30),
        Score("aspects", EVIL, "sts_aspects", "test", "Frames", "spearman", 12.0, 30),
    ]
    old = [sts("minilm", "en-en", 10.0)]  # an older evaluation of the same number: latest_results drops it
    return pl.concat([_scores("evalOld", "cfg-Old", old, T0 - timedelta(days=3)),
                      _scores("evalA", "cfg-A", run_a, T0),
                      _scores("evalB", "cfg-B", run_b, T0 + timedelta(hours=1))])


@pytest.fixture
def lineage() -> pl.DataFrame:
    def row(run_id: str, stage: str, dataset: str, table: str, versions: str, version: int) -> dict:
        return {"run_id": run_id, "pipeline": "eval", "stage": stage, "dataset": dataset, "table": table,
                "input_versions": versions, "output_version": version, "config_hash": "cfg-" + run_id[4:],
                "code_version": "abc1234", "rows_in": 10, "rows_computed": 10, "rows_failed": 0, "rows_out": 10,
                "seconds": 1.25, "started_at": T0, "status": "ok", "error": None}

    return pl.DataFrame([
        row("evalA", "evaluate_sts", "eval", "results", INPUT_VERSIONS_A, 4),
        row("evalB", "evaluate_transfer", "eval", "results", json.dumps({"sick_e/triples": 2}), 5),
        row("evalZ", "ingest", "other", "pairs", "{}", 1),
    ])


def _strip_images(text: str) -> str:
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:", text)


def _leaderboard(html_text: str) -> str:
    return re.search(r'<table class="leaderboard">.*?</table>', html_text, re.S).group(0)


def _row(table: str, model: str) -> str:
    return next(r for r in re.findall(r"<tr>.*?</tr>", table, re.S) if f"<td>{model}</td>" in r)


def test_latest_results_keeps_newest_row(results):
    latest = latest_results(results)
    en = latest.filter((pl.col("model") == "minilm") & (pl.col("lang_pair") == "en-en")
                       & (pl.col("metric") == "spearman"))
    assert en["value"].to_list() == [80.0] and en["run_id"].to_list() == ["evalA"]
    assert latest.height == results.height - 1


def test_latest_results_without_task_column():
    old_rows = pl.DataFrame({
        "key": ["k1", "k2", "k3", "k4"], "run_id": ["r1", "r2", "r1", "r1"],
        "created_at": [T0, T0 + timedelta(days=1), T0, T0],
        "model": ["m"] * 4, "dataset": ["d"] * 4, "split": ["test"] * 4,
        "lang_pair": ["en-en", "en-en", "en-en", "en-en"], "metric": ["spearman", "spearman", "pearson", "acc"],
        "value": [1.0, 2.0, float("nan"), 3.0], "n": [5] * 4, "config_hash": ["c"] * 4,
    })
    latest = latest_results(old_rows)
    assert latest.columns == list(RESULT_SCHEMA)
    by_metric = {r["metric"]: r for r in latest.iter_rows(named=True)}
    assert by_metric["spearman"]["task"] == "sts" and by_metric["spearman"]["value"] == 2.0
    assert by_metric["pearson"]["task"] == "sts" and by_metric["pearson"]["value"] is None  # NaN -> undefined
    assert by_metric["acc"]["task"] == "unknown"
    # an old frame lacking optional columns too (no created_at, n, config_hash): still fine, row order decides
    minimal = old_rows.select("model", "dataset", "split", "lang_pair", "metric", "value")
    assert latest_results(minimal).filter(pl.col("metric") == "spearman")["value"].to_list() == [2.0]
    assert latest_results(pl.DataFrame()).height == 0


def test_report_content(results, lineage, tmp_path):
    out = tmp_path / "report"
    paths = render_report(results, lineage, out)
    assert paths.html == out / "report.html" and paths.markdown == out / "report.md"
    assert paths.html.exists() and paths.markdown.exists()
    page = paths.html.read_text(encoding="utf-8")
    text = _strip_images(page)

    board = _leaderboard(page)
    for header in ("STS sample_sts (mono, 3 pairs)", "STS sample_sts (cross, 2 pairs)", "Tatoeba (3 langs)",
                   "Transfer sick_e", "Aspects sts_aspects"):
        assert f"<th>{header}</th>" in board
    minilm, muse = _row(board, "minilm"), _row(board, "muse")
    mono_minilm, mono_muse = (80.0 + 70.0 + 75.5) / 3, (82.0 + 71.0 + 76.0) / 3
    assert f"{mono_minilm:.2f}" == "75.17" and f"{mono_muse:.2f}" == "76.33"
    assert "<td>75.17</td>" in minilm and "<td><strong>76.33</strong></td>" in muse  # best mono in bold
    assert "<td>62.50</td>" in minilm  # cross: mean of 60 and 65
    assert '<span class="undef">undefined</span>' in muse  # cross for muse has an undefined component
    assert f"<td>{(90 + 85 + 60) / 3:.2f}</td>" in minilm and "<td><strong>84.33</strong></td>" in muse
    assert "<td>80.50</td>" in minilm and "<td><strong>40.25</strong></td>" in minilm
    assert '<a href="#run-evalA">evalA</a>, <a href="#run-evalB">evalB</a>' in minilm and "cfg-A, cfg-B" in minilm
    assert "10.00" not in board and "evalOld" not in text  # the older duplicate is gone
    assert not re.search(r"\bnan\b", text, re.I)

    # detail tables carry every number, its run and config; C keeps its precision
    assert "<td>accuracy_src2tgt</td>" in page and "<td>91.00</td>" in page and "<td>0.001</td>" in page
    assert "<th>aspect</th>" in page and "<td>Frames</td>" in page

    # escaping
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page

    # figures: PNGs on disk, embedded in the HTML, referenced by the Markdown
    assert paths.figures and all(p.read_bytes().startswith(PNG_MAGIC) for p in paths.figures)
    names = [p.name for p in paths.figures]
    assert sum(n.startswith("sts-heatmap-") for n in names) == 2  # one per model of sample_sts
    assert sum(n.startswith("bitext-heatmap-") for n in names) == 1
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(uris) == len(paths.figures)
    assert {base64.b64decode(u) for u in uris} == {p.read_bytes() for p in paths.figures}
    md = paths.markdown.read_text(encoding="utf-8")
    refs = re.findall(r"\]\((figures/[^)]+\.png)\)", md)
    assert sorted(refs) == sorted(f"figures/{n}" for n in names)
    assert all((out / r).is_file() for r in refs)
    assert "**76.33**" in md and "&lt;script&gt;" in md and EVIL not in md

    # lineage: one section per run of the shown results, with its input versions
    lineage_part = page[page.index('id="lineage"'):]
    assert 'id="run-evalA"' in lineage_part and 'id="run-evalB"' in lineage_part
    assert INPUT_VERSIONS_A in html.unescape(lineage_part) and "evaluate_transfer" in lineage_part
    assert "evalZ" not in page and "evalOld" not in page


def test_markup_like_text_is_escaped_once(results, lineage, tmp_path):
    """Names, titles and lineage values are text: escaped in the HTML, while the report's own markup is not."""
    amp, quote = "a & b", 'say "hi"'
    renamed = results.with_columns(
        pl.col("model").replace({"minilm": EVIL, "muse": amp}),
        pl.col("dataset").replace({"tatoeba": "<b>tatoeba</b>"}),
        pl.col("run_id").replace({"evalB": "run<1>"}))
    marked_lineage = lineage.with_columns(
        pl.col("run_id").replace({"evalB": "run<1>"}),
        pl.when(pl.col("run_id") == "evalA").then(pl.lit(quote)).otherwise(pl.col("code_version"))
        .alias("code_version"))
    paths = render_report(renamed, marked_lineage, tmp_path / "out", title="<i>results</i> & more")
    page = paths.html.read_text(encoding="utf-8")
    text = _strip_images(page)

    assert "<script" not in page and "<b>" not in page and "<i>" not in page and "run<1>" not in page
    assert "<title>&lt;i&gt;results&lt;/i&gt; &amp; more</title>" in page
    assert "<h1>&lt;i&gt;results&lt;/i&gt; &amp; more</h1>" in page
    board = _leaderboard(page)
    assert "<th>Tatoeba &lt;b&gt;tatoeba&lt;/b&gt; (3 langs)</th>" in board
    evil_row = _row(board, "&lt;script&gt;alert(1)&lt;/script&gt;")
    assert "<td>75.17</td>" in evil_row  # the row keeps its numbers
    assert "<td>a &amp; b</td>" in _row(board, "a &amp; b")
    # a run id with markup: escaped as link text, percent-encoded in the anchor the link points to
    assert '<a href="#run-run%3C1%3E">run&lt;1&gt;</a>' in evil_row and 'id="run-run%3C1%3E"' in page
    assert "<code>say &#34;hi&#34;</code>" in page
    assert "&amp;amp;" not in text and "&amp;lt;" not in text  # nothing escaped twice
    # the report's own markup is markup: tags, classes and the figure data URIs survive unescaped
    assert '<span class="undef">undefined</span>' in page and '<table class="leaderboard">' in page
    assert re.search(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+" alt="', page)
    assert "&lt;td&gt;" not in page and "&lt;a href" not in page and "&lt;strong&gt;" not in page
    # the Markdown escapes the same text its own way
    md = paths.markdown.read_text(encoding="utf-8")
    assert EVIL not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "a &amp; b" in md
    assert "# &lt;i&gt;results&lt;/i&gt; &amp; more" in md


def test_empty_results(tmp_path):
    empty = pl.DataFrame(schema=RESULT_SCHEMA)
    paths = render_report(empty, pl.DataFrame(), tmp_path / "out")
    assert report.NO_RESULTS in paths.html.read_text(encoding="utf-8")
    assert report.NO_RESULTS.split(":")[0] in paths.markdown.read_text(encoding="utf-8")
    assert paths.figures == []
    assert render_report(pl.DataFrame(), pl.DataFrame(), tmp_path / "out2").html.exists()  # not even columns


def test_scatter_panels(tmp_path):
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 40)
    good = ScatterData("minilm", "sample_sts", "test", "en-en", gold + rng.normal(0, 0.5, 40), gold)
    constant = ScatterData("muse", "sample_sts", "test", "en-en", np.full(40, 0.5), gold)
    assert scatter_spearman(constant) is None and fmt_value(scatter_spearman(constant)) == "undefined"
    assert 50 < scatter_spearman(good) <= 100
    with pytest.raises(ValueError):
        ScatterData("m", "d", "s", "en-en", np.zeros(3), np.zeros(4))
    paths = render_report(pl.DataFrame(), pl.DataFrame(), tmp_path / "out", scatters=[good] * 12 + [constant])
    scatters = [p for p in paths.figures if p.name.startswith("scatter-")]
    assert len(scatters) == 2  # 13 panels, at most 12 per figure
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in scatters)


def test_failure_keeps_previous_report(results, lineage, tmp_path, monkeypatch):
    out = tmp_path / "report"
    first = render_report(results, lineage, out, title="first")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def broken(*args, **kwargs):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(report, "plot_sts_heatmap", broken)
    with pytest.raises(RuntimeError, match="plotting failed"):
        render_report(results, lineage, out, title="second")
    monkeypatch.undo()

    def broken_commit(*args, **kwargs):  # fails after the staging directory is fully written
        raise OSError("disk full")

    monkeypatch.setattr(report, "_commit", broken_commit)
    with pytest.raises(OSError, match="disk full"):
        render_report(results, lineage, out, title="third")
    monkeypatch.undo()

    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before and "<title>first</title>" in first.html.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no temp dir left behind


def test_rerender_replaces_report_and_stale_figures(results, lineage, tmp_path):
    out = tmp_path / "report"
    render_report(results, lineage, out)
    (out / "notes.txt").write_text("mine", encoding="utf-8")  # a file of the user's: left alone
    fewer = results.filter(pl.col("task") != "bitext")
    paths = render_report(fewer, lineage, out, title="again")
    assert "<title>again</title>" in paths.html.read_text(encoding="utf-8")
    assert sorted((out / "figures").iterdir()) == sorted(paths.figures)
    assert not any(p.name.startswith("bitext-") for p in paths.figures)
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_newest_aspects_evaluation_defines_the_set(tmp_path):
    """An aspect an older evaluation scored and the newest no longer does (wikification, constant on the data: no
    graph has a :wiki) does not linger: the aspects mean is defined."""
    def aspect(name: str, value: float | None) -> Score:
        return Score("aspects", "m", "d", "test", name, "spearman", value, 30)

    results = pl.concat([_scores("r1", "c1", [aspect("frames", 40.0), aspect("wikification", None)], T0),
                         _scores("r2", "c2", [aspect("frames", 50.0)], T0 + timedelta(hours=1))])
    current = report.current_aspects(latest_results(results))
    assert current["lang_pair"].to_list() == ["frames"] and current["value"].to_list() == [50.0]
    page = render_report(results, pl.DataFrame(), tmp_path / "out").html.read_text(encoding="utf-8")
    board = _leaderboard(page)
    assert "<td>50.00</td>" in _row(board, "m") and "undefined" not in board


def test_phenomenon_tags_of_the_bundled_sample():
    from amrsim.stages.evaluate.report_views import fitted_range, phenomenon_tags

    pairs = pl.DataFrame({"item_id": ["p001", "p020"], "source_file": ["sts_pairs.tsv"] * 2})
    tags = phenomenon_tags(pairs)
    assert tags["p001"] == "role_swap" and tags["p020"] == "negation"
    assert phenomenon_tags(pairs.with_columns(pl.lit("mine.tsv").alias("source_file"))) == {}
    assert fitted_range([69.0, 80.0], include_zero=False) == (68, 80)  # 69 and 80 are far apart on this scale


@pytest.mark.slow
def test_report_module_does_not_import_matplotlib():
    import subprocess
    import sys

    code = "import sys, amrsim.stages.evaluate.report; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=ROOT)
    assert done.stdout.strip() == "False"


# --- the page in a real browser ------------------------------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=5000"]


def _browser() -> str:
    import os
    import shutil
    import time
    from pathlib import Path

    # .ci/run installs chromium in the background while the suite runs: wait for that install, not fail before it
    installing = Path(os.environ.get("AMRSIM_CHROMIUM_INSTALL", "/nonexistent"))
    deadline = time.monotonic() + 600
    while installing.is_file() and installing.read_text().strip() == "running" and time.monotonic() < deadline:
        time.sleep(2)
    found = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p),
                 None)
    if found is None:
        pytest.skip("no headless browser: chromium is not installed (apt-get install -y chromium; .ci/run does)")
    return found


def _dom(browser: str, page: str, tmp_path, query: str = "") -> str:
    """The page's DOM after its onload script ran (chromium --dump-dom), a fresh profile each time."""
    import subprocess
    from pathlib import Path

    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    done = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                           Path(page).resolve().as_uri() + query], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and "<body" in done.stdout, done.stderr[-2000:]
    return done.stdout


def _board_rows(dom: str) -> dict[str, bool]:
    """model -> shown, for the leaderboard's body rows of a dumped DOM."""
    body = re.search(r'<table class="leaderboard">.*?<tbody>(.*?)</tbody>', dom, re.S).group(1)
    rows = {}
    for attrs, inner in re.findall(r"<tr([^>]*)>(.*?)</tr>", body, re.S):
        model = html.unescape(re.sub(r"<[^>]+>", "", re.search(r"<td[^>]*>(.*?)</td>", inner, re.S).group(1)))
        rows[model] = "hidden" not in attrs
    return rows


@pytest.mark.slow
def test_report_in_a_browser(results, lineage, tmp_path, monkeypatch):
    """The page in headless chromium: its script runs without error, every section the contents list exists,
    charts are drawn, and the filters hide exactly the rows and columns they should."""
    from amrsim.stages.evaluate import report_views
    from amrsim.stages.evaluate.report_views import PhenomenonRow

    browser = _browser()
    phenomena = [PhenomenonRow("sample_sts", "negation", 20, 0.55, {"minilm": 0.77, "muse": 0.8}, 0.76, "negation",
                               0.15),
                 PhenomenonRow("sample_sts", "role_swap", 20, 0.56, {"minilm": 0.99, "muse": 0.97}, 0.8, "srl", 0.74),
                 PhenomenonRow("sample_sts", "paraphrase", 20, 0.84, {"minilm": 0.77}, 0.38)]
    piped = lineage.with_columns(pl.when(pl.col("run_id") == "evalB").then(pl.lit("bench"))
                                 .otherwise(pl.col("pipeline")).alias("pipeline"))
    page = render_report(results, piped, tmp_path / "out", phenomena=phenomena).html

    dom = _dom(browser, page, tmp_path)
    assert 'data-report-ready="yes"' in dom, "the page's script did not finish"
    assert re.search(r'<pre id="js-errors" hidden="">\s*</pre>', dom), "the page recorded a script error"
    toc = re.search(r'<nav class="toc".*?</nav>', dom, re.S).group(0)
    anchors = re.findall(r'href="#([^"]+)"', toc)
    assert {"leaderboard", "phenomena", "aspects", "details", "provenance", "lineage"} <= set(anchors)
    assert all(f'id="{a}"' in dom for a in anchors)
    assert dom.count("<svg") >= 2 and "role swap" in dom  # the phenomenon chart and the aspects chart
    assert _board_rows(dom) == {"minilm": True, "muse": True, EVIL: True}
    assert "3 of 3 models shown" in dom

    muse_only = _dom(browser, page, tmp_path, "?model=mus")
    assert _board_rows(muse_only) == {"minilm": False, "muse": True, EVIL: False}
    assert "1 of 3 models shown" in muse_only
    bench = _dom(browser, page, tmp_path, "?pipeline=bench")  # runs of evalB: minilm's transfer, EVIL's aspects
    assert _board_rows(bench) == {"minilm": True, "muse": False, EVIL: True}
    sts_only = _dom(browser, page, tmp_path, "?tasks=sts")
    head = re.search(r'<table class="leaderboard">\s*<thead>(.*?)</thead>', sts_only, re.S).group(1)
    shown = [re.sub(r"<[^>]+>", "", h) for a, h in re.findall(r"<th([^>]*)>(.*?)</th>", head) if "hidden" not in a]
    assert shown == ["model", "STS sample_sts (mono, 3 pairs)", "STS sample_sts (cross, 2 pairs)", "runs and configs"]
    cross = _dom(browser, page, tmp_path, "?columns=cross")
    head = re.search(r'<table class="leaderboard">\s*<thead>(.*?)</thead>', cross, re.S).group(1)
    shown = [re.sub(r"<[^>]+>", "", h) for a, h in re.findall(r"<th([^>]*)>(.*?)</th>", head) if "hidden" not in a]
    assert shown == ["model", "STS sample_sts (cross, 2 pairs)", "runs and configs"]

    # a broken script is caught: the error is in the page and the ready mark is missing
    monkeypatch.setattr(report_views, "FILTER_JS", report_views.FILTER_JS.replace("apply();\n  }", "apply(;\n  }"))
    monkeypatch.setattr(report, "FILTER_JS", report_views.FILTER_JS)
    broken = _dom(browser, render_report(results, piped, tmp_path / "broken").html, tmp_path)
    assert 'data-report-ready="yes"' not in broken
