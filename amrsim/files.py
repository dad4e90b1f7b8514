"""Files written whole or not at all."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: Path | str, write: Callable[[Path], object]) -> None:
    """`write(tmp)` to a temporary file next to `path`, then rename it over `path`: readers see the old file or the
    new one, never half of one. If writing or the rename fails, the temporary file is removed and the error raised;
    `path` is left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
