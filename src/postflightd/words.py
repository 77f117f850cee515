"""Counts in words, as a person writes them: ``1 file``, ``2 files``, ``0 errors``.

Every message that counts something says it through ``counted``, never with a ``(s)``
plural: "1 file(s) applied" reads as a form to fill in, not a sentence.
"""

from __future__ import annotations

from typing import Final

#: Plurals that are not the word plus "s".
_IRREGULAR: Final = {"entry": "entries", "directory": "directories", "is": "are", "has": "have"}


def plural(count: int, word: str, many: str | None = None) -> str:
    """``word`` as it reads after ``count``: the singular for exactly one, else the plural
    (``many``, else ``word`` + "s", or its irregular form)."""
    if count == 1:
        return word
    if many is not None:
        return many
    head, _, last = word.rpartition(" ")
    irregular = _IRREGULAR.get(last)
    if irregular is not None:
        return f"{head} {irregular}" if head else irregular
    return word + "s"


def counted(count: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``0 files``: the count and its noun, agreeing."""
    return f"{count} {plural(count, word, many)}"


def joined(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: a list as a sentence names it."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def article(word: str) -> str:
    """``a planned``, ``an implemented``: ``word`` after the indefinite article it takes (by
    its first letter: the words it is given, statuses and operations, sound as spelt)."""
    return f"{'an' if word[:1].lower() in 'aeiou' and word else 'a'} {word}"
