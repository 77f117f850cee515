"""Reporters for ``scan``: one function per ``--format``, writing to a stream.

Paths are shown relative to the current directory (absolute outside it), so that two roots'
files differ and CI annotations land on the right file in a monorepo; the JSON keeps each
file's path relative to its root (SPEC 4) and says which root.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TextIO

from postflightd.inert import inert, json_text

if TYPE_CHECKING:
    # Type-only: check-return's github format imports this module without the pipeline.
    from pathlib import Path

    from postflightd.findings import Finding
    from postflightd.pipeline import FileReport, ScanReport


@dataclass(frozen=True, slots=True)
class Options:
    """How a report is shown: colour, quiet or verbose, and the directory paths are shown from."""

    color: bool = False
    quiet: bool = False
    verbose: bool = False
    cwd: str = field(default_factory=os.getcwd)


# --- colour ----------------------------------------------------------------------------------

_RESET: Final = "\033[0m"
_STYLES: Final = {"error": "\033[1;31m", "warning": "\033[1;33m", "bold": "\033[1m"}


def paint(text: str, style: str, on: bool) -> str:
    """``text`` in an ANSI style when ``on``; plain otherwise."""
    return f"{_STYLES[style]}{text}{_RESET}" if on else text


def use_color(choice: str, stream: TextIO, env: os._Environ[str] | dict[str, str]) -> bool:
    """``--color``: always, never, or auto (a terminal, and NO_COLOR unset or empty).

    An explicit ``--color always`` overrides NO_COLOR, as no-color.org asks of command-line
    flags.
    """
    if choice == "always":
        return True
    if choice == "never" or env.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


# --- paths ------------------------------------------------------------------------------------


def display_path(file: Path | str, cwd: str) -> str:
    """A path relative to ``cwd``, or absolute when it lies outside it."""
    path = str(file)
    prefix = cwd.rstrip(os.sep) + os.sep
    if path.startswith(prefix):
        return path[len(prefix) :].replace(os.sep, "/")
    return path.replace(os.sep, "/")


# --- text -------------------------------------------------------------------------------------


def report_text(report: ScanReport, out: TextIO, options: Options | None = None) -> None:
    """``path:CODE severity: message`` per finding, then a summary line (not with -q)."""
    o = options or Options()
    for file in report.files:
        path = paint(inert(display_path(file.path, o.cwd)), "bold", o.color)
        for f in file.findings:
            sev = f.severity.value
            out.write(
                f"{path}:{paint(f.code, sev, o.color)} {paint(sev, sev, o.color)}: "
                f"{inert(f.message)}\n"
            )
    if o.quiet:
        return
    applied = [f for f in report.files if f.outcome is not None and f.outcome.value == "applied"]
    if o.verbose:
        for file in applied:
            out.write(f"applied {inert(display_path(file.path, o.cwd))} (task {file.task})\n")
    s = report.summary()
    stuck = f", {s['stuck']} stuck" if s["stuck"] else ""
    out.write(
        f"{s['files']} file(s): {s['valid']} valid, {s['invalid']} invalid; "
        f"{s['errors']} error(s), {s['warnings']} warning(s){stuck}\n"
    )
    if any(f.outcome is not None for f in report.files):
        out.write(f"{len(applied)} file(s) applied\n")


# --- json -------------------------------------------------------------------------------------


def report_json(report: ScanReport, out: TextIO, options: Options | None = None) -> None:
    """The object of SPEC 4: roots, files (valid ones included, each with its root), summary."""
    del options  # one shape whatever the options
    # One dumps and one write: json.dump streams hundreds of thousands of tiny writes, which
    # took over a second of a 10,000-file scan. Indented only for a person at a terminal:
    # with indent, json falls back from its C encoder to pure Python (0.5 s for 10,000 files).
    indent = 2 if out.isatty() else None
    out.write(json_text(report.to_json(), indent=indent) + "\n")


# --- github -----------------------------------------------------------------------------------


def _escape_data(text: str) -> str:
    # GitHub workflow commands: %, CR and LF must be escaped in the message (GitHub shows
    # %0A as a line break inside the annotation: it cannot start a new command); any other
    # control character (ESC, a lone surrogate) is made inert as in text output.
    return inert(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    # ...and additionally ':' and ',' in property values.
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotation(f: Finding, path: str | None) -> str:
    """``::error file=...,line=...,col=...,title=PF303::message`` (no file= for stdin)."""
    level = "error" if f.severity.value == "error" else "warning"
    props = [f"file={_escape_property(path)}"] if path is not None else []
    if path is not None and f.line is not None:
        props.append(f"line={f.line}")
        if f.col is not None:
            props.append(f"col={f.col}")
    props.append(f"title={_escape_property(f.code)}")
    return f"::{level} {','.join(props)}::{_escape_data(f.message)}"


def positioned(file: FileReport) -> list[Finding]:
    """The file's findings with their line and column, found from the bytes it was read as.

    Done here, for the formats that show positions, rather than for every scan: walking the
    documents costs a sixth of a 10,000-file scan.
    """
    if file.loaded.raw is None or all(f.line is not None for f in file.findings):
        return list(file.findings)
    from postflightd.positions import with_positions

    return with_positions(file.findings, file.loaded.raw)


def report_github(report: ScanReport, out: TextIO, options: Options | None = None) -> None:
    """One workflow command per finding, with line and column where the finding has them."""
    o = options or Options()
    for file in report.files:
        path = display_path(file.path, o.cwd)
        for f in positioned(file):
            out.write(github_annotation(f, path) + "\n")


# --- sarif ------------------------------------------------------------------------------------

SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"


def sarif_log(report: ScanReport, cwd: str) -> dict[str, Any]:
    """A SARIF 2.1.0 log of the scan, for GitHub code scanning (``upload-sarif``)."""
    from postflightd import __version__
    from postflightd.findings import RULES

    codes = sorted({f.code for file in report.files for f in file.findings})
    index = {code: i for i, code in enumerate(codes)}
    rules = [
        {
            "id": code,
            "shortDescription": {"text": RULES[code].summary},
            "helpUri": "https://github.com/postflightd/postflightd#rules",
            "help": {"text": f"postflightd rules {code}"},
            "defaultConfiguration": {"level": RULES[code].severity.value},
        }
        for code in codes
    ]
    from urllib.parse import quote

    base = "file://" + quote(cwd.rstrip("/")) + "/"
    results: list[dict[str, Any]] = []
    for file in report.files:
        shown = display_path(file.path, cwd)
        # Relative to the checkout (code scanning's %SRCROOT%), or an absolute file: URI.
        artifact: dict[str, Any] = (
            {"uri": "file://" + quote(shown)}
            if shown.startswith("/")
            else {"uri": quote(shown), "uriBaseId": "%SRCROOT%"}
        )
        for f in positioned(file):
            region = {"startLine": f.line or 1}
            if f.col is not None:
                region["startColumn"] = f.col
            results.append(
                {
                    "ruleId": f.code,
                    "ruleIndex": index[f.code],
                    "level": f.severity.value,
                    "message": {"text": f.message},
                    "locations": [
                        {
                            "physicalLocation": {"artifactLocation": artifact, "region": region},
                            **(
                                {"logicalLocations": [{"fullyQualifiedName": f.location}]}
                                if f.location
                                else {}
                            ),
                        }
                    ],
                }
            )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "postflightd",
                        "version": __version__,
                        "informationUri": "https://github.com/postflightd/postflightd",
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base}},
                "results": results,
            }
        ],
    }


def report_sarif(report: ScanReport, out: TextIO, options: Options | None = None) -> None:
    o = options or Options()
    out.write(json_text(sarif_log(report, o.cwd), indent=2) + "\n")


# --- --statistics -----------------------------------------------------------------------------


def statistics(report: ScanReport) -> list[dict[str, Any]]:
    """Findings counted per code, most frequent first (as ``ruff --statistics``)."""
    from postflightd.findings import RULES

    counts = Counter((f.code, f.severity.value) for file in report.files for f in file.findings)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0][0]))
    return [
        {"code": code, "severity": sev, "count": n, "summary": RULES[code].summary}
        for (code, sev), n in rows
    ]


def report_statistics(report: ScanReport, out: TextIO, fmt: str, options: Options) -> None:
    rows = statistics(report)
    if fmt == "json":
        out.write(json_text(rows, indent=2) + "\n")
        return
    width = max((len(str(r["count"])) for r in rows), default=1)
    for r in rows:
        sev = r["severity"]
        out.write(
            f"{r['count']:>{width}}  {paint(r['code'], sev, options.color)}  "
            f"{sev:<7}  {r['summary']}\n"
        )


Reporter = Callable[["ScanReport", TextIO, Options | None], None]

REPORTERS: dict[str, Reporter] = {
    "text": report_text,
    "json": report_json,
    "github": report_github,
    "sarif": report_sarif,
}
