"""The command line: argument parsing, and the one place failures become exit codes.

Imports of the pipeline are deferred into the command functions so that ``--version`` and
``--help`` stay fast (SPEC 6: CLI start-up <= 250 ms).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from postflightd import __version__

if TYPE_CHECKING:
    from postflightd.config import Config

FORMATS = ("text", "json", "github")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="postflightd",
        description="Validate AI agents' .return-meta.json files and apply their outcome to "
        "specs/state.json and TODO.md.",
    )
    parser.add_argument("--version", action="version", version=f"postflightd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    scan = sub.add_parser("scan", help="validate every metadata file; report stuck agents")
    scan.add_argument("roots", nargs="*", metavar="ROOT", help="project roots (default: .)")
    scan.add_argument("--format", choices=FORMATS, default="text")
    scan.add_argument(
        "--select", action="append", default=[], metavar="CODES", help="only these codes"
    )
    scan.add_argument(
        "--ignore", action="append", default=[], metavar="CODES", help="never these codes"
    )
    scan.add_argument("--strict", action="store_true", default=None, help="warnings fail too")
    scan.add_argument("--apply", action="store_true", help="also post-flight valid final files")
    scan.add_argument("--config", metavar="PATH", help="configuration file (TOML)")

    sub.add_parser("schema", help="print the JSON Schema of the metadata file")
    sub.add_parser("rules", help="list the rule codes, severities and descriptions")
    return parser


def _load_config(explicit: str | None, roots: Sequence[Path]) -> Config:
    from postflightd.config import load_config

    return load_config(explicit, list(roots))


def cmd_scan(
    roots: Sequence[str],
    fmt: str,
    select: Sequence[str],
    ignore: Sequence[str],
    strict: bool | None,
    apply: bool,
    config_path: str | None,
) -> int:
    from datetime import UTC, datetime

    from postflightd.errors import UsageError
    from postflightd.findings import UnknownCodeError
    from postflightd.pipeline import policy_from, resolve_root, scan
    from postflightd.reporters import REPORTERS

    if apply:
        raise UsageError(
            "scan --apply is not available yet in this version: postflight arrives with the "
            "postflight engine; run `postflightd scan` to validate only"
        )
    resolved = [resolve_root(r) for r in roots or ["."]]
    config = _load_config(config_path, resolved)
    try:
        policy = policy_from(config, select, ignore, strict)
    except UnknownCodeError as exc:
        raise UsageError(str(exc)) from None
    report = scan(resolved, config, policy, datetime.now(UTC))
    for note in report.notes:
        print(f"postflightd: {note}", file=sys.stderr)
    REPORTERS[fmt](report, sys.stdout)
    return int(report.exit_code)


def cmd_schema() -> int:
    import json

    from postflightd.models import json_schema

    json.dump(json_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def cmd_rules() -> int:
    from postflightd.findings import RULES

    for rule in RULES.values():
        print(f"{rule.code}  {rule.severity.value:<7}  {rule.summary}")
    return 0


def _run(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    match args.command:
        case "scan":
            return cmd_scan(
                args.roots,
                args.format,
                args.select,
                args.ignore,
                args.strict,
                args.apply,
                args.config,
            )
        case "schema":
            return cmd_schema()
        case "rules":
            return cmd_rules()
        case _:
            _parser().print_help(sys.stderr)
            return 2


def _log_internal_error(exc: BaseException) -> str:
    """Write the traceback to a crash log; return where it went."""
    import tempfile
    import traceback
    from datetime import UTC, datetime

    try:
        from platformdirs import user_log_path

        log_dir = user_log_path("postflightd")
        log_dir.mkdir(parents=True, exist_ok=True)
    except Exception:  # noqa: BLE001 - the crash log must be written somewhere
        log_dir = Path(tempfile.gettempdir())
    path = log_dir / "crash.log"
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"--- {datetime.now(UTC).isoformat()} postflightd {__version__}\n")
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:
        return "(the crash log could not be written)"
    return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (SPEC 4)."""
    from postflightd.errors import ExitCode, PostflightError

    try:
        return _run(argv)
    except PostflightError as exc:
        print(f"postflightd: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("postflightd: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`postflightd scan | head`): not an error of ours.
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes exit 70
        where = _log_internal_error(exc)
        print(
            f"postflightd: internal error ({type(exc).__name__}); details in {where}",
            file=sys.stderr,
        )
        return int(ExitCode.INTERNAL)
