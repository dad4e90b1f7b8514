"""Language codes in one standard form, for config validation, ingest and evaluation alike."""

from __future__ import annotations

from functools import lru_cache

import langcodes


@lru_cache(maxsize=4096)
def normalise_lang(code: str | None) -> str | None:
    """A BCP-47 tag in standard form ('deu' -> 'de', 'en_US' -> 'en-US'); None if not a valid language tag."""
    if not code or not code.strip():
        return None
    code = code.strip().replace("_", "-")
    try:
        if not langcodes.tag_is_valid(code):
            return None
        return langcodes.standardize_tag(code, macro=True)  # macro: cmn -> zh, so Tatoeba meets STSb codes
    except (ValueError, langcodes.tag_parser.LanguageTagError):
        return None
