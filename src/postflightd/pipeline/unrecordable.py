"""Values no file or journal row can hold (PF106): one bad file never blocks the others.

A path that is not UTF-8, a lone surrogate, an integer past SQLite's 64 bits or json's
4,300-digit limit: each is found before the batch depends on it, and only its file is left
out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from postflightd.pipeline.results import FileReport
    from postflightd.rules.findings import Finding

#: What json, sqlite3 and str.encode raise for a value no file or row can hold: a lone
#: surrogate (UnicodeEncodeError), an integer past the 4,300-digit conversion limit
#: (ValueError), one past SQLite's 64 bits (OverflowError), a document nested too deeply.
UNWRITABLE = (ValueError, OverflowError, RecursionError)
_SQLITE_INT = 1 << 63
#: The smallest 4,300-digit number: adding one to the largest overflows json's int limit.
_DIGITS_4300: Final = 10**4299


def printable(text: str) -> str:
    """``text`` with what UTF-8 cannot hold spelled out: a ``\\xff`` name byte, a ``\\ud800``."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def _encodes(text: str | None) -> bool:
    if text is None:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unrecordable(report: FileReport) -> Finding | None:
    """PF106 when the journal cannot store this file's row (every outcome writes one)."""
    # The rules' registry, imported with a file to check: the stop's clean-up imports this
    # module for ``printable`` at every stop, most of which have no file.
    from postflightd.rules.findings import finding

    if not _encodes(str(report.root)) or not _encodes(report.rel_path):
        where = printable(report.path_text)
        return finding(
            "PF106",
            "",
            f"the path {where} is not valid UTF-8 (a byte such as \\xff in a directory name), "
            "so it cannot be recorded in the journal or state.json: rename the directory with "
            "a UTF-8 name",
        )
    for location, value in (("metadata.session_id", report.session), ("status", report.raw_status)):
        if value is not None and not _encodes(value):
            return finding(
                "PF106",
                location,
                f"{location} '{printable(value)}' holds a lone surrogate, which UTF-8 cannot "
                "store: write the character itself (both halves of a pair) or drop it",
            )
    if report.task is not None and not -_SQLITE_INT <= report.task < _SQLITE_INT:
        return finding(
            "PF106",
            "",
            f"task number {str(report.task)[:30]}... is too large to record (the journal holds "
            "64-bit numbers): use the task's real number",
        )
    return None


def _first_unwritable(value: Any, location: str = "", depth: int = 0) -> tuple[str, str] | None:
    """Where in a document a value is that JSON text in UTF-8 cannot hold, and why."""
    if depth > 200:
        return location, "nested too deeply to write"
    if isinstance(value, str):
        if _encodes(value):
            return None
        return location, f"'{printable(value)}' holds a lone surrogate"
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= _DIGITS_4300:
            return location, "an integer too long to write as JSON text (over 4,300 digits)"
        return None
    items: Iterable[tuple[str, Any]] = ()
    if isinstance(value, dict):
        items = ((f"{location}.{k}" if location else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{location}[{i}]", v) for i, v in enumerate(value))
    for where, item in items:
        found = _first_unwritable(item, where, depth + 1)
        if found is not None:
            return found
    return None


def unwritable_finding(report: FileReport, exc: Exception) -> Finding:
    from postflightd.rules.findings import finding  # as in ``unrecordable``

    found = _first_unwritable(report.loaded.doc)
    location, why = found if found is not None else ("", printable(str(exc))[:200])
    return finding(
        "PF106",
        location,
        f"{why}: the outcome cannot be written to state.json, TODO.md or errors.json; fix the "
        "value (the other files of the batch were applied)",
    )
