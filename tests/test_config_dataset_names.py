"""Dataset names: a `--set datasets.<name>.path=...` override applies to the run's pipeline even when another
pipeline defines the same dataset; the file as written must still be consistent; the `file_` prefix is kept for files
evaluated one-off, so a pipeline's dataset can never share a name with one; the docs' example names no shipped
dataset."""

from __future__ import annotations

import re
import textwrap

import pytest
import yaml

from amrsim.config import load_config
from amrsim.errors import ConfigError
from tests.helpers import ROOT

TWO = """
pipelines:
  a:
    datasets:
      d: {path: one.tsv, kind: pairs}
  b:
    datasets:
      d: {path: one.tsv, kind: pairs}
"""


def test_a_path_override_applies_to_the_run_pipeline_although_another_pipeline_defines_the_dataset(write_config):
    path = write_config(TWO)
    cfg = load_config(path, overrides={"datasets.d.path": "two.tsv"}, pipeline="a")
    assert cfg.project.pipelines["a"].datasets["d"].path == "two.tsv"
    assert cfg.project.pipelines["b"].datasets["d"].path == "one.tsv"  # the other pipeline as written


def test_the_file_as_written_must_still_define_a_dataset_one_way(write_config):
    path = write_config(TWO.replace("d: {path: one.tsv", "d: {path: other.tsv", 1))
    with pytest.raises(ConfigError, match="define dataset 'd' differently"):
        load_config(path, overrides={"datasets.d.path": "one.tsv"}, pipeline="b")  # b's override: a and b differ
    with pytest.raises(ConfigError, match="define dataset 'd' differently"):
        load_config(path, overrides={"datasets.e": {"path": "e.tsv", "kind": "pairs"}}, pipeline="b")


def test_a_pipeline_dataset_cannot_take_the_one_off_prefix(write_config):
    path = write_config("pipelines:\n  a:\n    datasets:\n      file_x: {path: one.tsv, kind: pairs}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    line = str(err.value)
    assert "\n" not in line and "datasets" in line and "file_x" in line and "reserved" in line


def _shipped_datasets() -> set[str]:
    raw = yaml.safe_load((ROOT / "pipelines.yaml").read_text(encoding="utf-8"))
    return {name for pipe in raw["pipelines"].values() for name in (pipe.get("datasets") or {})}


def test_the_docs_example_pipeline_names_no_shipped_dataset():
    """A user copying docs/pipeline.md's example into the shipped pipelines.yaml would otherwise define a shipped
    dataset a second time, differently."""
    text = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(textwrap.dedent(b)) for b in re.findall(r"```yaml[^\n]*\n(.*?)```", text, re.S)]
    pipelines = [b.get("pipelines", b) for b in blocks if isinstance(b, dict)]  # a whole file, or its pipelines
    defined = {name for p in pipelines for pipe in p.values() if isinstance(pipe, dict)
               for name in (pipe.get("datasets") or {})}
    assert defined and not defined & _shipped_datasets(), defined & _shipped_datasets()
