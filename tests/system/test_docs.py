"""The docs as a user reads them: every relative link and `#anchor` in README.md and docs/ resolves, every shell and
Python block either runs here or says on its fence why not (```` ```bash skip:long ````; the convention is in
docs/architecture.md, "Code blocks in the docs"), shell blocks quote `$DATA` so the shell expands it, and a
pipeline entry pasted into pipelines.yaml as shown loads."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT, SHARED_DATA

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)(.*)$")
SHELL, PYTHON = {"bash", "sh", "shell", "console"}, {"python", "py"}
# what a fence may say after its language; each word's meaning is in docs/architecture.md
SKIP_REASONS = {"long", "needs-gpu", "needs-server", "needs-network", "needs-warehouse", "illustrative"}
# pages whose blocks are not marked yet (others are editing them): every block there is listed as skipped
UNMARKED_PAGES: dict[str, str] = {}  # page -> why its blocks are not marked yet (none now)
RUN_TAGS = {"needs-data"}
BLOCK_SECONDS = 120


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# --- markdown: headings, anchors, links, code blocks ----------------------------------------------------------------

def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3) + m.group(4):
                fence = None
            continue
        if m:
            fence = m.group(2)
            continue
        yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: links to their text, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path, cache: dict[Path, set[str]] = {}) -> set[str]:  # noqa: B006 - a cache by design
    """Every anchor of a markdown file: its headings' slugs (a repeated one gets -1, -2, ...) and `<a id=...>`."""
    if path not in cache:
        seen: dict[str, int] = {}
        found: set[str] = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
            if m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


LINK = re.compile(r"\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")


def links(path: Path) -> Iterator[tuple[int, str]]:
    """(line, target) of every markdown link outside code (fences and inline code spans)."""
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            yield number, m.group(1)


