"""``postflightd report``: analytics from the journal (reading it: report_journal.py)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from postflightd.commands.arguments import parse_since_arg
from postflightd.errors import ExitCode
from postflightd.report.source import make_report, write_output
from postflightd.reporters.report import RENDERERS


def run_report(
    *, roots: Sequence[str], since: str, fmt: str, output: str | None, config_path: str | None
) -> int:
    """Exit 0 whatever the report says: a report is information, not a verdict."""
    now = datetime.now(UTC)
    report, notes = make_report(roots, parse_since_arg(since, now), config_path, now)
    for note in notes:
        print(f"postflightd: {note}", file=sys.stderr)
    write_output(RENDERERS[fmt](report), output)
    if output not in (None, "-"):
        print(f"postflightd: report written to {output}", file=sys.stderr)
    return int(ExitCode.OK)
