"""Terminal output prints text as it is: cell values, titles and messages are never read as rich markup or emoji
codes (`[/quote]` used to crash the table, `[bold]OK[/bold] :x:` printed as a bold `OK ❌`)."""

from __future__ import annotations

import io

import polars as pl
import pytest

from amrsim.config import DatasetConfig
from amrsim.console import console, frame_table, progress_bar, summary_table
from amrsim.stages.ingest import ingest_tables
from tests.helpers import one_line_error, run_cli

HOSTILE = ["[/quote]", "[bold]OK[/bold] :x:", "[link=file:///etc/passwd]x[/link]", "[red", ":thumbs_up:"]


def _rendered(*renderables) -> str:
    with console.capture() as capture:
        for r in renderables:
            console.print(r)
    return capture.get()


def test_tables_titles_and_messages_print_text_literally():
    frame = pl.DataFrame({"x": HOSTILE})
    out = _rendered(frame_table(frame, "[/b] title :x:"), summary_table([{"stage": s} for s in HOSTILE], "[i]s"),
                    "plain [/quote] message :x:")
    for text in [*HOSTILE, "[/b] title :x:", "[i]s", "plain [/quote] message :x:"]:
        assert text in out
    assert "❌" not in out and "👍" not in out


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_descriptions_are_not_markup():
    terminal = FakeTerminal()  # the rich bar: what a user at a terminal sees
    with progress_bar(1000, "[/quote] :x:", stream=terminal) as advance:
        advance(1000)
    assert "[/quote] :x:" in terminal.getvalue() and "❌" not in terminal.getvalue()  # and no MarkupError


@pytest.mark.slow
def test_query_prints_markup_like_cells_literally(tmp_path):
    for text in ("[/quote]", "[bold]OK[/bold] :x:"):
        proc = run_cli(tmp_path, "query", f"SELECT '{text}' AS x")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"│ {text} │" in proc.stdout
    failed = run_cli(tmp_path, "query", "SELECT error('[/quote] :x:')")
    assert one_line_error(failed) == "error: query failed: Invalid Input Error: [/quote] :x:"


@pytest.mark.slow
def test_an_ingested_sentence_with_markup_keeps_its_table_listable(tmp_path, wh, write_tsv):
    path = write_tsv("d.tsv", ["sentence1", "sentence2", "score"],
                     [["a [/quote] b", "[bold]OK[/bold] :x:", "1"], ["c", "d", "2"]])
    ds = DatasetConfig(path=str(path), kind="pairs", lang="en",
                       columns={"sentence1": "sentence1", "sentence2": "sentence2", "score": "score"})
    ingest_tables(wh, "d", ds, path, "r1")
    status = run_cli(tmp_path, "status")
    assert status.returncode == 0 and "d.sentences" in status.stdout, status.stderr[-2000:]
    listed = run_cli(tmp_path, "query", "SELECT text FROM d.sentences ORDER BY text")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "│ a [/quote] b " in listed.stdout and "│ [bold]OK[/bold] :x: " in listed.stdout


def test_control_characters_in_cells_reach_the_terminal_as_text():
    clear, clipboard = "\x1b[2Jx", "\x1b]52;c;aGk=\x07"  # clear the screen; OSC 52: set the clipboard
    frame = pl.DataFrame({"c\x1b[31m": [clear], "osc": [clipboard], "text": ["a\tb ü"]})
    out = _rendered(frame_table(frame, "t\r"))
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "\\x1b[2Jx" in out and "\\x1b]52;c;aGk=\\x07" in out and "c\\x1b[31m" in out and "ü" in out
