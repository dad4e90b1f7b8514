"""Fingerprints of model directories: a digest of the files a model loads, part of its model id (and so of every
embedding and result key), so cached vectors and stored results follow the weights, not the name: a run trained again
under its id, or a local model directory whose files change, gets new keys."""

from __future__ import annotations

import json
import os
from pathlib import Path

from amrsim.errors import AmrsimError
from amrsim.files import atomic_json, file_digest
from amrsim.warehouse.keys import content_key

__all__ = ["DIGESTS", "directory_fingerprint"]

DIGESTS = ".amrsim-digests.json"  # in a trained run: each file's content digest by its stat stamp, read next time
# what a run directory holds besides its model: the card (rewritten when results are stored), the request it
# answered, the training checkpoint (removed when the run finishes) and logs; hidden names (this cache, temporary
# files, .git) are never part of a model either
NOT_MODEL = ("README.md", "request.json")
NOT_MODEL_DIRS = ("checkpoint",)

_KNOWN: dict[tuple[str, ...], str] = {}  # (path, *stamp) -> content digest, for the process


def _model_files(directory: Path) -> list[Path]:
    """The files under `directory` a model may load, sorted; linked folders are followed as the loaders follow
    them, each real folder once (a link to a folder above would loop)."""
    found, seen = [], set()
    for folder, dirs, files in os.walk(directory, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.startswith(NOT_MODEL_DIRS))
        found += [Path(folder) / f for f in files
                  if not f.startswith(".") and f not in NOT_MODEL and not f.endswith(".log")]
    return sorted(found)


def directory_fingerprint(directory: Path | str, keep: bool = False) -> str:
    """A digest (16 hex chars) of the content of every model file under `directory` and its path there. Each file's
    sha256 is computed once per stamp (size, modification and change times, inode: a file written again, even to
    the same size and time, has another): kept for the process, and with `keep` (a trained run's own directory) in
    `DIGESTS` there, so other processes read it instead of hashing the weights again. A directory that cannot take
    that file (read-only, another user's) is hashed once per process."""
    directory = Path(directory)
    stored = _read_digests(directory / DIGESTS) if keep else {}
    digests: dict[str, list] = {}
    for path in _model_files(directory):
        st = path.stat()
        rel = path.relative_to(directory).as_posix()
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        entry = stored.get(rel)
        known = (str(path), *map(str, stamp))
        if known in _KNOWN:
            digest = _KNOWN[known]
        elif isinstance(entry, list) and len(entry) == len(stamp) + 1 and entry[:-1] == stamp:
            digest = str(entry[-1])
        else:
            digest = file_digest(path)
        _KNOWN[known] = digest
        digests[rel] = [*stamp, digest]
    if keep and digests != stored:
        try:
            atomic_json(directory / DIGESTS, digests)
        except (OSError, AmrsimError):  # read-only or not ours: the digests are computed again per process
            pass
    return content_key("model files", sorted((rel, d[-1]) for rel, d in digests.items()))[:16]


def _read_digests(path: Path) -> dict:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
