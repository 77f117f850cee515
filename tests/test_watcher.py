"""The watchdog adapter: which events mark which files, and the watch's self-checks."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
)

from postflightd.watcher import (
    DirtySet,
    RootWatch,
    SpecsEventHandler,
    choose_kind,
    filesystem_type,
    install_overflow_trap,
)

ROOT = Path("/p")
SPECS = "/p/specs"
META = f"{SPECS}/259_x/.return-meta.json"


def dispatched(*events: FileSystemEvent) -> DirtySet:
    sink = DirtySet()
    handler = SpecsEventHandler(ROOT, Path(SPECS), "state.json", sink)
    for event in events:
        handler.dispatch(event)
    return sink


@pytest.mark.parametrize(
    "event",
    [
        FileCreatedEvent(META),
        FileModifiedEvent(META),
        FileClosedEvent(META),
        FileDeletedEvent(META),
        # write-temp-then-rename: only the destination is the metadata file.
        FileMovedEvent(f"{SPECS}/259_x/.tmp.123", META),
        # renamed away: the source is.
        FileMovedEvent(META, f"{SPECS}/259_x/old.json"),
    ],
)
def test_events_naming_the_metadata_file_in_either_path_mark_it(event: FileSystemEvent) -> None:
    sink = dispatched(event)
    assert sink.take().paths == {META: ROOT}
    assert sink.event.is_set()


@pytest.mark.parametrize(
    "event",
    [
        FileOpenedEvent(META),
        FileClosedNoWriteEvent(META),
        FileModifiedEvent(f"{SPECS}/259_x/reports/r.md"),
        FileModifiedEvent(f"{SPECS}/TODO.md"),
    ],
)
def test_events_that_cannot_change_a_metadata_file_are_ignored(event: FileSystemEvent) -> None:
    sink = dispatched(event)
    assert sink.take().paths == {}
    assert not sink.event.is_set()


def test_a_task_directory_moved_in_marks_its_metadata_file() -> None:
    sink = dispatched(
        DirMovedEvent("/elsewhere/259_x", f"{SPECS}/259_x"), DirCreatedEvent(f"{SPECS}/260_y")
    )
    assert set(sink.take().paths) == {META, f"{SPECS}/260_y/.return-meta.json"}


def test_a_symlink_created_in_specs_marks_the_metadata_file_behind_it() -> None:
    sink = dispatched(FileCreatedEvent(f"{SPECS}/260_y"))
    assert set(sink.take().paths) == {f"{SPECS}/260_y/.return-meta.json"}


def test_the_specs_directory_itself_going_away_requests_a_check() -> None:
    pending = dispatched(DirDeletedEvent(SPECS)).take()
    assert pending.checks == {ROOT}
    pending = dispatched(DirMovedEvent(SPECS, "/p/specs.old")).take()
    assert pending.checks == {ROOT}


def test_state_file_changes_are_noted_per_root() -> None:
    pending = dispatched(FileMovedEvent(f"{SPECS}/.state.json.tmp", f"{SPECS}/state.json")).take()
    assert pending.state_changed == {ROOT}
    assert pending.paths == {}


def test_take_hands_over_once() -> None:
    sink = dispatched(FileCreatedEvent(META))
    sink.request_rescan(None, "event queue overflow")
    first = sink.take()
    assert first.paths and first.rescans == {None: "event queue overflow"}
    second = sink.take()
    assert (second.paths, second.rescans, second.checks) == ({}, {}, set())


@pytest.fixture
def trap_sink() -> Iterator[DirtySet]:
    sink = DirtySet()
    trap = install_overflow_trap(sink)
    try:
        yield sink
    finally:
        logging.getLogger("watchdog").removeHandler(trap)
        logging.getLogger("watchdog").propagate = True


def test_watchdogs_overflow_warning_becomes_a_rescan_of_every_root(trap_sink: DirtySet) -> None:
    # This is the only sign watchdog gives of an IN_Q_OVERFLOW (inotify_c logs and moves on).
    logging.getLogger("watchdog.observers.inotify_c").warning(
        "Inotify queue overflowed; filesystem events were lost"
    )
    assert trap_sink.take().rescans == {None: "event queue overflow"}
    logging.getLogger("watchdog.observers.inotify_c").warning("something else")
    assert trap_sink.take().rescans == {}


def test_filesystem_type_of_a_local_directory(tmp_path: Path) -> None:
    if not Path("/proc/self/mountinfo").exists():
        pytest.skip("no /proc/self/mountinfo on this system")
    assert filesystem_type(tmp_path)


def test_polling_is_chosen_when_configured(tmp_path: Path) -> None:
    assert choose_kind("polling", tmp_path)[0] == "polling"
    assert choose_kind("inotify", tmp_path)[0] == "inotify"


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    path = tmp_path / "specs"
    path.mkdir()
    return path


def test_root_watch_notices_a_replaced_and_a_missing_specs_directory(specs: Path) -> None:
    sink = DirtySet()
    watch = RootWatch(specs.parent, specs, "state.json", "auto", sink)
    try:
        assert watch.start()
        assert watch.problem() is None
        # Renamed away and replaced: inotify goes on watching the old inode.
        specs.rename(specs.with_name("specs.old"))
        specs.mkdir()
        assert watch.problem() == "the specs directory was replaced"
        assert watch.start()
        assert watch.problem() is None
        shutil.rmtree(specs)
        assert watch.problem() in ("the specs directory is gone", "the event emitter stopped")
        assert not watch.start()
        assert not watch.watching
    finally:
        watch.stop()


def test_root_watch_delivers_real_events(specs: Path) -> None:
    sink = DirtySet()
    watch = RootWatch(specs.parent, specs, "state.json", "auto", sink)
    try:
        assert watch.start()
        (specs / "259_x").mkdir()
        meta = specs / "259_x" / ".return-meta.json"
        meta.write_text("{}", encoding="utf-8")
        assert sink.event.wait(5)
        seen: dict[str, Path] = {}
        while str(meta) not in seen:
            sink.event.clear()
            seen.update(sink.take().paths)
            if str(meta) not in seen:
                assert sink.event.wait(5), "no event for the metadata file"
        assert seen[str(meta)] == specs.parent
        assert os.path.exists(meta)
    finally:
        watch.stop()
