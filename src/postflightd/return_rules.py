"""The check-return rule set: seed 003's five steps for a parsed console return, in either
dialect.

Pure: takes the parsed value, the dialect, the expected session and an artifact probe, and
returns findings; it never raises on any JSON value.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from postflightd.findings import Finding, finding
from postflightd.return_models import (
    KNOWN_FIELDS,
    OUTPUT_ARTIFACT_TYPES,
    OUTPUT_STATUSES,
    SUBAGENT_ARTIFACT_TYPES,
    SUBAGENT_STATUSES,
    AgentOutput,
    Dialect,
    SubagentReturn,
)
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

#: Seed 000: "<100 tokens (~400 characters)"; seed 001's validator asserts len <= 500.
SUMMARY_WARN_CHARS: Final = 400
SUMMARY_MAX_CHARS: Final = 500
#: Seed 002: "3-5 key findings or highlights" per artifact.
KEY_POINTS_RANGE: Final = (3, 5)


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
    for kind, known in KNOWN_FIELDS[dialect].items():
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
