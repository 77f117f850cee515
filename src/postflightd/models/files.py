"""The files agents write in a task directory, before any model: their names, and how
their bytes read as JSON.

Pure: ``parse_json`` never raises on any bytes and says why they are not JSON, in words a
finding can carry (a metadata file's PF102, state.json's PF604, a marker's problem).
"""

from __future__ import annotations

import json
from typing import Any, Final

#: The metadata file an agent writes at the end of (and during) a run.
META_NAME: Final = ".return-meta.json"
#: The marker a workflow writes before delegating to an agent: the session it expects.
MARKER_NAME: Final = ".postflight-pending"
#: The loop guard a stop hook leaves so that an agent is blocked once, not forever.
LOOP_GUARD_NAME: Final = ".postflight-loop-guard"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every file: ``json.loads`` with an argument builds a new one per call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def parse_json(raw: bytes) -> tuple[Any, str | None]:
    """(value, None) or (None, why it is not JSON) for a file's bytes."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    if text.startswith("\ufeff"):
        return None, "starts with a byte-order mark: write plain UTF-8 without a BOM"
    if not text.strip():
        return None, "the file is empty"
    try:
        return _DECODER.decode(text), None
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        hint = ": the file ends early (truncated, or still being written)" if truncated else ""
        return None, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}"
    except ValueError as exc:
        return None, str(exc)
    except RecursionError:
        return None, "JSON nested too deeply to read"
