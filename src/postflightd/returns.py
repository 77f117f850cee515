"""``check-return``: validate what a subagent hands back on the console (seeds 000-003).

Two dialects: the *subagent return* of seeds 000/001 (``status`` completed|partial|failed|
blocked, ``summary``, ``artifacts``, ``metadata`` with session and delegation, ``errors``,
``next_steps``), validated in seed 003's five steps; and the *agent output* of seed 002
(``meta.agent_name``/``status``/``execution_time_ms``, artifacts with ``key_points``, a
``next_steps`` list, an ``error`` object), usually placed in the agent's final message between
``<!-- AGENT_OUTPUT_START -->`` and ``<!-- AGENT_OUTPUT_END -->``.

Extraction, dialect detection and validation are pure and never raise on any input; reading
the input and probing the disk happen in ``commands/check_return.py`` only.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO, Final

from pydantic import BaseModel, ConfigDict, ValidationError

from postflightd.errors import ExitCode, UsageError
from postflightd.findings import (
    Finding,
    Policy,
    Severity,
    finding,
)
from postflightd.loader import artifact_probe, parse_json
from postflightd.rule_toolkit import (
    ArtifactProbe,
    ArtifactState,
    get_list,
    get_number,
    get_object,
    get_str,
    is_blank,
    json_type,
    location,
    session_rules,
)

#: Input over this size is refused (PF101): a console return is a few kilobytes.
MAX_RETURN_BYTES: Final = 1 << 20
#: Seed 000: "<100 tokens (~400 characters)"; seed 001's validator asserts len <= 500.
SUMMARY_WARN_CHARS: Final = 400
SUMMARY_MAX_CHARS: Final = 500
#: Seed 002: "3-5 key findings or highlights" per artifact.
KEY_POINTS_RANGE: Final = (3, 5)

START_MARKER: Final = "<!-- AGENT_OUTPUT_START -->"
END_MARKER: Final = "<!-- AGENT_OUTPUT_END -->"
_START_RE: Final = re.compile(r"<!--\s*AGENT_OUTPUT_START\s*-->")
_END_RE: Final = re.compile(r"<!--\s*AGENT_OUTPUT_END\s*-->")
_FENCE_OPEN_RE: Final = re.compile(r" {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^ \t`]*)")


class Dialect(StrEnum):
    SUBAGENT_RETURN = "subagent-return"
    AGENT_OUTPUT = "agent-output"


class Origin(StrEnum):
    """Where in the input the JSON was found."""

    BARE = "bare"
    MARKERS = "markers"
    FENCE = "fence"


SUBAGENT_STATUSES: Final = ("completed", "partial", "failed", "blocked")
OUTPUT_STATUSES: Final = ("complete", "partial", "error")
#: Seed 000 lists plan|report|summary|implementation|documentation, seed 001 adds research.
SUBAGENT_ARTIFACT_TYPES: Final = (
    "plan",
    "report",
    "research",
    "summary",
    "implementation",
    "documentation",
)
OUTPUT_ARTIFACT_TYPES: Final = ("document", "code", "data")

# Words agents write instead of the dialect's status, and the status they mean.
_SUBAGENT_STATUS_WORDS: Final = {
    "completed": (
        *("success", "succeeded", "successful", "done", "complete", "finished", "ok"),
        # the metadata file's success statuses (seed 004), written by the same agents
        *("researched", "planned", "implemented"),
    ),
    "partial": ("in_progress", "incomplete", "timeout", "timed_out"),
    "failed": ("error", "errored", "failure", "fail"),
    "blocked": ("waiting", "block"),
}
_OUTPUT_STATUS_WORDS: Final = {
    "complete": ("completed", "success", "succeeded", "done", "finished", "ok"),
    "partial": ("in_progress", "incomplete", "blocked", "timeout"),
    "error": ("failed", "failure", "fail", "errored"),
}


# --- the two dialects as models (strict types, unknown keys kept) ---------------------------


class _Open(BaseModel):
    # strict: a JSON string is never coerced to a number or a bool.
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


class ReturnArtifact(_Open):
    path: str
    type: str | None = None
    summary: str | None = None


class ReturnMetadata(_Open):
    # Seed 003 step 2 requires all four; seed 000 lists the optional ones below.
    session_id: str
    agent_type: str
    delegation_depth: int
    delegation_path: list[str]
    duration_seconds: float | None = None
    phase_count: int | None = None
    estimated_hours: float | None = None
    findings_count: int | None = None


class ReturnError(_Open):
    message: str
    type: str | None = None
    code: str | None = None
    recoverable: bool | None = None
    recommendation: str | None = None


class SubagentReturn(_Open):
    """Seeds 000/001: what a subagent returns to the orchestrator."""

    status: str
    summary: str
    artifacts: list[ReturnArtifact]
    metadata: ReturnMetadata
    errors: list[ReturnError] | None = None
    next_steps: str | None = None


class OutputMeta(_Open):
    agent_name: str
    status: str
    execution_time_ms: float | None = None


class OutputArtifact(_Open):
    path: str
    type: str | None = None
    summary: str | None = None
    key_points: list[str] | None = None


class OutputError(_Open):
    message: str
    code: str | None = None
    details: str | None = None


class AgentOutput(_Open):
    """Seed 002: the agent-output contract."""

    meta: OutputMeta
    artifacts: list[OutputArtifact]
    next_steps: list[str]
    error: OutputError | None = None


_KNOWN: Final[dict[Dialect, dict[str, frozenset[str]]]] = {
    Dialect.SUBAGENT_RETURN: {
        "": frozenset(SubagentReturn.model_fields),
        "metadata": frozenset(ReturnMetadata.model_fields),
        "artifacts[]": frozenset(ReturnArtifact.model_fields),
        "errors[]": frozenset(ReturnError.model_fields),
    },
    Dialect.AGENT_OUTPUT: {
        "": frozenset(AgentOutput.model_fields),
        "meta": frozenset(OutputMeta.model_fields),
        "artifacts[]": frozenset(OutputArtifact.model_fields),
        "error": frozenset(OutputError.model_fields),
    },
}

#: Fields the contract asks for but the orchestrator can do without: PF207, not PF200.
_ASKED: Final[dict[Dialect, dict[str, tuple[str, ...]]]] = {
    Dialect.SUBAGENT_RETURN: {
        "artifacts[]": ("type", "summary"),
        "errors[]": ("type", "recoverable", "recommendation"),
    },
    Dialect.AGENT_OUTPUT: {
        "meta": ("execution_time_ms",),
        "artifacts[]": ("type", "summary", "key_points"),
        "error": ("code",),
    },
}


# --- extraction -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Extracted:
    """The JSON value found in the input, or the finding that says why there is none."""

    doc: Any = None
    origin: Origin | None = None
    failure: Finding | None = None
    #: the input used the AGENT_OUTPUT markers (a hint for dialect detection).
    marked: bool = False


def _parse_block(text: str, where: str, origin: Origin, marked: bool) -> Extracted:
    doc, problem = parse_json(text.encode("utf-8"))
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
    doc, whole_problem = parse_json(raw)
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
    # The markers belong to seed 002; without them seed 003's dialect is the default.
    return Dialect.AGENT_OUTPUT if marked else Dialect.SUBAGENT_RETURN


# --- structure (steps 1-2: required fields and types) --------------------------------------

_EXPECTED: Final = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def _structure(model: type[BaseModel], doc: dict[str, Any]) -> Iterator[Finding]:
    try:
        model.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    else:
        return
    missing: list[Finding] = []
    wrong: list[Finding] = []
    for err in errors:
        loc = location(err["loc"])
        if err["type"] == "missing":
            missing.append(finding("PF200", loc, f"missing required field {loc!r}: add it"))
            continue
        expected = _EXPECTED.get(err["type"])
        value = err.get("input")
        msg = (
            f"{loc} must be {expected}, not {json_type(value)}"
            if expected is not None
            else f"{loc or 'the return'}: {err['msg']}"
        )
        wrong.append(finding("PF201", loc, msg))
    # Seed 003's order: every missing field first, then the fields of the wrong type.
    yield from missing
    yield from wrong


def _items(doc: dict[str, Any], key: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, item in enumerate(get_list(doc, key) or []):
        if isinstance(item, dict):
            yield f"{key}[{i}]", item


def _parts(doc: dict[str, Any], kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, object) for each object a kind of ``_KNOWN``/``_ASKED`` names."""
    if kind == "":
        yield "", doc
    elif kind.endswith("[]"):
        yield from _items(doc, kind[:-2])
    else:
        obj = get_object(doc, kind)
        if obj is not None:
            yield kind, obj


