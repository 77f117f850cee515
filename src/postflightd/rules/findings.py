"""Findings and the one registry of rule codes.

Every code the product can report is listed in ``RULES`` (code, default severity, one-line
description). Docs, ``--select``/``--ignore``, configuration and the tests all read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Rule:
    """One code of the registry."""

    code: str
    severity: Severity
    summary: str


E, W = Severity.ERROR, Severity.WARNING

RULES: dict[str, Rule] = {
    r.code: r
    for r in (
        Rule("PF100", E, "the path is not a regular file (symlink, directory, FIFO): refused"),
        Rule("PF101", E, "file larger than max_file_bytes"),
        Rule("PF102", E, "not UTF-8, or not valid JSON once the file has settled"),
        Rule("PF103", E, "top-level JSON value is not an object"),
        Rule("PF104", E, "task directory name is not {number}_{slug}"),
        Rule("PF105", E, "the file cannot be read (permission denied or I/O error)"),
        Rule(
            "PF106",
            E,
            "valid, but its outcome cannot be journaled or written (a lone surrogate, an "
            "integer over 4,300 digits, a name that is not UTF-8): left out of its batch",
        ),
        Rule("PF200", E, "a field postflight needs is missing"),
        Rule("PF201", E, "a field has the wrong type"),
        Rule("PF202", E, "status is not one of the seven statuses"),
        Rule("PF203", E, "status is completed: must be researched, planned or implemented"),
        Rule("PF204", W, "artifact type is not report/plan/summary/implementation"),
        Rule("PF205", W, "unknown field (kept)"),
        Rule("PF206", E, "a text field is blank (error where postflight needs it, else warning)"),
        Rule(
            "PF207", W, "a field the schema asks for is missing or blank, not needed by postflight"
        ),
        Rule("PF208", W, "an artifact given as a plain path string (type from its folder)"),
        Rule("PF300", E, "in_progress without started_at"),
        Rule("PF301", E, "started_at is not ISO 8601, or lies more than 5 minutes in the future"),
        Rule("PF302", W, "in_progress or partial without partial_progress"),
        Rule("PF303", E, "implemented without completion_data"),
        Rule("PF304", E, "completion_data without a non-empty completion_summary (implemented)"),
        Rule("PF305", E, "meta task implemented without claudemd_suggestions"),
        Rule(
            "PF306", W, "roadmap_items on a meta task, or claudemd_suggestions on a non-meta task"
        ),
        Rule("PF307", W, "partial, failed or blocked with no errors entry"),
        Rule("PF308", W, "partial_progress left on a success status"),
        Rule("PF309", W, "completion_data on a status other than implemented"),
        Rule("PF310", E, "phases_completed negative or greater than phases_total"),
        Rule("PF400", W, "session_id is not sess_{digits}_{6 lower-case letters or digits}"),
        Rule("PF401", E, "delegation_depth below 0 or above the maximum 3"),
        Rule("PF402", E, "delegation_path names an agent twice (a delegation cycle)"),
        Rule("PF403", W, "delegation_depth is not len(delegation_path) - 2"),
        Rule("PF404", W, "agent_type is not the last entry of delegation_path"),
        Rule("PF405", E, "session_id differs from the expected session"),
        Rule("PF406", E, "duration_seconds negative"),
        Rule("PF500", E, "success status with no artifacts (a phantom operation)"),
        Rule(
            "PF501",
            E,
            "artifact path absolute, outside the root, a URI, too long, with control characters "
            "or not a name the system can encode",
        ),
        Rule("PF502", E, "artifact file does not exist (warning for non-success statuses)"),
        Rule("PF503", E, "artifact file is empty (warning for non-success statuses)"),
        Rule("PF504", W, "the same artifact path listed twice"),
        Rule("PF600", E, "task number not in state.json active_projects"),
        Rule("PF601", W, "directory slug differs from the task's project_name"),
        Rule("PF602", E, "agent stuck: in_progress and started_at older than the timeout"),
        Rule("PF603", W, "a new session replaced an unfinished in_progress file (watch mode)"),
        Rule("PF604", E, "state.json missing, not JSON, or not of the expected shape"),
        Rule("PF605", W, "the .postflight-pending marker is not valid JSON (names no session)"),
        Rule(
            "PF606",
            E,
            "applied to state.json, but TODO.md or errors.json could not be written: file kept",
        ),
        Rule(
            "PF607",
            W,
            "a final file older than its operation's timeout when first seen (a leftover): "
            "applying it records the file's own date",
        ),
        # check-return only: rules of the two console return dialects.
        Rule("PF700", E, "check-return: no JSON found in the return or final message"),
        Rule("PF701", W, "check-return: summary over about 100 tokens (400 characters)"),
        Rule("PF702", E, "check-return: summary over 500 characters"),
        Rule("PF703", E, "check-return: status other than completed with no errors entry"),
        Rule("PF704", E, "check-return: agent-output status error without an error object"),
        Rule("PF705", W, "check-return: an artifact's key_points does not hold 3-5 entries"),
        Rule("PF706", W, "check-return: agent-output status partial with empty next_steps"),
    )
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing wrong with one document, at one JSON location."""

    code: str
    severity: Severity
    location: str
    message: str
    #: where in the file (1-based), when known: for the github and sarif formats only
    line: int | None = None
    col: int | None = None
    #: what to write instead (a JSON member, ``"status": "researched"``), built by the rule
    #: from the same values as its message and from the file's own (the status it suggests,
    #: this task's directory, the session expected); None when no one replacement is known.
    #: The dashboard shows it; the CLI's message already says it in words.
    fix: str | None = None

    def to_json(self) -> dict[str, str]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "location": self.location,
            "message": self.message,
        }


