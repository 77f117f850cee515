"""The hook's stdin, for every runtime: one JSON object, read no further than needed.

Every runtime sends its stop hook one JSON object on stdin. It is read with a size limit, an
idle timeout and without waiting for EOF (``read_hook_input``), parsed into a dict
(``load_object``), and its fields read leniently where they are optional (``text``) and
strictly where a wrong value would change the decision (``flag``, ``count``). Anything that is
not such an object is a HookInputError: a non-blocking error with one line on stderr.
"""

from __future__ import annotations

import json
import os
import re
import select
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from postflightd.errors import MalformedInputError
from postflightd.models.files import json_problem, number_too_long

MAX_HOOK_INPUT: Final = 1024 * 1024
#: How long stdin may stay silent before a complete JSON object has arrived.
STDIN_IDLE_S: Final = 5.0
_READ_CHUNK: Final = 64 * 1024
_TOKENS: Final = re.compile(rb'["\\{}]')
_QUOTE, _BACKSLASH, _OPEN = ord('"'), ord("\\"), ord("{")


class HookInputError(MalformedInputError):
    """The hook's stdin is not the runtime's JSON object: a non-blocking error."""


class _ObjectEnd:
    """Where the top-level JSON object on a stream ends, found without parsing it.

    Only quotes, backslashes and braces matter: braces count outside strings, and a backslash
    inside a string hides the byte after it (possibly the first byte of the next chunk).
    """

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def feed(self, chunk: bytes) -> bool:
        """True once the object that opened first has closed within the bytes fed so far."""
        skip = 1 if self._escaped else 0
        self._escaped = False
        for match in _TOKENS.finditer(chunk):
            at = match.start()
            if at < skip:
                continue
            byte = chunk[at]
            if self._in_string:
                if byte == _BACKSLASH:
                    skip = at + 2
                    self._escaped = skip > len(chunk)
                elif byte == _QUOTE:
                    self._in_string = False
            elif byte == _QUOTE:
                self._in_string = True
            elif byte == _OPEN:
                self._depth += 1
            elif byte != _BACKSLASH:
                self._depth -= 1
                if self._depth == 0:
                    return True
        return False


def read_hook_input(fd: int, limit: int = MAX_HOOK_INPUT, idle_s: float = STDIN_IDLE_S) -> bytes:
    """The hook's JSON object from ``fd``, read no further than needed.

    Reading stops at EOF, as soon as the object is complete (a runtime that leaves stdin open
    must not hang the hook), past ``limit`` bytes (memory stays bounded whatever is piped in),
    or after ``idle_s`` without a byte.
    """
    chunks: list[bytes] = []
    size = 0
    end = _ObjectEnd()
    started = False
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], idle_s)
            if not ready:
                raise HookInputError(
                    f"no complete JSON object on stdin after {idle_s:g} s of silence; "
                    "expected the hook's JSON object"
                )
            chunk = os.read(fd, _READ_CHUNK)
        except (OSError, ValueError) as exc:
            raise HookInputError(f"cannot read stdin: {exc}") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise HookInputError(
                f"hook input on stdin is larger than {limit // 1024} KiB; "
                "expected the hook's JSON object"
            )
        if not started:
            head = b"".join(chunks).lstrip()
            if not head:
                continue
            started = True
            if not head.startswith(b"{"):
                break  # not an object: no need to read the rest to say so
            if end.feed(b"".join(chunks)):
                break
        elif end.feed(chunk):
            break
    return b"".join(chunks)


def load_object(raw: bytes) -> dict[str, Any]:
    """The hook's stdin as a JSON object; anything else is a HookInputError."""
    if len(raw) > MAX_HOOK_INPUT:
        raise HookInputError(
            "hook input on stdin is larger than 1 MiB; expected the hook's JSON object"
        )
    try:
        doc = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise HookInputError(
            f"hook input on stdin: {json_problem(exc, 'it')}; expected the hook's JSON object"
        ) from None
    except UnicodeDecodeError:
        raise HookInputError(
            "hook input on stdin is not UTF-8 text; expected the hook's JSON object"
        ) from None
    except RecursionError:
        raise HookInputError(
            "hook input on stdin is JSON nested too deeply to read; expected the hook's JSON object"
        ) from None
    except ValueError:  # what is left once the two above are caught
        raise HookInputError(
            f"hook input on stdin {number_too_long()}; expected the hook's JSON object"
        ) from None
    if not isinstance(doc, dict):
        raise HookInputError('hook input on stdin must be a JSON object with at least "cwd"')
    return doc


def text(doc: Mapping[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` holding a usable string; anything else (absent, not a string,
    empty, with a NUL) is None: a runtime's optional fields change between versions, so they
    are read leniently."""
    for key in keys:
        value = doc.get(key)
        if isinstance(value, str) and value and "\0" not in value:
            return value
    return None


def directory(doc: Mapping[str, Any], key: str) -> Path:
    """A required directory field (``cwd``): without it the hook cannot tell the project."""
    value = doc.get(key)
    if not isinstance(value, str) or not value or "\0" in value:
        raise HookInputError(f'hook input has no "{key}" string: cannot tell which project stopped')
    return Path(value)


def flag(doc: Mapping[str, Any], *keys: str) -> bool:
    """A loop-guard boolean (``stop_hook_active``): absent is false, anything but true or
    false is malformed input (guessing could block an agent the runtime says not to)."""
    for key in keys:
        if key in doc:
            value = doc[key]
            if not isinstance(value, bool):
                raise HookInputError(f'hook input "{key}" must be true or false')
            return value
    return False


def count(doc: Mapping[str, Any], key: str) -> int:
    """A loop-guard counter (``loop_count``, ``attempt``): absent is 0; anything but a whole
    number from 0 up is malformed input."""
    value = doc.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HookInputError(f'hook input "{key}" must be a whole number from 0 up')
    return value
