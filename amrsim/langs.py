"""Language codes in one standard form, for config validation, ingest and evaluation alike."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

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


NOT_LANGUAGES = frozenset({"und", "mul", "mis", "zxx"})  # valid tags that name no language a model could handle
LANG_HINT = "an ISO 639 code such as en, de, es, zh"


class LangCode(NamedTuple):
    code: str | None  # the language subtag parsers, translators and tables use; None: not a language
    note: str | None  # why `code` differs from what was written beyond spelling ('de-DE' -> 'de'), else None


@lru_cache(maxsize=4096)
def lang_code(value: str | None) -> LangCode:
    """The language a tag names, as every table, parser and translator keys it: 'deu' -> 'de', 'de-DE' -> 'de'
    (with a note: region and script are dropped, since models are chosen per language), 'klingon' -> None."""
    tag = normalise_lang(value)
    if tag is None:
        return LangCode(None, None)
    lang = langcodes.Language.get(tag).language
    # private use (x-..., qaa-qtz): no model knows it
    if not lang or not lang.isalpha() or lang in NOT_LANGUAGES or "qaa" <= lang <= "qtz":
        return LangCode(None, None)
    note = None if lang == tag else f"language '{value}' read as '{lang}' (region and script are not used)"
    return LangCode(lang, note)