def finding(
    code: str,
    location: str,
    message: str,
    severity: Severity | None = None,
    *,
    fix: str | None = None,
) -> Finding:
    """Build a finding with the registry's severity unless the rule itself picks one."""
    return Finding(code, severity or RULES[code].severity, location, message, fix=fix)


#: The code of "state.json is unusable": missing, not JSON, not of the expected shape, or the
#: specs directory that holds it refused. Postflight is impossible until it is fixed.
STATE_UNUSABLE: Final = "PF604"


def state_unusable(problem: str, then: str = "; the metadata file is kept") -> Finding:
    """The PF604 finding: ``problem`` says what is wrong with state.json, ``then`` what follows."""
    return finding(STATE_UNUSABLE, "", f"{problem}{then}")


def state_unusable_text(problem: str) -> str:
    """``problem`` (state.json or the specs directory unusable) tagged with its code, for a
    message that is not a finding: a refusal, a note, a log line."""
    return f"{problem} ({STATE_UNUSABLE})"


class UnknownCodeError(ValueError):
    """A code given in --select/--ignore or configuration is not in the registry."""


def expand_codes(codes: Iterable[str]) -> frozenset[str]:
    """Normalise codes given repeated or comma-separated; a prefix (``PF3``) selects a group."""
    result: set[str] = set()
    for item in codes:
        for raw in item.split(","):
            code = raw.strip().upper()
            if not code:
                continue
            matched = {c for c in RULES if c.startswith(code)}
            if not matched:
                raise UnknownCodeError(
                    f"unknown rule code {raw.strip()!r} (codes run from PF100 to PF706; "
                    "`postflightd rules` lists them)"
                )
            result |= matched
    return frozenset(result)


@dataclass(frozen=True, slots=True)
class Policy:
    """Which findings count, at which severity (``[validation]``: select, ignore, severity,
    strict)."""

    select: frozenset[str] = frozenset()
    ignore: frozenset[str] = frozenset()
    severity: Mapping[str, Severity] | None = None
    strict: bool = False

    def shows(self, code: str) -> bool:
        """True when findings of ``code`` are kept (selected, or no selection; not ignored)."""
        return (not self.select or code in self.select) and code not in self.ignore

    def apply(self, findings: Iterable[Finding]) -> list[Finding]:
        kept: list[Finding] = []
        for f in findings:
            if not self.shows(f.code):
                continue
            if self.severity and f.code in self.severity:
                f = replace(f, severity=self.severity[f.code])  # noqa: PLW2901 - rebinding is the point
            kept.append(f)
        return kept

    def fails(self, findings: Iterable[Finding]) -> bool:
        """True when the (already filtered) findings make a file invalid."""
        return any(f.severity is Severity.ERROR or self.strict for f in findings)


#: At most this many findings are kept per file, in output, journal and log: a hostile file
#: cannot make any of them grow without bound.
MAX_FINDINGS_PER_FILE = 100


def cap_findings(findings: list[Finding], limit: int = MAX_FINDINGS_PER_FILE) -> list[Finding]:
    """The first ``limit`` findings, then one "and N more" finding summing up the rest.

    A hostile file can hold hundreds of thousands of faults; every one kept would be
    rendered, journaled and logged. The summary keeps the counts per code and the worst
    severity, so an error beyond the cut still fails the file.
    """
    if len(findings) <= limit:
        return findings
    rest = findings[limit:]
    counts: dict[str, int] = {}
    worst = Severity.WARNING
    for f in rest:
        counts[f.code] = counts.get(f.code, 0) + 1
        if f.severity is Severity.ERROR:
            worst = Severity.ERROR
    by_code = ", ".join(
        f"{code} x{n:,}" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    more = Finding(
        rest[0].code,
        worst,
        "",
        f"and {len(rest):,} more ({by_code}); only the first {limit} findings are kept",
    )
    return [*findings[:limit], more]
