"""Reporters for ``scan``: one function per ``--format``, writing to a stream.

Paths are shown relative to the current directory (absolute outside it), so that two roots'
files differ and CI annotations land on the right file in a monorepo; the JSON keeps each
file's path relative to its root (as state.json and the journal do) and says which root.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TextIO

from postflightd.inert import inert, json_text
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options, display_path, paint
from postflightd.words import counted

if TYPE_CHECKING:
    from pathlib import Path

    from postflightd.pipeline.results import FileReport
    from postflightd.pipeline.summaries import ScanReport, Tally
    from postflightd.rules.findings import Finding


@dataclass(frozen=True, slots=True)
class Scanned:
    """What ``scan`` reports, as it comes: ``scan`` streams its files, each checked, written
    and forgotten, so ``files`` is consumed once and ``tally`` is complete only after."""

    roots: list[Path]
    files: Iterable[FileReport]
    tally: Tally


# --- text -------------------------------------------------------------------------------------


def write_text(scanned: Scanned, out: TextIO, options: Options | None = None) -> None:
    """``path:line:col: CODE severity: message`` per finding (as compilers and ruff print
    them, so that a terminal or an editor opens the file there; a finding about the file as a
    whole points at 1:1), then a summary line (not with -q).

    Written as the files come; ``tally`` is complete once they are consumed.
    """
    files, tally = scanned.files, scanned.tally  # paths are shown from the current directory
    o = options or Options()
    applied: list[tuple[str, int | None]] = []
    for file in files:
        if file.findings:
            path = paint(inert(display_path(file.path_text, o.cwd)), "bold", o.color)
            for f in positioned(file):
                out.write(f"{path}:{finding_line(f, o.color)}\n")
        if o.verbose and file.outcome is not None and file.outcome.value == "applied":
            applied.append((display_path(file.path_text, o.cwd), file.task))
    if o.quiet:
        return
    for shown, task in applied:
        out.write(f"applied {inert(shown)} (task {task})\n")
    s = tally.summary()
    stuck = f", {s['stuck']} stuck" if s["stuck"] else ""
    out.write(
        f"{counted(s['files'], 'file')}: {s['valid']} valid, {s['invalid']} invalid; "
        f"{counted(s['errors'], 'error')}, {counted(s['warnings'], 'warning')}{stuck}\n"
    )
    if tally.postflighted:
        out.write(f"{counted(tally.applied, 'file')} applied\n")


def finding_line(f: Finding, color: bool = False) -> str:
    """``line:col: CODE severity: message``, what follows the path in text output."""
    sev = f.severity.value
    return (
        f"{f.line or 1}:{f.col or 1}: {paint(f.code, sev, color)} {paint(sev, sev, color)}: "
        f"{inert(f.message)}"
    )


# --- json -------------------------------------------------------------------------------------


def write_json(scanned: Scanned, out: TextIO, options: Options | None = None) -> None:
    """One object: roots, files (valid ones included, each with its root), summary.

    Written as the files come, byte for byte what ``json.dumps`` of the whole object gives
    (one file's entry at a time, so memory does not grow with the files)."""
    del options  # one shape whatever the options
    roots, files, tally = scanned.roots, scanned.files, scanned.tally
    # Indented only for a person at a terminal: with indent, json falls back from its C
    # encoder to pure Python (0.5 s for 10,000 files). Each entry is one dumps and one write:
    # json.dump streams tiny writes, which took over a second of a 10,000-file scan.
    if out.isatty():
        out.write('{\n  "roots": ' + _nested([str(r) for r in roots], 1) + ',\n  "files": [')
        count = 0
        for file in files:
            out.write(("," if count else "") + "\n    " + _nested(file.to_json(), 2))
            count += 1
        out.write("\n  ]" if count else "]")
        out.write(',\n  "summary": ' + _nested(tally.summary(), 1) + "\n}\n")
        return
    out.write('{"roots": ' + json_text([str(r) for r in roots]) + ', "files": [')
    # Entries are encoded and written a batch at a time: a write per entry cost 15 us each
    # (0.15 s for 10,000 files), an encoding per entry 1.3 us; a batch bounds what is held to
    # _BATCH entries. A list's JSON is its entries' joined by ", ", in brackets.
    batch: list[dict[str, Any]] = []
    first = True
    for file in files:
        batch.append(file.to_json())
        if len(batch) == _BATCH:
            out.write(("" if first else ", ") + json_text(batch)[1:-1])
            batch.clear()
            first = False
    if batch:
        out.write(("" if first else ", ") + json_text(batch)[1:-1])
    out.write('], "summary": ' + json_text(tally.summary()) + "}\n")


_BATCH: Final = 256


def _nested(value: object, level: int) -> str:
    """``value`` indented by 2 as it appears ``level`` levels deep in an indented document
    (JSON text holds no raw line break but those indent puts there)."""
    return json_text(value, indent=2).replace("\n", "\n" + "  " * level)


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
    from postflightd.rules.positions import with_positions

    return with_positions(file.findings, file.loaded.raw)


def write_github(scanned: Scanned, out: TextIO, options: Options | None = None) -> None:
    """One workflow command per finding, with line and column where the finding has them."""
    o = options or Options()  # no summary: annotations only
    for file in scanned.files:
        path = display_path(file.path_text, o.cwd)
        for f in positioned(file):
            out.write(github_annotation(f, path) + "\n")


# --- sarif ------------------------------------------------------------------------------------

SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"


def _sarif_log(files: Iterable[FileReport], cwd: str) -> dict[str, Any]:
    """A SARIF 2.1.0 log of ``files`` for GitHub code scanning (``upload-sarif``): it holds
    their results, not the files (their bytes, documents)."""
    from postflightd import __version__, project_url
    from postflightd.rules.findings import RULES

    results: list[dict[str, Any]] = []
    codes_seen: set[str] = set()
    for file in files:
        _sarif_results(file, cwd, results)
        codes_seen.update(f.code for f in file.findings)
    codes = sorted(codes_seen)
    index = {code: i for i, code in enumerate(codes)}
    for result in results:  # the rules' order is known only once every file is seen
        result["ruleIndex"] = index[result["ruleId"]]
    home = project_url()
    rules = [
        {
            "id": code,
            "shortDescription": {"text": RULES[code].summary},
            # The rule's own entry in the rules page (its heading's anchor, as GitHub and the
            # docs site both render it), not the whole list.
            "helpUri": f"{home}/blob/main/docs/rules.md#{code.lower()}",
            "help": {"text": f"postflightd rules {code}"},
            "defaultConfiguration": {"level": RULES[code].severity.value},
        }
        for code in codes
    ]
    from urllib.parse import quote

    base = "file://" + quote(cwd.rstrip("/")) + "/"
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "postflightd",
                        "version": __version__,
                        "informationUri": home,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base}},
                "results": results,
            }
        ],
    }


