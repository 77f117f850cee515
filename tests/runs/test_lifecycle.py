"""The run lifecycle: operations, timeouts, when a run is stuck (pure, clock passed in)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from postflightd.runs.lifecycle import operation_of, stuck_deadline, timeout_for
from postflightd.timestamps import parse_timestamp

T0 = datetime(2026, 1, 8, 14, 30, tzinfo=UTC)
TIMEOUTS = {"research": 3600.0, "planning": 1800.0, "implementation": 7200.0, "default": 60.0}


@pytest.mark.parametrize(
    ("path", "agent", "marker", "expected"),
    [
        (["orchestrator", "research", "x-agent"], None, None, "research"),
        (["orchestrator", "/plan"], "implementation-agent", None, "planning"),
        (["orchestrator"], "neovim-implementation-agent", None, "implementation"),
        (None, None, "research", "research"),
        (None, "general-agent", None, "default"),
    ],
)
def test_operation_of_prefers_delegation_path_then_agent_then_marker(
    path: object, agent: object, marker: object, expected: str
) -> None:
    assert operation_of(path, agent, marker) == expected


def test_timeout_falls_back_to_default() -> None:
    assert timeout_for("research", TIMEOUTS) == 3600
    assert timeout_for("unknown", TIMEOUTS) == 60


def test_naive_timestamps_are_utc_and_junk_is_none() -> None:
    assert parse_timestamp("2026-01-08T14:30:00") == T0
    assert parse_timestamp("yesterday") is None


def test_the_stuck_deadline_is_the_start_plus_the_timeout() -> None:
    """(A run is stuck only strictly after it: ``RunTable.due``, tests/runs/test_table.py.)"""
    assert stuck_deadline(T0, 60) == (T0 + timedelta(seconds=60)).timestamp()
