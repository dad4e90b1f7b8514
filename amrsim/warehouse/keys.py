"""Content keys: stable hashes of a row's inputs and the stage config that produced it, and fingerprints of the model
directories among those inputs."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

from amrsim.errors import AmrsimError
from amrsim.files import atomic_json, file_digest

try:
    from amrsim.warehouse import _keys
except ImportError:  # the extension is optional (it needs OpenSSL's headers to build)
    _keys = None

_SEP = "\x1f"  # unit separator: cannot occur in a JSON-encoded part, so parts never run together


def content_key(*parts: Any) -> str:
    """Hex sha256 (first 32 chars) of the JSON encoding of each part; equal inputs give equal keys forever."""
    h = hashlib.sha256()
    for part in parts:
        h.update(_encode(part))
        h.update(_SEP.encode())
    return h.hexdigest()[:32]


def content_keys(rows: Iterable[Sequence[Any]], prefix: Sequence[Any] = (), suffix: Sequence[Any] = ()) -> list[str]:
    """`content_key(*prefix, *row, *suffix)` for every row, encoding the fixed parts once (one hash state copied per
    row): the same keys at a fraction of the cost for large batches."""
    sep = _SEP.encode()
    head = hashlib.sha256()
    for part in prefix:
        head.update(_encode(part) + sep)
    tail = b"".join(_encode(part) + sep for part in suffix)
    keys = []
    for row in rows:
        h = head.copy()
        h.update(b"".join(_encode(part) + sep for part in row) + tail)
        keys.append(h.hexdigest()[:32])
    return keys


def text_keys(columns: Sequence[Sequence[str]], prefix: Sequence[Any] = (), suffix: Sequence[Any] = ()
              ) -> list[str]:
    """`content_keys` of rows whose parts are all strings, given as columns (row i: each column's i-th string):
    the same keys, hashed in one C loop (OpenSSL's SHA-256) where the optional extension is built. A cell that is
    not a str, or not valid Unicode, takes the Python path, which names the problem as `content_keys` does."""
    if _keys is not None:
        sep = _SEP.encode()
        head = b"".join(_encode(part) + sep for part in prefix)
        tail = b"".join(_encode(part) + sep for part in suffix)
        try:
            return _keys.text_keys(head, [c if type(c) is list else list(c) for c in columns], tail)
        except (TypeError, UnicodeEncodeError):
            pass
    return content_keys(zip(*columns, strict=True), prefix=prefix, suffix=suffix)


def _encode(part: Any) -> bytes:
    if type(part) is str:  # what json.dumps gives a string, without building an encoder per call (a pair's graphs)
        return encode_basestring(part).encode("utf-8")
    return json.dumps(part, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")


def config_hash(config: Any) -> str:
    """Hash of a stage's config (a pydantic model or plain data), recorded in lineage and row keys."""
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    return content_key("config", config)


def file_stat_digest(path: Path | str) -> str | None:
    """A cheap change marker of a file (size and modification time, not its bytes) for lineage; None when the path
    is not a file (a hub dataset)."""
    p = Path(str(path))
    if not p.is_file():
        return None
    st = p.stat()
    return content_key("file", st.st_size, st.st_mtime_ns)[:16]


# ------------------------------------------------------------------------------------ model directories
# A digest of the files a model loads is part of its id (and so of every embedding, result and translation key): a
# run trained again under its id, or a local model directory whose files change, gets new keys.

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
