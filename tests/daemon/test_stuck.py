"""Stuck runs, in-process on a fake clock: flagged once when the deadline passes, recorded in
errors.json, and a late final file still applied. (test_watch.py covers the same story
end to end, in real time, in a subprocess.)"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from helpers.documents import final_text
from helpers.inprocess_daemon import FakeClock, events, in_progress, open_daemon, step
from helpers.project import error_records, meta_path, project, task_status
from postflightd.daemon.loop import Daemon


@dataclass
class Flight:
    """Task 1's run, in_progress with a 60 s timeout, seen by a daemon on a fake clock."""

    root: Path
    clock: FakeClock
    daemon: Daemon
    logs: list[dict[str, Any]]


@pytest.fixture
def flight(tmp_path: Path) -> Iterator[Flight]:
    root = project(tmp_path / "proj", 1, config="[timeouts]\nresearch = 60\n")
    clock = FakeClock()
    with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
        meta_path(root, 1).write_text(in_progress(1, clock.now()), encoding="utf-8")
        step(daemon, clock)
        assert [e["task"] for e in events(logs, "run_started")] == [1]
        yield Flight(root, clock, daemon, logs)


def test_a_run_past_its_timeout_is_flagged_once_recorded_and_applied_when_it_finishes(
    flight: Flight,
) -> None:
    root, clock, daemon, logs = flight.root, flight.clock, flight.daemon, flight.logs
    assert daemon.runs.next_deadline() is not None

    step(daemon, clock, 30)
    assert events(logs, "run_stuck") == []
    assert error_records(root, "timeout") == []

    step(daemon, clock, 31)  # 63.5 s after the start: past the 60 s timeout
    (stuck,) = events(logs, "run_stuck")
    assert (stuck["task"], stuck["code"], stuck["timeout_s"]) == (1, "PF602", 60)
    assert stuck["elapsed_s"] >= 60
    assert len(error_records(root, "timeout")) == 1

    step(daemon, clock)
    step(daemon, clock, 600)
    assert len(events(logs, "run_stuck")) == 1, "flagged once, not at every turn"
    assert len(error_records(root, "timeout")) == 1

    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    step(daemon, clock)
    assert task_status(root, 1) == "researched"
    assert not meta_path(root, 1).exists()
    assert [e["task"] for e in events(logs, "run_finished")] == [1]
    assert len(events(logs, "run_stuck")) == 1


def reach_the_deadline_between_two_polls(daemon: Daemon, clock: FakeClock) -> None:
    """59.5 s in (a poll has just run), then 0.6 s more: only the stuck timer is due."""
    step(daemon, clock, 57)
    assert clock.mono - daemon.roots[0].next_poll < 0


def test_the_stuck_timer_rereads_the_file_and_a_restarted_run_is_not_flagged(
    flight: Flight,
) -> None:
    root, clock, daemon, logs = flight.root, flight.clock, flight.daemon, flight.logs
    reach_the_deadline_between_two_polls(daemon, clock)
    restarted = clock.now()
    meta_path(root, 1).write_text(in_progress(1, restarted), encoding="utf-8")
    clock.advance(0.6)
    daemon.iterate()
    assert events(logs, "run_stuck") == []
    assert error_records(root, "timeout") == []
    assert daemon.runs.next_deadline() == (restarted + timedelta(seconds=60)).timestamp()

    step(daemon, clock, 60)
    assert [e["task"] for e in events(logs, "run_stuck")] == [1]


def test_the_stuck_timer_finding_the_file_gone_ends_the_run(flight: Flight) -> None:
    root, clock, daemon, logs = flight.root, flight.clock, flight.daemon, flight.logs
    reach_the_deadline_between_two_polls(daemon, clock)
    meta_path(root, 1).unlink()
    clock.advance(0.6)
    daemon.iterate()
    assert events(logs, "run_stuck") == []
    assert [e["task"] for e in events(logs, "run_vanished")] == [1]
    assert daemon.runs.next_deadline() is None
    assert error_records(root, "timeout") == []