#: PF206: text fields the orchestrator needs, which must not be blank.
_NEEDED_TEXT: Final[dict[Dialect, tuple[tuple[str, str], ...]]] = {
    Dialect.SUBAGENT_RETURN: (
        ("", "summary"),
        ("metadata", "session_id"),
        ("artifacts[]", "path"),
        ("errors[]", "message"),
    ),
    Dialect.AGENT_OUTPUT: (("meta", "agent_name"), ("artifacts[]", "path"), ("error", "message")),
}


def _asked_fields(doc: dict[str, Any], dialect: Dialect) -> Iterator[Finding]:
    for kind, keys in _ASKED[dialect].items():
        for loc, obj in _parts(doc, kind):
            for key in keys:
                if obj.get(key) is None:
                    yield finding(
                        "PF207", f"{loc}.{key}", f"{loc}.{key} is missing; the contract asks for it"
                    )


def _blank_fields(doc: dict[str, Any], dialect: Dialect) -> Iterator[Finding]:
    for kind, key in _NEEDED_TEXT[dialect]:
        for loc, obj in _parts(doc, kind):
            if is_blank(obj.get(key)):
                where = f"{loc}.{key}" if loc else key
                yield finding("PF206", where, f"{where} is blank: fill it in")


def _unknown_fields(doc: dict[str, Any], dialect: Dialect) -> Iterator[Finding]:
    for kind, known in _KNOWN[dialect].items():
        for loc, obj in _parts(doc, kind):
            for key in obj:
                if key not in known:
                    where = f"{loc}.{key}" if loc else key
                    yield finding("PF205", where, f"unknown field {where!r} (kept)")


