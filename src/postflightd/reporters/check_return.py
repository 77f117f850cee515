"""Reporters for ``check-return``: one function per ``--format``, writing to a stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TextIO

from postflightd.inert import inert, json_text
from postflightd.models.terms import Dialect
from postflightd.reporters import Reporter
from postflightd.reporters.scan import github_annotation
from postflightd.reporters.style import Options
from postflightd.rules.findings import Severity
from postflightd.words import counted

if TYPE_CHECKING:
    from postflightd.pipeline.console_return import ReturnReport


#: What each dialect is called in a sentence (its ``--dialect`` name is hyphenated).
_KIND: Final = {
    Dialect.SUBAGENT_RETURN: "subagent return",
    Dialect.AGENT_OUTPUT: "agent output",
}


def report_text(report: ReturnReport, out: TextIO, options: Options | None = None) -> None:
    """``source:CODE severity: message`` per finding, then one verdict line."""
    del options  # one shape
    source = inert(report.source)
    for f in report.findings:
        out.write(f"{source}: {f.code} {f.severity.value}: {inert(f.message)}\n")
    verdict = "valid" if report.valid else "invalid"
    status = f", status {inert(report.status)}" if report.status is not None else ""
    out.write(
        f"{source}: {verdict} {_KIND[report.dialect]}{status}; "
        f"{counted(report.count(Severity.ERROR), 'error')}, "
        f"{counted(report.count(Severity.WARNING), 'warning')}\n"
    )


def report_json(report: ReturnReport, out: TextIO, options: Options | None = None) -> None:
    del options
    out.write(json_text(report.to_json(), indent=2) + "\n")


def report_github(report: ReturnReport, out: TextIO, options: Options | None = None) -> None:
    """One GitHub workflow command per finding, on the return's file (none for stdin)."""
    del options
    path = None if report.source == "<stdin>" else report.source
    for f in report.findings:
        out.write(github_annotation(f, path) + "\n")


REPORTERS: dict[str, Reporter[ReturnReport]] = {
    "text": report_text,
    "json": report_json,
    "github": report_github,
}
