"""Reporters for ``check-return``: one function per ``--format``, writing to a stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from postflightd.inert import inert, json_text
from postflightd.reporters import Reporter
from postflightd.reporters.scan import github_annotation
from postflightd.reporters.style import Options
from postflightd.rules.findings import Severity

if TYPE_CHECKING:
    from postflightd.pipeline.console_return import ReturnReport


def report_text(report: ReturnReport, out: TextIO, options: Options | None = None) -> None:
    """``source:CODE severity: message`` per finding, then one verdict line."""
    del options  # one shape
    source = inert(report.source)
    for f in report.findings:
        out.write(f"{source}:{f.code} {f.severity.value}: {inert(f.message)}\n")
    verdict = "valid" if report.valid else "invalid"
    status = f", status {inert(report.status)}" if report.status is not None else ""
    out.write(
        f"{source}: {verdict} {report.dialect.value} return{status}; "
        f"{report.count(Severity.ERROR)} error(s), {report.count(Severity.WARNING)} warning(s)\n"
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