def _sarif_results(file: FileReport, cwd: str, results: list[dict[str, Any]]) -> None:
    """Append one result per finding of ``file`` (ruleIndex filled in by the caller)."""
    from urllib.parse import quote

    shown = display_path(file.path_text, cwd)
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
                "ruleIndex": -1,
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


def write_sarif(scanned: Scanned, out: TextIO, options: Options | None = None) -> None:
    """The SARIF log; written at the end (its rules come before its results), holding the
    results of the files as they go, not the files."""
    o = options or Options()
    out.write(json_text(_sarif_log(scanned.files, o.cwd), indent=2) + "\n")


# --- --statistics -----------------------------------------------------------------------------


def statistics(report: ScanReport | Iterable[FileReport]) -> list[dict[str, Any]]:
    """Findings counted per code, most frequent first (as ``ruff --statistics``)."""
    from postflightd.rules.findings import RULES

    files = report.files if hasattr(report, "files") else report
    counts = Counter((f.code, f.severity.value) for file in files for f in file.findings)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0][0]))
    return [
        {"code": code, "severity": sev, "count": n, "summary": RULES[code].summary}
        for (code, sev), n in rows
    ]


def report_statistics(
    report: ScanReport | Iterable[FileReport], out: TextIO, fmt: str, options: Options
) -> None:
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


REPORTERS: dict[str, Reporter[Scanned]] = {
    "text": write_text,
    "json": write_json,
    "github": write_github,
    "sarif": write_sarif,
}
