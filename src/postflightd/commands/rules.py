"""``postflightd rules [CODE]``: every rule on one line, or one rule explained."""

from __future__ import annotations

import argparse
import sys

from postflightd.errors import ExitCode, UsageError
from postflightd.rules.findings import RULES, UnknownCodeError, expand_codes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``rules``' options."""
    parser.add_argument("code", nargs="?", metavar="CODE", help="explain this rule")


def run(args: argparse.Namespace) -> int:
    return run_rules(code=args.code)


def run_rules(*, code: str | None = None) -> int:
    """Every rule on one line each, or one rule explained (``rules PF405``), as ruff does."""
    if code is not None:
        from postflightd.rules.explanations import explain

        sys.stdout.write(explain(rule_code(code)))
        return int(ExitCode.OK)
    for rule in RULES.values():
        print(f"{rule.code}  {rule.severity.value:<7}  {rule.summary}")
    return int(ExitCode.OK)


def rule_code(code: str) -> str:
    """The rule ``code`` names (``PF405``, ``pf405``, ``405``); a UsageError for a code that
    does not exist or names a group of rules."""
    key = code.strip().upper()
    if key.isdigit():
        key = f"PF{key}"  # `rules 205`: the number alone names the rule too
    if key not in RULES:
        # The words --select and --ignore use for a code that does not exist.
        try:
            expand_codes([key])
        except UnknownCodeError as exc:
            raise UsageError(str(exc)) from None
        raise UsageError(
            f"{code} is a group of rules, not one: give a full code, e.g. "
            f"`postflightd rules {next(c for c in RULES if c.startswith(key))}`"
        )
    return key
