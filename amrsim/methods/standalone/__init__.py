"""Module code that amrsim writes into a run folder, so the folder loads with sentence-transformers'
`trust_remote_code=True` where amrsim is not installed (as Hub models with custom code do). Each file imports only
torch, transformers, sentence-transformers and numpy; amrsim reads them as text (`source`), never imports them."""

from __future__ import annotations

from pathlib import Path

PEAR = "modeling_amrsim_pear.py"
MEANING = "modeling_amrsim_meaning.py"
COMMON = "modeling_amrsim_common.py"  # imported by the others (a relative import: it travels with them)
FILES = (PEAR, MEANING, COMMON)

__all__ = ["COMMON", "FILES", "MEANING", "PEAR", "source"]


def source(name: str) -> str:
    """The text of one of FILES, as amrsim writes it into a run folder."""
    if name not in FILES:
        raise ValueError(f"no standalone module {name!r}; known: {', '.join(FILES)}")
    return (Path(__file__).parent / name).read_text(encoding="utf-8")
