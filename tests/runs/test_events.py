"""What the daemon logs when a run changes: ``transition_event`` is pure, data in, event out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from structlog.testing import capture_logs

from postflightd.runs.events import LogEvent, emit, transition_event
from postflightd.runs.table import Change, Run, RunTable, Sighting, Transition

STARTED = datetime(2026, 1, 8, 14, 0, tzinfo=UTC)


def sighting(session: str = "sess_1", status: str = "in_progress", **extra: Any) -> Sighting:
    base = Sighting(
        root="/p",
        task_dir="7_task7",
        task=7,
        status=status,
        session=session,
        agent="research-agent",
        operation="research",
        stage="reading",
        phases_completed=1,
        phases_total=3,
        started_at=STARTED,
        timeout_s=60.0,
    )
    return replace(base, **extra)


def run(s: Sighting) -> Run:
    return Run(s, STARTED, STARTED)


CONTEXT = {
    "root": "/p",
    "task": 7,
    "session": "sess_1",
    "file": "specs/7_task7/.return-meta.json",
    "status": "in_progress",
}


@pytest.mark.parametrize(
    "change", [Change.STARTED, Change.PROGRESS, Change.REPORTED, Change.FINISHED, Change.VANISHED]
)
def test_the_ordinary_changes_are_info_lines_with_the_runs_progress(change: Change) -> None:
    event = transition_event(Transition(change, run(sighting())), "specs", 0.0)
    assert event == LogEvent(
        "info",
        change.value,
        {
            **CONTEXT,
            "agent": "research-agent",
            "stage": "reading",
            "phases_completed": 1,
            "phases_total": 3,
        },
    )
    assert list(event.fields)[:5] == list(CONTEXT), "the context comes first, in this order"


def test_a_stuck_run_is_an_error_with_pf602_its_age_and_timeout() -> None:
    wall = (STARTED + timedelta(seconds=75.44)).timestamp()
    event = transition_event(Transition(Change.STUCK, run(sighting())), "specs", wall)
    assert event == LogEvent(
        "error",
        "run_stuck",
        {**CONTEXT, "code": "PF602", "operation": "research", "elapsed_s": 75.4, "timeout_s": 60.0},
    )


def test_a_stuck_run_without_a_start_time_has_no_age() -> None:
    s = sighting(started_at=None)
    event = transition_event(Transition(Change.STUCK, run(s)), "specs", 1e9)
    assert event.fields["elapsed_s"] is None


def test_a_replaced_run_is_a_warning_naming_both_sessions() -> None:
    previous = run(sighting("sess_old"))
    event = transition_event(
        Transition(Change.REPLACED, run(sighting("sess_1")), previous), "work/specs", 0.0
    )
    assert event == LogEvent(
        "warning",
        "run_replaced",
        {
            **CONTEXT,
            "file": "work/specs/7_task7/.return-meta.json",
            "code": "PF603",
            "replaced_session": "sess_old",
            "message": "session sess_1 replaced the unfinished in_progress run of session sess_old",
        },
    )


def test_a_replacement_without_the_previous_run_reads_as_an_info_line() -> None:
    event = transition_event(Transition(Change.REPLACED, run(sighting())), "specs", 0.0)
    assert (event.level, event.event) == ("info", "run_replaced")


def test_the_events_of_the_run_table_render_and_emit() -> None:
    """The run table's own transitions, end to end through ``emit``."""
    table = RunTable()
    now = STARTED + timedelta(seconds=1)
    transitions = table.seen(sighting(), now)
    transitions += table.seen(sighting("sess_2"), now)
    transitions += table.finished(sighting("sess_2", status="researched"), now)
    with capture_logs() as logs:
        for t in transitions:
            emit(transition_event(t, "specs", now.timestamp()))
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("run_started", "info"),
        ("run_replaced", "warning"),
        ("run_started", "info"),
        ("run_finished", "info"),
    ]
    assert logs[1]["replaced_session"] == "sess_1"