def broken_link(source: Path, target: str) -> str | None:
    """Why a relative link does not resolve, or None; web links and mail addresses are not checked here."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
        return None
    file_part, _, anchor = target.partition("#")
    path = (source.parent / file_part).resolve() if file_part else source
    if not path.exists():
        return f"no file {file_part}"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"no heading or anchor '#{anchor}' in {rel(path)}"
    return None


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    code: str
    marker: str | None  # the words after the language on the fence (`skip:long`), if any

    @property
    def id(self) -> str:
        return f"{rel(self.path)}:{self.line}"

    @property
    def tags(self) -> list[str]:
        return (self.marker or "").replace(":", " ").split()


def blocks(path: Path) -> Iterator[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and not lines[j].strip().strip(fence[0])):
            j += 1
        code = "\n".join(line.removeprefix(indent) for line in lines[i + 1:j])
        yield Block(path, i + 1, lang, code + "\n", m.group(4).strip() or None)
        i = j + 1


ALL_BLOCKS = [b for path in DOCS for b in blocks(path)]
CODE_BLOCKS = [b for b in ALL_BLOCKS if b.lang in SHELL | PYTHON]


def classify(block: Block) -> tuple[str, str]:
    """('run', '') for a block that runs everywhere; ('run-data', 'needs-data') for one that runs where $DATA exists;
    ('skip', reason) for one listed as skipped."""
    tags = block.tags
    if not tags and rel(block.path) in UNMARKED_PAGES:
        return "skip", f"unmarked: {UNMARKED_PAGES[rel(block.path)]}"
    if not tags:
        return "run", ""
    if tags[0] == "skip":
        return "skip", " ".join(tags[1:])
    return "run-data", " ".join(tags)


# --- links ---------------------------------------------------------------------------------------------------------

def test_every_relative_link_and_anchor_resolves():
    problems = [f"{rel(path)}:{line}: [{target}]: {why}"
                for path in DOCS for line, target in links(path) if (why := broken_link(path, target))]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_link_checker_sees_github_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Quickstart: the two commands\n## `amrsim query`: SQL\n## Notes\n## Notes\n"
                    "<a id=\"config-x\"></a>\n```\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"quickstart-the-two-commands", "amrsim-query-sql", "notes", "notes-1", "config-x"}
    assert broken_link(page, "#notes-1") is None
    assert broken_link(page, "#not-a-heading") is not None
    assert broken_link(page, "missing.md") == "no file missing.md"
    assert broken_link(page, "https://example.org/#anything") is None


# --- code blocks: markers ------------------------------------------------------------------------------------------

def test_every_marker_names_a_known_reason():
    problems = []
    for b in ALL_BLOCKS:
        if b.marker is None:
            continue
        tags = b.tags
        if b.lang not in SHELL | PYTHON:
            problems.append(f"{b.id}: '{b.marker}' on a {b.lang or 'plain'} block (only shell and Python blocks "
                            f"run)")
        elif tags[:1] == ["skip"]:
            if len(tags) < 2 or tags[1] not in SKIP_REASONS:
                problems.append(f"{b.id}: 'skip' needs one of {sorted(SKIP_REASONS)}, got {b.marker!r}")
        elif not tags or not set(tags) <= RUN_TAGS:
            problems.append(f"{b.id}: unknown fence words {b.marker!r} (skip:REASON, or {sorted(RUN_TAGS)})")
    assert not problems, "\n".join(problems)


def test_blocks_that_read_data_say_so():
    """A block that reads $DATA runs only where ../shared/data exists: it must be marked (needs-data, or skipped)."""
    unmarked = [b.id for b in CODE_BLOCKS if "$DATA" in b.code.replace("export DATA=", "")
                and classify(b)[0] == "run"]
    assert not unmarked, f"blocks reading $DATA whose fence says neither needs-data nor skip:REASON: {unmarked}"


def single_quoted_variables(code: str) -> list[str]:
    """Shell words in single quotes that hold `$NAME`: the shell passes them on unexpanded."""
    out = []
    for line in code.splitlines():
        line = re.sub(r"\s#\s.*$", "", line)  # a comment
        out += [m.group(0) for m in re.finditer(r"'[^']*\$\{?[A-Za-z_][^']*'", line)]
    return out


def test_shell_blocks_quote_variables_so_the_shell_expands_them():
    problems = [f"{b.id}: {word} (the shell does not expand $ in single quotes: use double quotes)"
                for b in CODE_BLOCKS if b.lang in SHELL for word in single_quoted_variables(b.code)]
    assert not problems, "\n".join(problems)


def test_single_quote_check_itself():
    assert single_quoted_variables("amrsim evaluate bitext --file '$DATA/tatoeba/tatoeba.*-eng.tsv'")
    assert not single_quoted_variables('amrsim evaluate bitext --file "$DATA/tatoeba/tatoeba.*-eng.tsv"')
    assert not single_quoted_variables("amrsim query \"SELECT 1\" | jq '.rows[]'")


# --- code blocks: running them -------------------------------------------------------------------------------------

def block_env(work: Path) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PREFECT_HOME": str(work / ".prefect"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "DATA": str(SHARED_DATA), "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def run_block(block: Block, work: Path) -> subprocess.CompletedProcess[str]:
    """Run a block in `work` (a fresh directory holding links to the checkout's .venv and benchmarks/, as a reader's
    clone would): shell blocks in bash with -e (a failing command fails the block), Python with the venv's
    interpreter."""
    for name in (".venv", "benchmarks"):
        if (ROOT / name).exists() and not (work / name).exists():
            (work / name).symlink_to(ROOT / name)
    if block.lang in PYTHON:
        cmd = [sys.executable, "-c", block.code]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    return subprocess.run(cmd, cwd=work, env=block_env(work), capture_output=True, text=True, timeout=BLOCK_SECONDS)


def check_block(block: Block, tmp_path: Path) -> None:
    done = run_block(block, tmp_path)
    assert done.returncode == 0, (f"{block.id} failed (exit {done.returncode}) as a reader runs it:\n{block.code}\n"
                                  f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")


RUN = [b for b in CODE_BLOCKS if classify(b)[0] == "run"]
RUN_DATA = [b for b in CODE_BLOCKS if classify(b)[0] == "run-data"]
SKIPPED = [b for b in CODE_BLOCKS if classify(b)[0] == "skip"]


@pytest.mark.slow  # a subprocess each
@pytest.mark.parametrize("block", RUN, ids=lambda b: b.id)
def test_block_runs(block, tmp_path):
    check_block(block, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN_DATA, ids=lambda b: b.id)
def test_data_block_runs(block, tmp_path):
    if "needs-data" in block.tags and not SHARED_DATA.exists():
        pytest.skip(f"{block.id}: reads $DATA, and {SHARED_DATA} is absent")
    check_block(block, tmp_path)


WAREHOUSE_BLOCKS = [b for b in CODE_BLOCKS if classify(b) == ("skip", "needs-warehouse")]


@pytest.fixture(scope="module")
def demo_directory(tmp_path_factory) -> Path:
    """A reader's clone after `make run` (the demo pipeline into ./warehouse) and the MTEB export that
    evaluation.md runs before reading it: where the `needs-warehouse` blocks are meant to run."""
    work = tmp_path_factory.mktemp("demo")
    (work / "pipelines.yaml").write_text((ROOT / "pipelines.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    for args in (["run"], ["results", "export", "--format", "mteb", "--out", "mteb-cache"]):
        done = subprocess.run([sys.executable, "-m", "amrsim.cli", *args], cwd=work, env=block_env(work),
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, f"amrsim {' '.join(args)}: {done.stderr[-3000:]}"
    return work


@pytest.mark.slow
@pytest.mark.long  # the demo pipeline first: `make test-long`
@pytest.mark.parametrize("block", WAREHOUSE_BLOCKS, ids=lambda b: b.id)
def test_warehouse_block_runs_after_the_demo(block, demo_directory):
    check_block(block, demo_directory)


@pytest.mark.parametrize("block", SKIPPED, ids=lambda b: b.id)
def test_block_not_run(block):
    """Listed with its reason in `pytest -ra`: the blocks this suite does not run, and why."""
    pytest.skip(f"{block.id}: skip:{classify(block)[1]}")


def test_block_counts():
    """The inventory, printed with -s: how many blocks run and why the others do not."""
    reasons: dict[str, int] = {}
    for b in SKIPPED:
        reasons[classify(b)[1].split()[0]] = reasons.get(classify(b)[1].split()[0], 0) + 1
    print(f"\ndocs code blocks: {len(CODE_BLOCKS)}; run: {len(RUN)}, run where $DATA exists: {len(RUN_DATA)}, "
          f"skipped: {len(SKIPPED)} {reasons}")
    assert RUN, "no block of the docs runs"
    assert len(RUN) + len(RUN_DATA) + len(SKIPPED) == len(CODE_BLOCKS)


# --- pipeline entries pasted as shown ------------------------------------------------------------------------------

PIPELINE_ENTRIES = [b for b in ALL_BLOCKS if b.lang == "yaml" and re.search(r"^\s+datasets:", b.code, re.M)]


@pytest.mark.parametrize("block", PIPELINE_ENTRIES, ids=lambda b: b.id)
def test_pipeline_entry_pasted_into_pipelines_yaml_loads(block, tmp_path):
    """A reader appends the block to the repository's pipelines.yaml (whose last key is `pipelines:`), creates the
    files it names with the columns it maps, and loads it: no duplicate key, every key valid."""
    from amrsim.config import load_config, load_yaml_value

    config = tmp_path / "pipelines.yaml"
    shutil.copy(ROOT / "pipelines.yaml", config)
    with config.open("a", encoding="utf-8") as f:
        f.write("\n" + block.code)
    try:
        whole = load_yaml_value(config.read_text(encoding="utf-8"))
    except Exception as e:
        pytest.fail(f"{block.id}: pasted into pipelines.yaml as shown, it does not load: {e}")
    before = load_yaml_value((ROOT / "pipelines.yaml").read_text(encoding="utf-8"))
    added = set(whole["pipelines"]) - set(before["pipelines"])
    assert added, f"{block.id}: pasted as shown, it adds no pipeline"
    assert set(before["pipelines"]) <= set(whole["pipelines"]), f"{block.id}: pasted as shown, it drops pipelines"
    for name in added:  # the files it names, with the header its column mapping reads
        for dataset in whole["pipelines"][name].get("datasets", {}).values():
            header = {"sentence1": "sentence1", "sentence2": "sentence2", "score": "score",
                      **dataset.get("columns", {})}
            path = tmp_path / dataset["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\t".join(header.values()) + "\n" + "\t".join(["a b", "c d", "1"] + ["x"] *
                                                                            (len(header) - 3)) + "\n")
        load_config(config, pipeline=name)  # every key valid; raises naming the key otherwise
