"""The check-return rule set: the five steps an orchestrator runs on a parsed console return
(structure, required fields, status, session, artifacts), in either dialect.

Pure: takes the parsed value, the dialect, the expected session and an artifact probe, and
returns findings; it never raises on any JSON value. The checks themselves are the rule
toolkit's (``toolkit``); this module holds the two dialects' tables and the rules only a
console return has (PF7xx).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from postflightd.inert import clip
from postflightd.models.console_return import (
    KNOWN_FIELDS,
    OUTPUT_ARTIFACT_TYPES,
    OUTPUT_STATUSES,
    SUBAGENT_ARTIFACT_TYPES,
    SUBAGENT_STATUSES,
    AgentOutput,
    SubagentReturn,
)
from postflightd.models.terms import Dialect
from postflightd.rules.findings import Finding, finding
from postflightd.rules.fixes import guess_status
from postflightd.rules.probe import ArtifactProbe
from postflightd.rules.toolkit import (
    ArtifactContract,
    artifact_rules,
    asked_fields,
    blank_fields,
    get_list,
    get_number,
    get_object,
    get_str,
    not_an_object,
    objects_of,
    outside_root,
    session_rules,
    status_finding,
    structure,
    unknown_fields,
)
from postflightd.words import counted

#: The subagent-return contract asks for a summary under 100 tokens (about 400 characters),
#: and its orchestrators refuse one over 500 characters.
SUMMARY_WARN_CHARS: Final = 400
SUMMARY_MAX_CHARS: Final = 500
#: The agent-output contract asks for 3-5 key findings or highlights per artifact.
KEY_POINTS_RANGE: Final = (3, 5)


# Words agents write instead of the dialect's status, and the status they mean.
_SUBAGENT_STATUS_WORDS: Final = {
    "completed": (
        *("success", "succeeded", "successful", "done", "complete", "finished", "ok"),
        # the metadata file's success statuses, written by the same agents
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


# --- the rules only a console return has ----------------------------------------------------


def _subagent_rules(
    doc: dict[str, Any], status: str | None, expect_session: str | None
) -> Iterator[Finding]:
    """PF703, the session and delegation (step 4), and the summary's length."""
    if status is not None and status != "completed" and not get_list(doc, "errors"):
        yield finding(
            "PF703",
            "errors",
            f"status {status} needs an errors entry (type, message, recoverable, "
            "recommendation) saying what went wrong",
        )
    expected = None if expect_session is None else (expect_session, "--expect-session")
    yield from session_rules(doc.get("metadata"), expected)
    yield from _summary_rules(doc)


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


def _output_rules(
    doc: dict[str, Any], status: str | None, expect_session: str | None
) -> Iterator[Finding]:
    """PF704, PF706, a negative execution time and the key points of each artifact."""
    if status == "error" and get_object(doc, "error") is None:
        yield finding(
            "PF704",
            "error",
            'status error needs an "error" object (code, message, details) saying what failed',
        )
    if status == "partial" and get_list(doc, "next_steps") == []:
        yield finding(
            "PF706",
            "next_steps",
            "status partial with no next_steps: say what is left to do",
        )
    elapsed = get_number(get_object(doc, "meta"), "execution_time_ms")
    if elapsed is not None and elapsed < 0:
        yield finding("PF406", "meta.execution_time_ms", "execution_time_ms is negative")
    low, high = KEY_POINTS_RANGE
    for loc, art in objects_of(doc, "artifacts[]"):
        points = get_list(art, "key_points")
        if points is not None and not low <= len(points) <= high:
            yield finding(
                "PF705",
                f"{loc}.key_points",
                f"{loc}.key_points has {counted(len(points), 'entry')}; "
                f"give {low}-{high} key findings",
            )


# --- the two dialects' tables ---------------------------------------------------------------


def _outside_problem(path: str) -> str | None:
    # Absolute paths are the probe's to judge: orchestrators check them with [ -f "$path" ].
    if outside_root(path, absolute_allowed=True):
        return (
            f"artifact path {clip(path)!r} must be relative to the project root and stay inside it"
        )
    return None


