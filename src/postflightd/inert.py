"""Output is inert: values from the project tree printed as data, never as markup.

Metadata values and directory names come from agents, and an agent can be wrong or
prompt-injected. Two functions, used by every reporter, so that no value can drive a terminal
(ESC/OSC sequences), start a new output line (a forged finding, a GitHub workflow command), or
make an output unencodable (a lone surrogate, which ``json`` accepts from a ``\\ud800``
escape and UTF-8 cannot encode):

* ``inert`` for text: control characters become visible escapes (``\\x1b``, ``\\n``).
* ``json_text`` for JSON: the same characters as ``\\uXXXX`` escapes, so always valid UTF-8.

``utf8_safe`` is for a value kept rather than printed (a journal column, a report figure):
it only makes it encodable. ``clip`` bounds a value's length wherever it is kept, quoted or
logged, so that a megabyte-long field costs a line, not a megabyte, each time it is seen.
``inert_diff`` is a unified diff of two texts (``--dry-run``, ``init``) with every line
written by ``inert``.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any, Final

#: C0 (tab and line breaks included), DEL, C1 (NEL is a line break for some terminals) and
#: the Unicode line and paragraph separators U+2028/U+2029.
_CONTROL_OR_SEPARATOR: Final = "\x00-\x1f\x7f-\x9f\u2028\u2029"
#: One control character or line/paragraph separator: a character that can drive a terminal
#: or break a line. What a TODO.md edit never writes and an artifact path may not hold.
CONTROL_OR_LINE_SEPARATOR: Final = re.compile(f"[{_CONTROL_OR_SEPARATOR}]")
#: What ``inert`` escapes: the above, the bidirectional embeddings and overrides
#: (U+202A-U+202E) and isolates (U+2066-U+2069) that reorder what a reader sees, and
#: surrogates (only lone ones reach a ``str``: json joins valid pairs).
_UNSAFE: Final = f"[{_CONTROL_OR_SEPARATOR}\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
#: What ``json_text`` escapes: the same but C0, which ``json`` escapes in a string itself (a raw
#: line break or tab in JSON output is layout, outside any string).
_JSON_UNSAFE: Final = "[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled on first use: most commands print only plain text, and these two
    cost start-up 0.7 ms to compile."""
    return re.compile(pattern)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every control character written as a visible escape, on one line."""
    if text.isascii() and text.isprintable():
        return text  # the common case, without a regex pass
    return _compiled(_UNSAFE).sub(_escape, text)


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False)


def json_text(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kwargs)``, but inert and always valid UTF-8.

    What ``inert`` escapes in text is written as a JSON ``\\uXXXX`` escape here (``json``
    itself escapes only C0): the parsed value is the same, but the output can be shown on a terminal
    without a C1 sequence, a bidirectional override or a line separator taking effect. A lone
    surrogate, which cannot be written as UTF-8 (stdout raised, exit 70), becomes the very
    ``\\udXXX`` escape it was read from, so nothing is lost. Outside strings JSON is ASCII, so
    every such character is inside a string, where an escape means the same.
    """
    # One encoder for the common call: json.dumps with an argument builds one per call.
    text = _ENCODER.encode(obj) if not kwargs else json.dumps(obj, ensure_ascii=False, **kwargs)
    if text.isascii() and "\x7f" not in text:
        return text
    return _compiled(_JSON_UNSAFE).sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def utf8_safe(text: str) -> str:
    """Lone surrogates (a JSON ``\\ud800`` escape) become ``?``: the text encodes as UTF-8."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


#: The most characters of one value from the tree quoted in a message, stored in a journal
#: column or written in a log field; past it the value is cut and the cut marked.
MAX_VALUE_CHARS: Final = 200


def clip(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """``text`` when at most ``limit`` characters, else its first ``limit`` characters and a
    marker saying how many were left out: ``abc…[+12345 chars]``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\u2026[+{len(text) - limit} chars]"


def inert_diff(old: str, new: str, before: str, after: str) -> str:
    """``old`` to ``new`` as a unified diff labelled ``before`` and ``after``, every line inert.

    The texts are project files an agent can write (TODO.md, state.json, .gitignore): an
    ESC sequence in a context line (cursor up, erase line) would hide the ``-``/``+`` lines
    under review, and a line separator or a bidirectional override would reorder them. Each
    line is written by ``inert``, its line break (``\\n`` or ``\\r\\n``) apart; a tab stays a
    tab (it only moves right, over nothing), so a tab-indented file reads as written. Lines
    are split at ``\\n`` only, not at every break ``str.splitlines`` knows (U+2028, ``\\x1c``):
    those are content here, and shown as escapes.
    """
    import difflib  # only --dry-run and init show a diff: kept off every other start-up

    out: list[str] = []
    for line in difflib.unified_diff(_lines(old), _lines(new), before, after):
        body = line[:-1] if line.endswith("\n") else line
        if body.endswith("\r") and line.endswith("\n"):
            body = body[:-1]
        out.append("\t".join(inert(part) for part in body.split("\t")) + "\n")
        if not line.endswith("\n"):
            # A last line without a newline would run into the next line of output.
            out.append("\\ No newline at end of file\n")
    return "".join(out)


def _lines(text: str) -> list[str]:
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]
