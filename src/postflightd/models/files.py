"""The files agents write in a task directory, before any model: their names, and how
their bytes read as JSON.

Pure: ``parse_json`` never raises on any bytes and says why they are not JSON, in words a
finding can carry (a metadata file's PF102, state.json's PF604, a marker's problem).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, Final, TypeVar

#: The metadata file an agent writes at the end of (and during) a run.
META_NAME: Final = ".return-meta.json"
#: The marker a workflow writes before delegating to an agent: the session it expects.
MARKER_NAME: Final = ".postflight-pending"
#: The loop guard a stop hook leaves so that an agent is blocked once, not forever.
LOOP_GUARD_NAME: Final = ".postflight-loop-guard"


class _ConstantError(ValueError):
    """NaN, Infinity or -Infinity: Python's json reads them, JSON does not have them."""


def _reject_constant(name: str) -> Any:
    raise _ConstantError(f"{name} is not valid JSON")


def number_too_long() -> str:
    """Why JSON text holding an integer longer than Python converts cannot be read (json
    converts each integer as it reads it, and Python refuses one of more digits than
    ``sys.get_int_max_str_digits()``)."""
    return f"holds a number too long to read (over {sys.get_int_max_str_digits():,} digits)"


#: One decoder for every file: ``json.loads`` with an argument builds a new one per call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


_T = TypeVar("_T")


def deeper(calls: int, read: Callable[[], _T]) -> _T:
    """``read()`` called ``calls`` calls deeper, each through C (``functools.partial``), so
    that each is counted against the recursion limit both where the interpreter counts Python
    calls (3.11) and where it counts calls from C (3.12 on): json's decoder then gives up
    ``calls`` levels of nesting sooner than where it is called."""
    if calls <= 0:
        return read()
    return partial(deeper, calls - 1, read)()


def parse_json(raw: bytes, what: str = "the file", *, margin: int = 0) -> tuple[Any, str | None]:
    """(value, None) or (None, why it is not JSON) for a file's bytes (``what`` names them in
    that reason: the file, the block).

    ``margin``: decoded that many calls deeper (``deeper``), so that a value read here leaves
    that much of the stack to whatever handles it later, from deeper down.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    try:
        if margin > 0:
            return deeper(margin, partial(_DECODER.decode, text)), None
        return _DECODER.decode(text), None
    except json.JSONDecodeError as exc:
        # A byte-order mark and an empty text never decode: they are named only here, so
        # that a good file is not copied (strip) to find out that it is not empty.
        if text.startswith("\ufeff"):
            return None, "starts with a byte-order mark: write plain UTF-8 without a BOM"
        if not text.strip():
            return None, f"{what} is empty"
        return None, json_problem(exc, what)
    except _ConstantError as exc:
        return None, str(exc)
    except ValueError:  # what is left once the two above are caught
        return None, number_too_long()
    except RecursionError:
        return None, "JSON nested too deeply to read"


#: What the JSON decoder's messages mean, in words that say what to look for.
_DECODER_WORDS: Final = {
    "Expecting value": "a value was expected (a string, number, object, array, true, false "
    "or null)",
    "Expecting property name enclosed in double quotes": "a key in double quotes was expected "
    "(a trailing comma, or a key in single quotes?)",
    "Expecting ':' delimiter": "a ':' was expected after the key",
    "Expecting ',' delimiter": "a ',' was expected between two items (a missing comma?)",
    "Invalid control character at": "a raw control character (a line break, a tab) inside a "
    "string: write it as \\n or \\t",
    "Invalid \\escape": "an invalid backslash escape in a string (write a backslash as \\\\)",
    "Invalid \\uXXXX escape": "an invalid \\uXXXX escape in a string",
    "Extra data": "more text after the end of the JSON value (two documents, or a stray "
    "character?)",
}


def json_problem(exc: json.JSONDecodeError, what: str = "the file") -> str:
    """Why a text is not JSON, in plain words, with the line:col where to look (``what`` names
    the text: the file, the hook's input)."""
    at = f"{exc.lineno}:{exc.colno}"
    if exc.msg.startswith("Unterminated string"):
        # The decoder points at the string's opening quote: nothing after it closes it.
        return (
            f"{what} ends inside a string that starts at {at} (truncated, or still being written?)"
        )
    if exc.pos >= len(exc.doc.rstrip()):
        return (
            f"{what} ends at {at} before its JSON is complete (truncated, or still being written?)"
        )
    words = _DECODER_WORDS.get(exc.msg)
    if words is None:
        words = exc.msg[:1].lower() + exc.msg[1:]
    return f"not valid JSON at {at}: {words}"