@dataclass(frozen=True, slots=True)
class _Contract:
    """Where the two dialects differ; the steps are the same."""

    model: type[BaseModel]
    #: the object holding ``status``: "" for the return itself.
    status_in: str
    statuses: Sequence[str]
    status_words: Mapping[str, Sequence[str]]
    #: the status whose artifacts must exist on disk (work not finished may not be written yet).
    success: str
    #: PF206: text fields the orchestrator needs, which must not be blank.
    needed: Sequence[tuple[str, str]]
    #: fields the contract asks for but the orchestrator can do without: PF207, not PF200.
    asked: Mapping[str, Sequence[str]]
    artifacts: ArtifactContract
    #: the dialect's own rules, given the return, its valid status or None, the session.
    own_rules: Callable[[dict[str, Any], str | None, str | None], Iterator[Finding]]
    #: the shape of a return, for PF103.
    example: str


def _artifacts(types: Sequence[str], phantom: str | None) -> ArtifactContract:
    return ArtifactContract(
        types=types,
        path_problem=_outside_problem,
        phantom=phantom,
        outside="(--root)",
        write_it="write it before returning",
    )


_CONTRACTS: Final = {
    Dialect.SUBAGENT_RETURN: _Contract(
        model=SubagentReturn,
        status_in="",
        statuses=SUBAGENT_STATUSES,
        status_words=_SUBAGENT_STATUS_WORDS,
        success="completed",
        needed=(
            ("", "summary"),
            ("metadata", "session_id"),
            ("artifacts[]", "path"),
            ("errors[]", "message"),
        ),
        asked={
            "artifacts[]": ("type", "summary"),
            "errors[]": ("type", "recoverable", "recommendation"),
        },
        artifacts=_artifacts(SUBAGENT_ARTIFACT_TYPES, phantom="return"),
        own_rules=_subagent_rules,
        example='{"status": ..., "summary": ..., "artifacts": [...], "metadata": {...}}',
    ),
    Dialect.AGENT_OUTPUT: _Contract(
        model=AgentOutput,
        status_in="meta",
        statuses=OUTPUT_STATUSES,
        status_words=_OUTPUT_STATUS_WORDS,
        success="complete",
        needed=(("meta", "agent_name"), ("artifacts[]", "path"), ("error", "message")),
        asked={
            "meta": ("execution_time_ms",),
            "artifacts[]": ("type", "summary", "key_points"),
            "error": ("code",),
        },
        # The agent-output contract has no phantom operation: a complete output (a review, a
        # verification) may list no files.
        artifacts=_artifacts(OUTPUT_ARTIFACT_TYPES, phantom=None),
        own_rules=_output_rules,
        example='{"meta": {...}, "artifacts": [...], "next_steps": [...]}',
    ),
}


# --- the validator --------------------------------------------------------------------------


@dataclass(slots=True)
class ReturnValidation:
    findings: list[Finding] = field(default_factory=list)
    status: str | None = None


def validate_return(
    doc: object,
    dialect: Dialect,
    expect_session: str | None = None,
    probe: ArtifactProbe | None = None,
) -> ReturnValidation:
    """Every finding for one parsed return, in the order of the five steps."""
    contract = _CONTRACTS[dialect]
    if not isinstance(doc, dict):
        return ReturnValidation(
            [not_an_object(doc, "the return", f"return one object {contract.example}")]
        )
    result = ReturnValidation()
    out = result.findings
    # Steps 1-2: required fields and their types.
    out.extend(structure(contract.model.model_validate, doc, "the return")[0])
    out.extend(blank_fields(doc, contract.needed))
    for kind, keys in contract.asked.items():
        for loc, obj in objects_of(doc, kind):
            out.extend(asked_fields(obj, keys, loc, "the contract asks for it"))

    # Step 3: the status.
    holder = doc if contract.status_in == "" else get_object(doc, contract.status_in)
    raw_status = get_str(holder, "status")
    result.status = raw_status
    status = raw_status if raw_status in contract.statuses else None
    if raw_status is not None and status is None:
        loc = f"{contract.status_in}.status" if contract.status_in else "status"
        guess = guess_status(raw_status, contract.statuses, contract.status_words)
        out.append(status_finding(raw_status, loc, contract.statuses, guess, " (case-sensitive)"))

    # Step 4, and what only this dialect asks.
    out.extend(contract.own_rules(doc, status, expect_session))

    # Step 5: the artifacts. The disk is checked only for the success status: partial,
    # failed and blocked returns may list artifacts that are incomplete or not written yet.
    if status is not None:
        success = status == contract.success
        out.extend(
            artifact_rules(doc, status, success, contract.artifacts, probe if success else None)
        )
    out.extend(unknown_fields(doc, KNOWN_FIELDS[dialect], "kept"))
    return result
