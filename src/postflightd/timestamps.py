"""Timestamps as the metadata files, the journal and the reports write them: ISO 8601, UTC.

One reading (``parse_timestamp``: naive means UTC) and one writing (``iso_timestamp``: whole
seconds with a ``Z``) for every module that reads or writes a time.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_timestamp(text: str) -> datetime | None:
    """An ISO 8601 timestamp as an aware datetime (naive ones are read as UTC), or None."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def iso_timestamp(now: datetime) -> str:
    """``2026-01-08T14:30:00Z``: UTC, whole seconds (a naive ``now`` is taken as UTC)."""
    return utc(now).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc(now: datetime) -> datetime:
    """``now`` in UTC (a naive ``now`` is taken as UTC)."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
