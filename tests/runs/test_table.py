"""The daemon's run table: sightings, transitions, deadlines (pure, clock passed in)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from postflightd.runs.table import Change, RunTable, Sighting

T0 = datetime(2026, 1, 8, 14, 30, tzinfo=UTC)


def sighting(
    status: str = "in_progress",
    session: str | None = "sess_1_aaaaaa",
    *,
    task_dir: str = "259_prove",
    stage: str | None = None,
    started_at: datetime | None = T0,
    timeout_s: float | None = 60.0,
    root: str = "/r",
) -> Sighting:
    return Sighting(
        root=root,
        task_dir=task_dir,
        task=int(task_dir.split("_", maxsplit=1)[0]),
        status=status,
        session=session,
        stage=stage,
        started_at=started_at,
        timeout_s=timeout_s,
    )


def changes(transitions: list[Any]) -> list[Change]:
    return [t.change for t in transitions]


def test_first_sighting_starts_a_run_and_a_repeat_changes_nothing() -> None:
    table = RunTable()
    assert changes(table.seen(sighting(), T0)) == [Change.STARTED]
    assert table.seen(sighting(), T0 + timedelta(seconds=1)) == []
    assert len(table) == 1


def test_stage_update_is_progress_and_keeps_first_seen() -> None:
    table = RunTable()
    table.seen(sighting(stage="reading"), T0)
    later = T0 + timedelta(seconds=5)
    (t,) = table.seen(sighting(stage="writing"), later)
    assert t.change is Change.PROGRESS
    assert t.run.first_seen == T0
    assert t.run.updated == later
    assert t.run.sighting.stage == "writing"


def test_new_session_replacing_an_unfinished_run_is_pf603() -> None:
    table = RunTable()
    table.seen(sighting(session="sess_1_aaaaaa"), T0)
    out = table.seen(sighting(session="sess_2_bbbbbb"), T0 + timedelta(seconds=1))
    assert changes(out) == [Change.REPLACED, Change.STARTED]
    assert out[0].previous is not None
    assert out[0].previous.sighting.session == "sess_1_aaaaaa"


def test_final_file_of_the_same_session_is_no_replacement() -> None:
    table = RunTable()
    table.seen(sighting(), T0)
    out = table.finished(sighting("researched"), T0 + timedelta(seconds=1))
    assert changes(out) == [Change.FINISHED]
    assert len(table) == 0


def test_final_file_of_another_session_finishing_an_unfinished_run_is_pf603() -> None:
    table = RunTable()
    table.seen(sighting(session="sess_1_aaaaaa"), T0)
    out = table.finished(sighting("researched", session="sess_2_bbbbbb"), T0)
    assert changes(out) == [Change.REPLACED, Change.FINISHED]


def test_final_status_without_in_progress_is_accepted() -> None:
    table = RunTable()
    assert changes(table.finished(sighting("planned"), T0)) == [Change.FINISHED]


def test_vanished_file_ends_the_run() -> None:
    table = RunTable()
    table.seen(sighting(), T0)
    ended = table.ended(("/r", "259_prove"), applied=False)
    assert ended is not None
    assert ended.change is Change.VANISHED
    assert table.ended(("/r", "259_prove"), applied=False) is None


def test_next_deadline_is_the_earliest_unflagged_in_progress_run() -> None:
    table = RunTable()
    table.seen(sighting(task_dir="1_a", timeout_s=300), T0)
    table.seen(sighting(task_dir="2_b", timeout_s=60), T0)
    table.seen(sighting("researched", task_dir="3_c", timeout_s=1), T0)  # final: no deadline
    table.seen(sighting(task_dir="4_d", started_at=None), T0)  # no started_at: no deadline
    assert table.next_deadline() == T0.timestamp() + 60
    table.mark_stuck(("/r", "2_b"))
    assert table.next_deadline() == T0.timestamp() + 300


def test_due_fires_once_per_session() -> None:
    table = RunTable()
    table.seen(sighting(), T0)
    assert table.due(T0 + timedelta(seconds=60)) == []
    late = T0 + timedelta(seconds=61)
    (run,) = table.due(late)
    flagged = table.mark_stuck(run.key)
    assert flagged is not None
    assert flagged.change is Change.STUCK
    assert table.mark_stuck(run.key) is None
    assert table.due(late) == []
    # The same session writing progress stays flagged: no second report.
    table.seen(sighting(stage="still here"), late)
    assert table.due(late) == []
    # A new session is a new run, with its own deadline.
    table.seen(sighting(session="sess_2_bbbbbb", started_at=late), late)
    assert table.due(late + timedelta(seconds=61)) != []


def test_flagged_run_that_finishes_ends_normally() -> None:
    table = RunTable()
    table.seen(sighting(), T0)
    table.mark_stuck(("/r", "259_prove"))
    assert changes(table.finished(sighting("researched"), T0)) == [Change.FINISHED]


def test_sighting_reads_stage_and_phases_from_an_invalid_document() -> None:
    doc = {
        "status": "in_progress",
        "started_at": "2026-01-08T14:30:00Z",
        "partial_progress": {"stage": "phase 2", "phases_completed": 1, "phases_total": "x"},
        "metadata": {"session_id": "sess_1_aaaaaa", "agent_type": "a", "phases_total": 4},
    }
    s = Sighting.from_doc("/r", "259_prove", 259, doc)
    assert (s.status, s.session, s.agent, s.stage) == (
        "in_progress",
        "sess_1_aaaaaa",
        "a",
        "phase 2",
    )
    assert (s.phases_completed, s.phases_total) == (1, 4)
    assert s.started_at == T0


@pytest.mark.parametrize("doc", [None, [], "text", {"metadata": "x", "partial_progress": 3}])
def test_sighting_of_junk_is_empty_not_an_error(doc: object) -> None:
    s = Sighting.from_doc("/r", "259_prove", 259, doc)
    assert (s.status, s.session, s.stage, s.started_at) == (None, None, None, None)


def test_keys_for_lists_one_roots_runs() -> None:
    table = RunTable()
    table.seen(sighting(root="/a"), T0)
    table.seen(sighting(root="/b"), T0)
    assert table.keys_for("/a") == [("/a", "259_prove")]
