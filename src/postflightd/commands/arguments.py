"""Arguments several commands share: the options that declare them, and their values turned
into typed ones (a bad one is a UsageError, 2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final

from postflightd.config import policy_from
from postflightd.durations import parse_since
from postflightd.errors import UsageError

if TYPE_CHECKING:
    from argparse import ArgumentParser

    from postflightd.config import Config
    from postflightd.journal.database import Journal
    from postflightd.rules.findings import Policy

COLOR_CHOICES: Final = ("auto", "always", "never")


def add_format(parser: ArgumentParser, reporters: Mapping[str, object], *alias: str) -> None:
    """``--format``, its choices the keys of the command's ``REPORTERS`` (default: text)."""
    parser.add_argument("--format", *alias, dest="format", default="text", choices=reporters)


def add_code_filters(parser: ArgumentParser) -> None:
    """``--select`` and ``--ignore``, each repeatable."""
    parser.add_argument(
        "--select", action="append", default=[], metavar="CODES", help="only these codes"
    )
    parser.add_argument(
        "--ignore", action="append", default=[], metavar="CODES", help="never these codes"
    )


def meant(given: str, names: Iterable[str], cutoff: float) -> str:
    """`` (did you mean `NAME`?)``, naming what a near miss meant; else nothing."""
    from difflib import get_close_matches

    near = get_close_matches(given, list(names), n=1, cutoff=cutoff)
    return f" (did you mean `{near[0]}`?)" if near else ""


def unrecognized(command: ArgumentParser, extra: Sequence[str]) -> str:
    """argparse's message for arguments nobody took, with the option meant by a near miss."""
    options = [o for o in command._option_string_actions if o.startswith("--")]
    tried = (meant(a.split("=", 1)[0], options, 0.7) for a in extra if a.startswith("--"))
    return f"unrecognized arguments: {' '.join(extra)}{next((m for m in tried if m), '')}"


def policy(
    config: Config, select: Sequence[str], ignore: Sequence[str], strict: bool | None = None
) -> Policy:
    """The configuration's policy with ``--select``/``--ignore``/``--strict`` applied."""
    # Here, not at the top: the hook imports this module for ``open_journal`` at every stop.
    from postflightd.rules.findings import UnknownCodeError

    try:
        return policy_from(config, select, ignore, strict)
    except UnknownCodeError as exc:
        raise UsageError(str(exc)) from None


def parse_since_arg(text: str, now: datetime) -> datetime | None:
    """``--since``: a duration back (30m, 2h, 7d), a date, or ``all`` (None)."""
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
