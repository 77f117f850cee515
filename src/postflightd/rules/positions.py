"""Where a finding points in its file: (line, column), for the github and sarif formats.

A pure function of the file's bytes and the finding's location. PF102 gets the position the
JSON decoder stopped at; a field finding gets the line of the field's key (or array item),
else of the nearest enclosing value that exists (a missing field points at its parent).
Findings about the file as a whole (location "") get none.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Collection, Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, but not in typeshed
from typing import Final

from postflightd.rules.findings import Finding

_WS: Final = re.compile(r"[ \t\n\r]*")
_PARENT: Final = re.compile(r"(\.[^.\[]*|\[\d+\])$")


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def decode_error_position(raw: bytes) -> tuple[int, int] | None:
    """Where reading ``raw`` as UTF-8 JSON fails (1-based line and column), or None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        return raw.count(b"\n", 0, exc.start) + 1, exc.start - line_start + 1
    if text.startswith("\ufeff") or not text.strip():
        return 1, 1
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno, exc.colno
    except (ValueError, RecursionError):
        return None
    # NaN/Infinity parse here but not when a metadata file is read
    # (``models.files.parse_json``): no better place than the top.
    return 1, 1


def field_offsets(text: str, wanted: Collection[str] | None = None) -> dict[str, int]:
    """Offset of every key and array item of a JSON document, by dotted location.

    ``wanted``: only these locations are needed (with every location on the way to them):
    any other value is stepped over by the decoder in one call instead of walked here, which
    is most of a file whose findings are few.
    """
    out: dict[str, int] = {}
    decoder = json.JSONDecoder()
    within = None if wanted is None else _on_the_way(wanted)

    def skip(idx: int) -> int:
        match = _WS.match(text, idx)
        return match.end() if match else idx

    def value(idx: int, path: str) -> int:
        idx = skip(idx)
        opener = text[idx]
        if within is not None and path not in within:
            opener = ""  # nothing wanted inside: decoded whole, below
        if opener == "{":
            idx = skip(idx + 1)
            if text[idx] == "}":
                return idx + 1
            while True:
                idx = skip(idx)
                key_at = idx
                key, idx = scanstring(text, idx + 1)
                child = f"{path}.{key}" if path else key
                out[child] = key_at  # the last of duplicate keys wins, as json.loads keeps it
                idx = value(skip(idx) + 1, child)
                idx = skip(idx)
                if text[idx] != ",":
                    return idx + 1
                idx += 1
        if opener == "[":
            idx = skip(idx + 1)
            if text[idx] == "]":
                return idx + 1
            n = 0
            while True:
                idx = skip(idx)
                child = f"{path}[{n}]"
                out[child] = idx
                idx = skip(value(idx, child))
                if text[idx] != ",":
                    return idx + 1
                idx += 1
                n += 1
        _, end = decoder.raw_decode(text, idx)
        return int(end)

    # Not a document that parsed: whatever was found before the problem is still right.
    with contextlib.suppress(ValueError, IndexError, RecursionError):
        value(0, "")
    return out


def _parent(loc: str) -> str:
    """The location holding ``loc`` ("" for a top-level one, and for a location not of the
    dotted form)."""
    parent = _PARENT.sub("", loc)
    return parent if parent != loc else ""


def _on_the_way(locations: Collection[str]) -> set[str]:
    """Every location that may hold one of ``locations`` ("" the document): each prefix
    ending before a "." or "[" (a key may hold either, so this is all of them, and more)."""
    within = {""}
    for loc in locations:
        within.update(loc[:i] for i, ch in enumerate(loc) if ch in ".[")
    return within


def with_positions(findings: Sequence[Finding], raw: bytes | None) -> list[Finding]:
    """``findings`` with ``line``/``col`` set where the file shows where they are."""
    if raw is None or not findings:
        return list(findings)
    offsets: dict[str, int] | None = None
    text = ""
    out: list[Finding] = []
    for f in findings:
        position: tuple[int, int] | None = None
        if f.code == "PF102":
            position = decode_error_position(raw)
        elif f.location:
            if offsets is None:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    text = ""
                located = [g.location for g in findings if g.location]
                offsets = field_offsets(text, located) if text else {}
            loc = f.location
            while loc and loc not in offsets:
                loc = _parent(loc)
            # A missing top-level field points at the document itself: line 1.
            position = _line_col(text, offsets[loc]) if loc else (1, 1)
        out.append(
            f
            if position is None
            else Finding(f.code, f.severity, f.location, f.message, position[0], position[1], f.fix)
        )
    return out
