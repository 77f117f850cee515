"""``postflightd report``: analytics from the journal (reading it: ``report.source``)."""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from postflightd.commands.arguments import parse_since_arg
from postflightd.errors import ExitCode
from postflightd.inert import inert
from postflightd.report.runs import no_runs_recorded
from postflightd.report.source import make_report, write_output
from postflightd.reporters.report import REPORTERS
from postflightd.reporters.style import Options
from postflightd.words import joined


def run_report(
    *, roots: Sequence[str], since: str, fmt: str, output: str | None, config_path: str | None
) -> int:
    """Exit 0 whatever the report says: a report is information, not a verdict."""
    now = datetime.now(UTC)
    report, notes = make_report(roots, parse_since_arg(since, now), config_path, now)
    for note in notes:
        print(f"postflightd: {note}", file=sys.stderr)
    if not report.runs:
        when = f" since {report.since[:10]}" if report.since else ""
        where = f" for {joined([inert(r) for r in report.roots])}" if report.roots else ""
        print(f"postflightd: {no_runs_recorded(where + when)}", file=sys.stderr)
    # Whole before it is written: ``-o FILE`` is replaced at once, never seen half-written.
    text = io.StringIO()
    REPORTERS[fmt](report, text, Options())
    write_output(text.getvalue(), output)
    if output not in (None, "-"):
        print(f"postflightd: report written to {output}", file=sys.stderr)
    return int(ExitCode.OK)
