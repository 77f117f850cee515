"""``postflightd check-return``: validate a subagent's console return.

Its rules are ``rules.console_return``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from postflightd.commands.arguments import add_format, policy
from postflightd.config import load_config
from postflightd.errors import UsageError
from postflightd.models.terms import Dialect
from postflightd.project.root import why_not_a_directory
from postflightd.reporters.check_return import REPORTERS
from postflightd.reporters.style import Options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``check-return``'s options."""
    parser.add_argument("file", nargs="?", default="-", metavar="FILE", help="default: - (stdin)")
    parser.add_argument(
        "--dialect", choices=("auto", "subagent-return", "agent-output"), default="auto"
    )
    parser.add_argument("--expect-session", metavar="SID", help="the session id delegated")
    parser.add_argument(
        "--root", default=".", metavar="DIR", help="artifact paths are relative to it"
    )
    add_format(parser, REPORTERS)
    parser.add_argument("--select", action="append", default=[], metavar="CODES")
    parser.add_argument("--ignore", action="append", default=[], metavar="CODES")
    parser.add_argument("--strict", action="store_true", default=None, help="warnings fail too")
    parser.add_argument(
        "--config", metavar="PATH", help="configuration file (TOML; default: looked up from --root)"
    )


def run(args: argparse.Namespace) -> int:
    return run_check_return(
        file=args.file,
        dialect=args.dialect,
        expect_session=args.expect_session,
        root=args.root,
        fmt=args.format,
        select=args.select,
        ignore=args.ignore,
        strict=args.strict,
        config_path=args.config,
    )


def run_check_return(
    *,
    file: str,
    dialect: str,
    expect_session: str | None,
    root: str,
    fmt: str,
    select: Sequence[str],
    ignore: Sequence[str],
    strict: bool | None,
    config_path: str | None,
) -> int:
    """Validate one return with the configuration's severity overrides, select, ignore and
    strict; print the report; exit 0 valid, 1 invalid."""
    # Here, not at the top: the checks import pydantic, which `check-return --help` and the
    # shell's completion of its options never need.
    from postflightd.pipeline.console_extract import MAX_RETURN_BYTES
    from postflightd.pipeline.console_return import check_bytes, read_input, return_probe, too_big

    root_dir = Path(root).expanduser()
    config = load_config(config_path, [root_dir] if root_dir.is_dir() else [])
    chosen = policy(config, select, ignore, strict)
    if not root_dir.is_dir():
        raise UsageError(
            f"--root {root}: {why_not_a_directory(root_dir)}; give the project root that "
            "artifact paths are relative to"
        )
    probe = return_probe(root_dir)
    source = "<stdin>" if file == "-" else file
    raw = read_input(file)
    if len(raw) > MAX_RETURN_BYTES:
        report = too_big(source, dialect)
    else:
        report = check_bytes(raw, source, dialect, expect_session, probe, chosen)
    if expect_session is not None and report.dialect is Dialect.AGENT_OUTPUT:
        print(
            "postflightd: agent-output returns carry no session id; --expect-session is ignored",
            file=sys.stderr,
        )
    REPORTERS[fmt](report, sys.stdout, Options())
    return int(report.exit_code)
