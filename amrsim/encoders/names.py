"""Encoder names, parsed once: `minilm` / `muse` (packaged), `hf:<hub id or path>[#mean|#cls]`, and a trained run
`<method>:<run id>|latest`. Text only: nothing here reads the models root or loads a model."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PACKAGED = ("minilm", "muse")
POOLINGS = ("mean", "cls")


def is_local_path(ident: str) -> bool:
    """`hf:` names a directory when it is absolute or starts with `.` or `~`; otherwise a hub id (org/model)."""
    return ident.startswith((".", "~")) or Path(ident).is_absolute()


def split_hf_name(name: str) -> tuple[str, str | None]:
    """'hf:org/model#cls' -> ('org/model', 'cls'); no suffix -> sentence-transformers decides the pooling."""
    ident = name.removeprefix("hf:")
    ident, _, pooling = ident.partition("#")
    if pooling and pooling not in POOLINGS:
        raise ValueError(f"encoder '{name}': pooling '{pooling}' unknown; use #mean or #cls")
    if not ident:
        raise ValueError(f"encoder '{name}': empty model id or path after 'hf:'")
    return ident, pooling or None


@dataclass(frozen=True)
class EncoderName:
    """An encoder name, parsed once for every caller: `minilm` / `muse` (packaged), `hf:<hub id or path>[#mean|#cls]`
    (`ident`, `pooling`) or a trained run `<method>:<run id>|latest` (`method`, `run`)."""

    text: str
    kind: Literal["packaged", "hf", "trained"]
    ident: str = ""
    pooling: str | None = None
    method: str = ""
    run: str = ""

    @property
    def trained(self) -> bool:
        return self.kind == "trained"

    @property
    def latest(self) -> bool:
        return self.trained and self.run == "latest"

    @property
    def hub_id(self) -> str | None:
        """The Hugging Face Hub id of an `hf:` name that is not a local path; None otherwise."""
        return self.ident if self.kind == "hf" and not is_local_path(self.ident) else None


TRAINED_NAME = re.compile(r"^([a-z][a-z0-9_]*):([\w.-]+)$")


def parse_name(name: str) -> EncoderName:
    """`name` parsed (`ValueError` naming the known forms when it is none of them)."""
    if name in PACKAGED:
        return EncoderName(name, "packaged")
    if name.startswith("hf:"):
        ident, pooling = split_hf_name(name)
        return EncoderName(name, "hf", ident=ident, pooling=pooling)
    match = TRAINED_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"unknown encoder '{name}'; use minilm, muse, hf:<hub id or path>[#mean|#cls] or "
                         "<method>:<run id>|latest")
    return EncoderName(name, "trained", method=match[1], run=match[2])


def is_trained_name(name: str) -> bool:
    """Whether `name` names a trained run (`<method>:<run id>|latest`)."""
    return TRAINED_NAME.fullmatch(name) is not None and not name.startswith("hf:")


def is_latest_name(name: str) -> bool:
    """Whether `name` is `<method>:latest`, a name whose run changes when a newer one is trained."""
    return is_trained_name(name) and parse_name(name).latest