# --- status (step 3) ------------------------------------------------------------------------


def _status_finding(
    raw: str, loc: str, statuses: Sequence[str], words: Mapping[str, Sequence[str]]
) -> Finding:
    word = raw.strip().lower().replace("-", "_").replace(" ", "_")
    guess: str | None = word if word in statuses else None
    if guess is None:
        guess = next((s for s, ws in words.items() if word in ws), None)
    if guess is None:
        close = difflib.get_close_matches(word, statuses, n=1, cutoff=0.75)
        guess = close[0] if close else None
    hint = f'; did you mean "{guess}"?' if guess else ""
    return finding(
        "PF202",
        loc,
        f"{loc} {raw!r} is not one of {', '.join(statuses)} (case-sensitive){hint}",
    )


# --- session and delegation (step 4) --------------------------------------------------------


def _session_rules(doc: dict[str, Any], expect_session: str | None) -> Iterator[Finding]:
    expected = None if expect_session is None else (expect_session, "--expect-session")
    yield from session_rules(doc.get("metadata"), expected)


def _summary_rules(doc: dict[str, Any]) -> Iterator[Finding]:
    summary = get_str(doc, "summary")
    if summary is None:
        return
    n = len(summary)
    if n > SUMMARY_MAX_CHARS:
        yield finding(
            "PF702",
            "summary",
            f"summary is {n} characters, over the limit of {SUMMARY_MAX_CHARS}: keep it to "
            "2-5 sentences (under 100 tokens); details belong in an artifact",
        )
    elif n > SUMMARY_WARN_CHARS:
        yield finding(
            "PF701",
            "summary",
            f"summary is {n} characters, over about 100 tokens ({SUMMARY_WARN_CHARS} "
            "characters): shorten it to protect the orchestrator's context",
        )


# --- artifacts (step 5) ---------------------------------------------------------------------


def _escapes_root(path: str) -> bool:
    """A relative path that climbs out of the root with ``..`` (absolute paths are probed)."""
    if path.startswith("~"):
        return True
    depth = 0
    for part in re.split(r"[\\/]+", path):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in {"", "."}:
            depth += 1
    return False


def _artifact_rules(
    doc: dict[str, Any],
    success: bool,
    allowed_types: Sequence[str],
    probe: ArtifactProbe | None,
) -> Iterator[Finding]:
    seen: set[str] = set()
    for loc, art in _items(doc, "artifacts"):
        kind = get_str(art, "type")
        if kind is not None and kind not in allowed_types:
            yield finding(
                "PF204",
                f"{loc}.type",
                f"artifact type {kind!r} is not one of {', '.join(allowed_types)}",
            )
        path = get_str(art, "path")
        if not path or not path.strip():
            continue
        if path in seen:
            yield finding("PF504", f"{loc}.path", f"artifact {path!r} is listed twice")
        seen.add(path)
        if not Path(path).is_absolute() and _escapes_root(path):
            yield finding(
                "PF501",
                f"{loc}.path",
                f"artifact path {path!r} must be relative to the project root and stay inside it",
            )
            continue
        # Seed 003: the disk is checked only for the success status; partial, failed and
        # blocked returns may list artifacts that are incomplete or not written yet.
        if not success or probe is None:
            continue
        state = probe(path)
        if state is ArtifactState.OUTSIDE:
            yield finding(
                "PF501",
                f"{loc}.path",
                f"artifact path {path!r} resolves outside the project root (--root)",
            )
        elif state is ArtifactState.MISSING:
            yield finding(
                "PF502",
                f"{loc}.path",
                f"artifact {path!r} does not exist: write it before returning, or fix the path "
                "(relative to the project root)",
            )
        elif state is ArtifactState.NOT_A_FILE:
            yield finding("PF502", f"{loc}.path", f"artifact {path!r} is not a regular file")
        elif state is ArtifactState.EMPTY:
            yield finding("PF503", f"{loc}.path", f"artifact {path!r} is empty: write its content")


