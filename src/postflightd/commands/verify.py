"""``postflightd verify``: outcomes the journal recorded that the project no longer shows."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from postflightd.commands.arguments import add_format, open_journal, parse_since_arg
from postflightd.config import Config, load_config
from postflightd.errors import UsageError
from postflightd.journal.database import format_ts
from postflightd.pipeline.verify import VerifyReport, inspect_root, repair_root
from postflightd.project.root import find_project, require_own_project, require_project
from postflightd.reporters.style import Options
from postflightd.reporters.verify import REPORTERS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``verify``'s options."""
    parser.add_argument("roots", nargs="*", metavar="ROOT", help="default: the project here")
    parser.add_argument(
        "--since",
        default="24h",
        metavar="WHEN",
        help="a duration back (90s, 10m, 24h, 7d), a date (2026-01-31), or all (default 24h)",
    )
    parser.add_argument(
        "--repair", action="store_true", help="re-apply the outcomes lost to non-locking writers"
    )
    add_format(parser, REPORTERS)
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def run(args: argparse.Namespace) -> int:
    return run_verify(
        roots=args.roots,
        since_text=args.since,
        repair=args.repair,
        fmt=args.format,
        config_path=args.config,
    )


def run_verify(
    *,
    roots: Sequence[str],
    since_text: str,
    repair: bool,
    fmt: str,
    config_path: str | None,
) -> int:
    """Exit 0 all shown, 1 lost/reverted/TODO, 4 state.json unusable."""
    start = parse_since_arg(since_text, datetime.now(UTC))

    def load(paths: list[Path]) -> Config:
        return load_config(config_path, paths)

    if roots:
        resolved = list(dict.fromkeys(require_project(r, load) for r in roots))
    else:
        resolved = [find_project(load)]
    # The journal is the user's; each root is judged by its own configuration.
    config = load_config(config_path)
    configs = {root: load_config(config_path, [root]) for root in resolved}
    if repair:
        for root in resolved:
            require_own_project(root, configs[root])
    since = format_ts(start if start is not None else datetime(1970, 1, 1, tzinfo=UTC))
    with open_journal(config) as journal:
        if not journal.enabled:
            raise UsageError(f"the journal cannot be opened: {journal.error}")
        checked = []
        for root in resolved:
            # --repair even with nothing lost: it also clears what a repair killed mid-write left.
            result = (repair_root if repair else inspect_root)(root, configs[root], journal, since)
            checked.append(result)
    report = VerifyReport(since, repair, checked)
    REPORTERS[fmt](report, sys.stdout, Options())
    return report.exit_code
