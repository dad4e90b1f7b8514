"""docs/configuration.md is generated from the config models and must match them."""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import BaseModel, Field

from amrsim.config import ProjectConfig
from amrsim.config_doc import describe, render, walk

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = "python -m amrsim.config_doc > docs/configuration.md"


class _Documented(BaseModel):
    """A model whose fields are described the ways config.py describes them."""

    plain: int = 1  # a trailing comment
    # a comment line above,
    # continued
    above: str = "x"
    described: bool = Field(default=True, description="from Field(description=...)")
    spread: list[int] = Field(
        default_factory=list, min_length=0)  # a comment on the statement's last line
    bare: float = 0.5


def test_configuration_reference_is_current():
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    generated = render()
    diff = "".join(difflib.unified_diff(committed.splitlines(True), generated.splitlines(True),
                                        "docs/configuration.md (committed)", "generated", n=1))
    assert committed == generated, f"docs/configuration.md is out of date; rerun `{REGENERATE}`:\n{diff[:3000]}"


def test_every_key_of_every_config_model_has_a_row():
    text = render()
    for model in walk(ProjectConfig):
        for name in model.model_fields:
            assert f"| `{name}` |" in text, f"{model.__name__}.{name} has no row in the configuration reference"
    for heading in ("### `s3bert`", "### `mse_amr`", "### `dueam`", "### `pear`", "### `meaning`",
                    "#### `pear`: `SearchParams`"):
        assert heading in text


def test_descriptions_come_from_comments_and_field_descriptions():
    assert describe(_Documented, "plain") == "a trailing comment"
    assert describe(_Documented, "above") == "a comment line above, continued"
    assert describe(_Documented, "described") == "from Field(description=...)"
    assert describe(_Documented, "spread") == "a comment on the statement's last line"
    assert describe(_Documented, "bare") == ""