# --- the two validators ---------------------------------------------------------------------


@dataclass(slots=True)
class ReturnValidation:
    findings: list[Finding] = field(default_factory=list)
    status: str | None = None


def _validate_subagent_return(
    doc: dict[str, Any], expect_session: str | None, probe: ArtifactProbe | None
) -> ReturnValidation:
    result = ReturnValidation()
    out = result.findings
    out.extend(_structure(SubagentReturn, doc))
    out.extend(_blank_fields(doc, Dialect.SUBAGENT_RETURN))
    out.extend(_asked_fields(doc, Dialect.SUBAGENT_RETURN))

    raw_status = get_str(doc, "status")
    result.status = raw_status
    status = raw_status if raw_status in SUBAGENT_STATUSES else None
    if raw_status is not None and status is None:
        out.append(_status_finding(raw_status, "status", SUBAGENT_STATUSES, _SUBAGENT_STATUS_WORDS))
    if status is not None and status != "completed" and not get_list(doc, "errors"):
        out.append(
            finding(
                "PF703",
                "errors",
                f"status {status} needs an errors entry (type, message, recoverable, "
                "recommendation) saying what went wrong",
            )
        )

    out.extend(_session_rules(doc, expect_session))
    out.extend(_summary_rules(doc))

    artifacts = get_list(doc, "artifacts")
    if status == "completed" and artifacts is not None and not artifacts:
        out.append(
            finding(
                "PF500",
                "artifacts",
                "status completed with no artifacts: a phantom operation; list the files the "
                "run created, or return partial/failed",
            )
        )
    if status is not None:
        out.extend(_artifact_rules(doc, status == "completed", SUBAGENT_ARTIFACT_TYPES, probe))
    out.extend(_unknown_fields(doc, Dialect.SUBAGENT_RETURN))
    return result


def _validate_agent_output(doc: dict[str, Any], probe: ArtifactProbe | None) -> ReturnValidation:
    result = ReturnValidation()
    out = result.findings
    out.extend(_structure(AgentOutput, doc))
    out.extend(_blank_fields(doc, Dialect.AGENT_OUTPUT))
    out.extend(_asked_fields(doc, Dialect.AGENT_OUTPUT))

    meta = get_object(doc, "meta")
    raw_status = get_str(meta, "status")
    result.status = raw_status
    status = raw_status if raw_status in OUTPUT_STATUSES else None
    if raw_status is not None and status is None:
        out.append(
            _status_finding(raw_status, "meta.status", OUTPUT_STATUSES, _OUTPUT_STATUS_WORDS)
        )
    if status == "error" and get_object(doc, "error") is None:
        out.append(
            finding(
                "PF704",
                "error",
                'status error needs an "error" object (code, message, details) saying what failed',
            )
        )
    if status == "partial" and get_list(doc, "next_steps") == []:
        out.append(
            finding(
                "PF706",
                "next_steps",
                "status partial with no next_steps: say what is left to do",
            )
        )
    elapsed = get_number(meta, "execution_time_ms")
    if elapsed is not None and elapsed < 0:
        out.append(finding("PF406", "meta.execution_time_ms", "execution_time_ms is negative"))

    low, high = KEY_POINTS_RANGE
    for loc, art in _items(doc, "artifacts"):
        points = get_list(art, "key_points")
        if points is not None and not low <= len(points) <= high:
            out.append(
                finding(
                    "PF705",
                    f"{loc}.key_points",
                    f"{loc}.key_points has {len(points)} entries; give {low}-{high} key findings",
                )
            )
    if status is not None:
        out.extend(_artifact_rules(doc, status == "complete", OUTPUT_ARTIFACT_TYPES, probe))
    out.extend(_unknown_fields(doc, Dialect.AGENT_OUTPUT))
    return result


