"""Reporters for ``scan``: one function per ``--format``, writing to a stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    # Type-only: check-return's github format imports this module without the pipeline.
    from postflightd.findings import Finding
    from postflightd.pipeline import ScanReport


def report_text(report: ScanReport, out: TextIO) -> None:
    """``path:CODE severity: message`` per finding, then a summary line."""
    for file in report.files:
        for f in file.findings:
            out.write(f"{file.rel_path}:{f.code} {f.severity.value}: {f.message}\n")
    s = report.summary()
    stuck = f", {s['stuck']} stuck" if s["stuck"] else ""
    out.write(
        f"{s['files']} file(s): {s['valid']} valid, {s['invalid']} invalid; "
        f"{s['errors']} error(s), {s['warnings']} warning(s){stuck}\n"
    )


def report_json(report: ScanReport, out: TextIO) -> None:
    """The object of SPEC 4: roots, files (valid ones included), summary."""
    # One dumps and one write: json.dump streams hundreds of thousands of tiny writes, which
    # took over a second of a 10,000-file scan. Indented only for a person at a terminal:
    # with indent, json falls back from its C encoder to pure Python (0.5 s for 10,000 files).
    indent = 2 if out.isatty() else None
    out.write(json.dumps(report.to_json(), indent=indent, ensure_ascii=False) + "\n")


def _escape_data(text: str) -> str:
    # GitHub workflow commands: %, CR and LF must be escaped in the message...
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    # ...and additionally ':' and ',' in property values.
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotation(
    f: Finding, path: str | None, line: int | None = None, col: int | None = None
) -> str:
    """``::error file=...,line=...,col=...,title=PF303::message`` (no file= for stdin)."""
    level = "error" if f.severity.value == "error" else "warning"
    props = [f"file={_escape_property(path)}"] if path is not None else []
    if line is not None:
        props.append(f"line={line}")
        if col is not None:
            props.append(f"col={col}")
    props.append(f"title={_escape_property(f.code)}")
    return f"::{level} {','.join(props)}::{_escape_data(f.message)}"


def report_github(report: ScanReport, out: TextIO) -> None:
    """One workflow command per finding: ``::error file=...,title=PF303::message``."""
    for file in report.files:
        for f in file.findings:
            out.write(github_annotation(f, file.rel_path) + "\n")


REPORTERS: dict[str, Callable[[ScanReport, TextIO], None]] = {
    "text": report_text,
    "json": report_json,
    "github": report_github,
}
