"""Output is inert (SPEC 7.1): values from the project tree printed as data, never as markup.

Metadata values and directory names come from agents, and an agent can be wrong or
prompt-injected. Two functions, used by every reporter, so that no value can drive a terminal
(ESC/OSC sequences), start a new output line (a forged finding, a GitHub workflow command), or
make an output unencodable (a lone surrogate, which ``json`` accepts from a ``\\ud800``
escape and UTF-8 cannot encode):

* ``inert`` for text: control characters become visible escapes (``\\x1b``, ``\\n``).
* ``json_text`` for JSON: always valid UTF-8.

``utf8_safe`` is for a value kept rather than printed (a journal column, a report figure):
it only makes it encodable.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

#: C0 (tab and line breaks included), DEL, C1 (NEL is a line break for some terminals),
#: surrogates (only lone ones reach a ``str``: json joins valid pairs), the Unicode line and
#: paragraph separators, and the bidirectional overrides that reorder what a reader sees.
_UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


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
    return _UNSAFE.sub(_escape, text)


def json_text(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kwargs)``, but always encodable as UTF-8.

    A lone surrogate cannot be written as UTF-8 (stdout raised, exit 70); the ASCII form
    writes it back as the very ``\\udXXX`` escape it was read from, so nothing is lost.
    """
    text = json.dumps(obj, ensure_ascii=False, **kwargs)
    if text.isascii():
        return text
    try:
        # Encoding is the cheapest complete check (2 ms for a 10,000-file report; a regex
        # search for surrogates took 10 ms).
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, **kwargs)
    return text


def utf8_safe(text: str) -> str:
    """Lone surrogates (a JSON ``\\ud800`` escape) become ``?``: the text encodes as UTF-8."""
    return text.encode("utf-8", errors="replace").decode("utf-8")
