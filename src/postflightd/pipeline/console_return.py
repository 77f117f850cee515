"""``check-return``: validate what a subagent hands back on the console.

The pipeline of one input: ``console_extract`` finds the JSON and its dialect
(``models.console_return``), ``rules.console_return`` validates it, the policy filters the
findings into a ``ReturnReport``. Everything up to the report is pure and never raises on any
input; reading the input and probing the disk happen at the edge below (``read_input``,
``return_probe``), called by ``commands/check_return.py``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from postflightd.errors import ExitCode, UsageError
from postflightd.models.terms import Dialect
from postflightd.pipeline.console_extract import (
    MAX_RETURN_BYTES,
    Origin,
    detect_dialect,
    extract_return,
    read_bounded,
)
from postflightd.project.artifacts import artifact_probe
from postflightd.rules.console_return import validate_return
from postflightd.rules.findings import (
    Finding,
    Policy,
    Severity,
    finding,
)
from postflightd.rules.probe import ArtifactProbe, ArtifactState

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


# --- I/O edge: reading, probing -------------------------------------------------------------


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
    """``project.artifacts``' probe, plus absolute paths: the console return's workflow checks
    them with ``[ -f "$path" ]``."""
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
