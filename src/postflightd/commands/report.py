"""``postflightd report``: analytics from the journal (reading it: ``stats.source``)."""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from postflightd.commands.arguments import add_format, parse_since_arg
from postflightd.errors import ExitCode
from postflightd.inert import inert
from postflightd.reporters.report import REPORTERS
from postflightd.reporters.style import Options
from postflightd.stats.runs import no_runs_recorded
from postflightd.stats.source import make_report, write_output
from postflightd.words import joined


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``report``'s options."""
    parser.add_argument("roots", nargs="*", metavar="ROOT", help="default: every root journaled")
    parser.add_argument(
        "--since", default="30d", metavar="DURATION", help="30d (default), 12h, 2026-01-31, all"
    )
    add_format(parser, REPORTERS)
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def run(args: argparse.Namespace) -> int:
    return run_report(
        roots=args.roots,
        since=args.since,
        fmt=args.format,
        output=args.output,
        config_path=args.config,
    )


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