def validate_return(
    doc: object,
    dialect: Dialect,
    expect_session: str | None = None,
    probe: ArtifactProbe | None = None,
) -> ReturnValidation:
    """Every finding for one parsed return, in seed 003's order."""
    if not isinstance(doc, dict):
        return ReturnValidation(
            [
                finding(
                    "PF103",
                    "",
                    f"the return holds {json_type(doc)}, not a JSON object: return one object "
                    + (
                        '{"status": ..., "summary": ..., "artifacts": [...], "metadata": {...}}'
                        if dialect is Dialect.SUBAGENT_RETURN
                        else '{"meta": {...}, "artifacts": [...], "next_steps": [...]}'
                    ),
                )
            ]
        )
    if dialect is Dialect.SUBAGENT_RETURN:
        return _validate_subagent_return(doc, expect_session, probe)
    return _validate_agent_output(doc, probe)


# --- one input, end to end ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReturnReport:
    """What ``check-return`` found for one input."""

    source: str
    dialect: Dialect
    origin: Origin | None
    status: str | None
    findings: list[Finding]
    valid: bool

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.valid else ExitCode.FINDINGS

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dialect": self.dialect.value,
            "extracted_from": self.origin.value if self.origin else None,
            "status": self.status,
            "valid": self.valid,
            "findings": [f.to_json() for f in self.findings],
            "summary": {
                "errors": self.count(Severity.ERROR),
                "warnings": self.count(Severity.WARNING),
            },
        }


def check_bytes(
    raw: bytes,
    source: str,
    dialect: str = "auto",
    expect_session: str | None = None,
    probe: ArtifactProbe | None = None,
    policy: Policy | None = None,
) -> ReturnReport:
    """Extract, detect the dialect, validate and filter: the pure core of ``check-return``."""
    policy = policy or Policy()
    extracted = extract_return(raw)
    chosen = (
        detect_dialect(extracted.doc, extracted.marked) if dialect == "auto" else Dialect(dialect)
    )
    if extracted.failure is not None:
        findings = [extracted.failure]
        status = None
    else:
        validation = validate_return(extracted.doc, chosen, expect_session, probe)
        findings, status = validation.findings, validation.status
    kept = policy.apply(findings)
    # Input that yields no JSON object can never be valid, whatever --ignore says.
    usable = extracted.failure is None and isinstance(extracted.doc, dict)
    return ReturnReport(
        source=source,
        dialect=chosen,
        origin=extracted.origin,
        status=status,
        findings=kept,
        valid=usable and not policy.fails(kept),
    )


def too_big(source: str, dialect: str) -> ReturnReport:
    """The report for input over MAX_RETURN_BYTES (refused unparsed)."""
    chosen = Dialect.SUBAGENT_RETURN if dialect == "auto" else Dialect(dialect)
    f = finding(
        "PF101",
        "",
        f"the input is larger than the limit of {MAX_RETURN_BYTES} bytes: a console return "
        "is a short JSON object; details belong in artifacts",
    )
    return ReturnReport(source, chosen, None, None, [f], valid=False)


# --- I/O edge: reading, probing, reporting --------------------------------------------------


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


def read_input(file: str) -> bytes:
    """The bytes of FILE, or of stdin for ``-``; a file that cannot be read is a usage error."""
    if file == "-":
        return read_bounded(sys.stdin.buffer)
    path = Path(file)
    try:
        # A FIFO or /dev/fd/N from process substitution is fine here: the user named it.
        with path.open("rb") as fh:
            return read_bounded(fh)
    except FileNotFoundError:
        raise UsageError(f"{file}: no such file (give the return's file, or - for stdin)") from None
    except IsADirectoryError:
        raise UsageError(f"{file}: is a directory (give the return's file)") from None
    except OSError as exc:
        raise UsageError(f"{file}: cannot read: {exc.strerror or exc}") from None


def return_probe(root: Path) -> ArtifactProbe:
    """loader's probe, plus absolute paths: seed 003 checks them with ``[ -f "$path" ]``."""
    relative = artifact_probe(root)
    root_real = root.resolve()
    root_given = Path(os.path.normpath(root.absolute()))

    def probe(raw: str) -> ArtifactState:
        path = Path(raw)
        if not path.is_absolute():
            return relative(raw)
        # Decided from the text alone, before any lstat: probing first made PF501 ("outside")
        # and PF502 ("missing") tell whether any path on the machine exists.
        lexical = Path(os.path.normpath(path))
        for base in (root_real, root_given):
            if lexical.is_relative_to(base):
                # Inside as written: the relative probe follows links and still refuses one
                # that leads out.
                return relative(lexical.relative_to(base).as_posix() or ".")
        return ArtifactState.OUTSIDE

    return probe
