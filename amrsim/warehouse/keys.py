"""Content keys: stable hashes of a row's inputs and the stage config that produced it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

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
