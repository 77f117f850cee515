"""Durations as people type and read them: one format everywhere (``318d15h``, ``1h02m``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: Patterns compiled (and cached by ``re``) when a duration is parsed: only a few commands'
#: options are durations, and every command imports this module.
_PART: Final = r"(?i)(\d+(?:\.\d+)?)\s*([smhdw])"
_SECONDS: Final = r"\d+(?:\.\d+)?"


def format_duration(seconds: float | None) -> str:
    """Two units at most: ``318d15h``, ``7h07m``, ``4m05s``, ``12s``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    total = int(max(seconds, 0))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``2h``, ``7d``, ``1w``, combined (``1d12h``), or bare seconds (``90``)
    (what ``verify --since`` takes too); ValueError otherwise."""
    compact = text.strip()
    if re.fullmatch(_SECONDS, compact):
        seconds = float(compact)
    else:
        parts = re.findall(_PART, compact)
        if not parts or re.sub(_PART, "", compact).strip():
            raise ValueError(f"{text!r} is not a duration such as 30m, 2h, 7d or 1d12h")
        seconds = sum(float(n) * _UNITS[u.lower()] for n, u in parts)
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{text!r} is too long a duration") from None


def parse_since(text: str, now: datetime) -> datetime | None:
    """A point in time: a duration back from ``now`` (``7d``), or an ISO 8601 date or time;
    None for ``all`` (no limit)."""
    if text.strip().lower() == "all":
        return None
    try:
        return now - parse_duration(text)
    except (ValueError, OverflowError):
        pass
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a duration (30m, 2h, 7d) nor an ISO 8601 date or time"
        ) from None
    # A time without an offset is the user's local time (astimezone reads naive as local).
    return when.astimezone(UTC)
