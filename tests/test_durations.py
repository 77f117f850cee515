"""durations: the one output format, and the `--since` values `history` (and `verify`) take."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from postflightd.durations import format_duration, parse_duration, parse_since

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "0s"),
        (59.9, "59s"),
        (61, "1m01s"),
        (3600, "1h00m"),
        (7 * 3600 + 7 * 60, "7h07m"),
        (86400, "1d00h"),
        (7647 * 3600 + 7 * 60, "318d15h"),  # days past 24 hours, not thousands of hours
        (-5, "0s"),
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("90", timedelta(seconds=90)),
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("1.5h", timedelta(minutes=90)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("1d12h", timedelta(days=1, hours=12)),
        (" 2H ", timedelta(hours=2)),
    ],
)
def test_parse_duration(text: str, delta: timedelta) -> None:
    assert parse_duration(text) == delta


@pytest.mark.parametrize("text", ["", "h", "2x", "yesterday", "1d garbage", "-5m", "1e9w" * 3])
def test_parse_duration_rejects_what_is_not_one(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_parse_since_takes_durations_dates_and_all() -> None:
    assert parse_since("2h", NOW) == NOW - timedelta(hours=2)
    assert parse_since("2026-01-01T00:00:00Z", NOW) == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_since("all", NOW) is None
    with pytest.raises(ValueError, match="neither a duration"):
        parse_since("99999999999w", NOW)  # past datetime's range: not a crash
