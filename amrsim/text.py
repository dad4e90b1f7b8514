"""When a text holds nothing to read: the one check of empty text for ingest, parsers, translators and the CLI."""

from __future__ import annotations

import unicodedata

# format (zero-width space, joiners, word joiner, byte-order mark, soft hyphen) and control characters
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc"})
# characters of other categories that show nothing either: the combining grapheme joiner, Hangul fillers, Khmer
# inherent vowels, Mongolian free variation selectors, variation selectors and the blank Braille pattern
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2800\u3164\uffa0"
                       + "".join(chr(c) for c in range(0xFE00, 0xFE10)))
INVISIBLE_NOTE = "only invisible characters"


def _invisible(c: str) -> bool:
    return c.isspace() or c in _INVISIBLE or unicodedata.category(c) in _INVISIBLE_CATEGORIES


def blank(text: str | None) -> str | None:
    """Why `text` holds nothing to read: 'empty' (none, or only whitespace), INVISIBLE_NOTE (zero-width and other
    invisible characters, with or without whitespace); None when it holds a visible character. A text such as
    '\\u200b' is not empty to `str.strip`, yet a parser, translator or encoder would read nothing in it."""
    if text is None or not text.strip():
        return "empty"
    if all(_invisible(c) for c in text):  # stops at the first visible character: usually the first
        return INVISIBLE_NOTE
    return None


def empty_reason(text: str | None, what: str, note: str | None = None) -> str | None:
    """A failed row's reason when `text` is blank: 'empty sentence1', 'empty sentence1 (only invisible
    characters)'; `note` joins the parentheses ('empty sentence1 (de)', 'empty sentence1 (de, only invisible
    characters)'). None when the text can be read."""
    why = blank(text)
    if why is None:
        return None
    notes = [n for n in (note, why if why != "empty" else None) if n]
    return f"empty {what}" + (f" ({', '.join(notes)})" if notes else "")
