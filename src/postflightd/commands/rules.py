"""``postflightd rules [CODE]``: every rule on one line, or one rule explained."""

from __future__ import annotations

import sys

from postflightd.errors import ExitCode, UsageError
from postflightd.rules.findings import RULES


def run_rules(*, code: str | None = None) -> int:
    """Every rule on one line each, or one rule explained (``rules PF405``), as ruff does."""
    if code is not None:
        from postflightd.rules.explanations import explain

        key = code.strip().upper()
        if key not in RULES:
            raise UsageError(f"unknown rule code {code!r} (`postflightd rules` lists them)")
        sys.stdout.write(explain(key))
        return int(ExitCode.OK)
    for rule in RULES.values():
        print(f"{rule.code}  {rule.severity.value:<7}  {rule.summary}")
    return int(ExitCode.OK)
