"""What the Hub and MTEB know about amrsim's packaged encoders, for the metadata of exports and model cards that
name them as a base: Hub id, license and languages (ISO 639-1). A trained run's base is described by its own name
(`hf:<hub id>`) where it is not packaged."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from amrsim.encoders import parse_name

__all__ = ["PACKAGED_FACTS", "BaseFacts", "base_facts"]


@dataclass(frozen=True)
class BaseFacts:
    hub_id: str | None  # None: not on the Hub (or a local path)
    license: str | None  # a Hub license id; None: unknown
    languages: tuple[str, ...] | None  # None: unknown


PACKAGED_FACTS = {
    "minilm": BaseFacts("sentence-transformers/all-MiniLM-L6-v2", "apache-2.0", ("en",)),
    # multilingual Universal Sentence Encoder v3 (TF Hub, Apache-2.0): its 16 languages
    "muse": BaseFacts(None, "apache-2.0", ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru",
                                           "th", "tr", "zh")),
}


def base_facts(name: str | None) -> BaseFacts:
    """Facts of a base encoder name (`minilm`, `muse`, `hf:<id>`); all unknown for anything else."""
    if name in PACKAGED_FACTS:
        return PACKAGED_FACTS[name]
    try:
        hub_id = parse_name(name).hub_id if name else None
    except ValueError:
        hub_id = None
    return BaseFacts(hub_id if hub_id is not None and not Path(hub_id).exists() else None, None, None)
