"""Finding a console return in what an agent printed: bare JSON, the block between the
AGENT_OUTPUT markers of the agent-output contract, or the last fenced ``json`` block of a
final message; which dialect it follows; and the size bound on the input.

Pure and never raising on any input (``read_bounded`` reads the stream it is given).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, BinaryIO, Final

from postflightd.models.files import parse_json
from postflightd.models.terms import Dialect
from postflightd.rules.findings import Finding, finding

#: Input over this size is refused (PF101): a console return is a few kilobytes.
MAX_RETURN_BYTES: Final = 1 << 20

START_MARKER: Final = "<!-- AGENT_OUTPUT_START -->"
END_MARKER: Final = "<!-- AGENT_OUTPUT_END -->"
_START_RE: Final = re.compile(r"<!--\s*AGENT_OUTPUT_START\s*-->")
_END_RE: Final = re.compile(r"<!--\s*AGENT_OUTPUT_END\s*-->")
_FENCE_OPEN_RE: Final = re.compile(r" {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^ \t`]*)")


class Origin(StrEnum):
    """Where in the input the JSON was found."""

    BARE = "bare"
    MARKERS = "markers"
    FENCE = "fence"


@dataclass(frozen=True, slots=True)
class Extracted:
    """The JSON value found in the input, or the finding that says why there is none."""

    doc: Any = None
    origin: Origin | None = None
    failure: Finding | None = None
    #: the input used the AGENT_OUTPUT markers (a hint for dialect detection).
    marked: bool = False


def _parse_block(text: str, where: str, origin: Origin, marked: bool) -> Extracted:
    doc, problem = parse_json(text.encode("utf-8"), "the block")
    if problem is not None:
        return Extracted(
            origin=origin,
            failure=finding("PF102", "", f"the JSON {where} is not valid: {problem}"),
            marked=marked,
        )
    return Extracted(doc, origin, marked=marked)


def _fenced(text: str) -> str | None:
    """The body of the last fenced ``json`` block in ``text`` (an unclosed one runs to the end).

    A line scanner, not one regular expression: a backtracking pattern is quadratic on a
    message full of unclosed fences, and a return is untrusted input of up to 1 MiB.
    """
    last: str | None = None
    fence = ""  # the open fence, "" outside any block
    is_json = False
    body: list[str] = []
    for line in text.splitlines():
        if not fence:
            opening = _FENCE_OPEN_RE.match(line)
            if opening is not None:
                fence = opening.group("fence")
                is_json = opening.group("info").lower() == "json"
                body = []
            continue
        stripped = line.strip()
        # CommonMark: the closing fence repeats the opening character at least as many times.
        if stripped and len(stripped) >= len(fence) and set(stripped) == {fence[0]}:
            if is_json:
                last = "\n".join(body)
            fence = ""
        elif is_json:
            body.append(line)
    if fence and is_json:
        # Cut off before the closing fence: parsing it says "truncated", which is the truth.
        last = "\n".join(body)
    return last


def _marked(text: str) -> str | None:
    """The text between the last END marker and the START marker nearest before it."""
    ends = list(_END_RE.finditer(text))
    if not ends:
        return None
    end = ends[-1].start()
    starts = list(_START_RE.finditer(text, 0, end))
    return text[starts[-1].end() : end] if starts else None


def extract_return(raw: bytes) -> Extracted:
    """Bare JSON, else the block between the AGENT_OUTPUT markers, else the last ```json block."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Extracted(
            failure=finding(
                "PF102",
                "",
                f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}): "
                "the return must be UTF-8 text",
            )
        )
    if not text.strip():
        return Extracted(
            failure=finding(
                "PF700", "", "the return is empty: the subagent must end with its JSON return"
            )
        )
    doc, whole_problem = parse_json(raw, "the return")
    if whole_problem is None:
        return Extracted(doc, Origin.BARE)

    # The last marked block is the agent's final answer; earlier ones may be quoted examples.
    body = _marked(text)
    if body is not None:
        inner = _fenced(body)
        return _parse_block(
            inner if inner is not None else body,
            "between the AGENT_OUTPUT markers",
            Origin.MARKERS,
            marked=True,
        )
    start = _START_RE.search(text)
    if start is not None:
        return Extracted(
            failure=finding(
                "PF700",
                "",
                f"{START_MARKER} has no matching {END_MARKER}: the output is cut off, or the "
                "closing marker is missing; end the JSON block with it",
            ),
            marked=True,
        )
    fenced = _fenced(text)
    if fenced is not None:
        return _parse_block(fenced, "in the last ```json block", Origin.FENCE, marked=False)
    if text.lstrip("\ufeff \t\r\n").startswith(("{", "[")):
        # It looks like bare JSON that does not parse (truncated, trailing comma, ...).
        return Extracted(origin=Origin.BARE, failure=finding("PF102", "", str(whole_problem)))
    return Extracted(
        failure=finding(
            "PF700",
            "",
            "no JSON found: the return is neither a JSON object, nor a block between "
            f"{START_MARKER} and {END_MARKER}, nor a fenced ```json block",
        )
    )


def detect_dialect(doc: object, marked: bool = False) -> Dialect:
    """Which contract a return follows: its keys decide, the markers break a tie."""
    if isinstance(doc, dict):
        if "meta" in doc:
            return Dialect.AGENT_OUTPUT
        if any(k in doc for k in ("status", "summary", "metadata", "errors")):
            return Dialect.SUBAGENT_RETURN
        if "error" in doc or isinstance(doc.get("next_steps"), list):
            return Dialect.AGENT_OUTPUT
        artifacts = doc.get("artifacts")
        if isinstance(artifacts, list) and any(
            isinstance(a, dict) and "key_points" in a for a in artifacts
        ):
            return Dialect.AGENT_OUTPUT
    # The markers belong to the agent-output contract; without them the subagent return, the
    # older and more common dialect, is the default.
    return Dialect.AGENT_OUTPUT if marked else Dialect.SUBAGENT_RETURN


def read_bounded(stream: BinaryIO, limit: int = MAX_RETURN_BYTES) -> bytes:
    """At most ``limit + 1`` bytes: enough to tell that the input is too big."""
    chunks: list[bytes] = []
    remaining = limit + 1
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
