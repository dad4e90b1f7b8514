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


# valid tags that name no language a model could handle, and what each means (ISO 639-2)
NOT_LANGUAGE_MEANINGS = {"und": "undetermined", "mul": "multiple languages", "mis": "uncoded languages",
                         "zxx": "no linguistic content"}
NOT_LANGUAGES = frozenset(NOT_LANGUAGE_MEANINGS)
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


@lru_cache(maxsize=1024)
def no_language(value: str | None) -> str | None:
    """Why `value`, a valid tag, names no language (`und`, `zxx`, `mul`, `mis`, private use): a reason saying what it
    means, for a failed row or a config error; None when it names a language or is no valid tag at all."""
    tag = normalise_lang(value)
    if tag is None:
        return None
    lang = langcodes.Language.get(tag).language or "und"  # langcodes reads 'und' (and 'und-Latn') as no language
    if lang in NOT_LANGUAGE_MEANINGS:
        meaning = NOT_LANGUAGE_MEANINGS[lang]
    elif not lang.isalpha() or "qaa" <= lang <= "qtz":
        meaning = "private use"
    else:
        return None
    return f"language code '{value}' ({meaning}) names no language; give the text's language ({LANG_HINT})"
