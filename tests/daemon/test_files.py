"""One record per watched file (daemon/files.py): what is due is one query over the files a
timer waits for, and a file that is gone leaves no record behind; the table alone, then the
in-process daemon on a fake clock over real files."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from helpers.inprocess_daemon import FakeClock, events, in_progress, open_daemon, step
from helpers.project import meta_path, project
from postflightd.daemon.files import Due, FileState, FileStates


def test_a_record_at_its_defaults_is_the_same_as_none_and_is_dropped() -> None:
    files = FileStates()
    files.of("a").checked_at = 1.0
    files.of("b")
    files.drop_idle("a")
    files.drop_idle("b")
    assert list(files) == ["a"]
    files["a"].checked_at = None
    files.drop_idle("a")
    assert files == {}
    assert FileState().idle()


def test_what_is_due_is_the_earliest_of_each_timer_over_the_waiting_files() -> None:
    files = FileStates()
    assert files.due() == Due(None, None, lock_busy=False)
    files.defer("a", 5.0)
    files.defer("b", 3.0)
    files.throttle("c", 9.0)
    files.throttle("d", 7.0)
    files.hold_for_lock("e")
    files.of("f").processed = True  # known, waiting for nothing
    assert files.due() == Due(3.0, 7.0, lock_busy=True)
    assert [path for path, _ in files.deferred()] == ["a", "b"]
    assert files.throttled_by(8.0) == ["d"]
    assert files.take_lock_busy() == ["e"]
    assert files.lock_busy() == []
    # A mark cleared on the record, or a record forgotten, is no longer waited for.
    files["b"].deferred_since = None
    files.pop("d")
    assert files.due() == Due(5.0, 9.0, lock_busy=False)


def test_held_and_stuck_marks_are_taken_once() -> None:
    files = FileStates()
    files.of("a").held = True
    files.of("b").stuck_unrecorded = True
    assert files.take_held() == ["a"]
    assert files.take_held() == []
    assert files.stuck_unrecorded() == ["b"]


def test_a_deleted_file_leaves_no_record_in_the_daemon(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 2)
    clock = FakeClock()
    with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
        meta = meta_path(root, 1)
        meta.write_text(in_progress(1, clock.now()), encoding="utf-8")
        step(daemon, clock)
        assert [e["task"] for e in events(logs, "run_started")] == [1]
        files = daemon.roots[0].files
        assert files[str(meta)].processed
        meta.unlink()
        step(daemon, clock)
        assert str(meta) not in daemon.roots[0].files
        assert daemon.roots[0].files.due() == Due(None, None, lock_busy=False)
