"""Arguments several commands share, turned into typed values; a bad one is a UsageError (2)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from postflightd.errors import UsageError

if TYPE_CHECKING:
    from postflightd.config import Config
    from postflightd.journal.database import Journal
    from postflightd.rules.findings import Policy


def policy(
    config: Config, select: Sequence[str], ignore: Sequence[str], strict: bool | None = None
) -> Policy:
    """The configuration's policy with ``--select``/``--ignore``/``--strict`` applied."""
    from postflightd.config import policy_from
    from postflightd.rules.findings import UnknownCodeError

    try:
        return policy_from(config, select, ignore, strict)
    except UnknownCodeError as exc:
        raise UsageError(str(exc)) from None


def parse_since_arg(text: str, now: datetime) -> datetime | None:
    """``--since``: a duration back (30m, 2h, 7d), a date, or ``all`` (None)."""
    from postflightd.durations import parse_since

    try:
        return parse_since(text, now)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}") from None


def parse_interval(text: str) -> float:
    """``--interval``: ``1s``, ``500ms``, ``0.5``; at least 0.1 s."""
    raw = text.strip().lower()
    scale = 1.0
    if raw.endswith("ms"):
        raw, scale = raw[:-2], 0.001
    elif raw.endswith("s"):
        raw = raw[:-1]
    try:
        value = float(raw) * scale
    except ValueError:
        raise UsageError(f"--interval {text!r}: give seconds, e.g. 1s, 500ms or 2") from None
    if not value >= 0.1 or value > 3600:
        raise UsageError(f"--interval {text!r}: between 100ms and 1h")
    return value


def open_journal(config: Config) -> Journal:
    """The journal the configuration names (disabled, with its error, when it cannot open)."""
    from postflightd.journal.database import Journal, journal_path

    return Journal.open(journal_path(config.journal.path))
