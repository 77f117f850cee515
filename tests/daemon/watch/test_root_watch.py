"""The watchdog adapter: which events mark which files, and the watch's self-checks."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
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

from helpers.needs import require
from postflightd.daemon.watch import inotify
from postflightd.daemon.watch.dirty import DirtySet, Pending
from postflightd.daemon.watch.inotify_tree import EVENT_READER, SpecsTree
from postflightd.daemon.watch.observer import (
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
        trap.remove()


def test_watchdogs_overflow_warning_becomes_a_rescan_of_every_root(trap_sink: DirtySet) -> None:
    # This is the only sign watchdog gives of an IN_Q_OVERFLOW (inotify_c logs and moves on).
    logging.getLogger("watchdog.observers.inotify_c").warning(
        "Inotify queue overflowed; filesystem events were lost"
    )
    assert trap_sink.take().rescans == {None: "event queue overflow"}
    logging.getLogger("watchdog.observers.inotify_c").warning("something else")
    assert trap_sink.take().rescans == {}


def test_removing_the_trap_gives_watchdogs_logger_back_its_propagate_flag() -> None:
    wd_logger = logging.getLogger("watchdog")
    before = wd_logger.propagate
    for flag in (True, False):
        wd_logger.propagate = flag
        try:
            sink = DirtySet()
            trap = install_overflow_trap(sink)
            assert wd_logger.propagate is False
            assert trap in wd_logger.handlers
            trap.remove()
            assert wd_logger.propagate is flag
            assert trap not in wd_logger.handlers
            # Removed: an overflow warning no longer reaches this sink.
            logging.getLogger("watchdog.observers.inotify_c").warning("queue overflow")
            assert sink.take().rescans == {}
        finally:
            wd_logger.propagate = before


def test_filesystem_type_of_a_local_directory(tmp_path: Path) -> None:
    require(Path("/proc/self/mountinfo").exists(), "no /proc/self/mountinfo on this system")
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
        assert watch.kind is None
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


# --- inotify: specs/ and each task directory -------------------------------------------------


def _collect(sink: DirtySet, want: Callable[[Pending], bool], timeout: float = 5.0) -> Pending:
    """Merge what the sink hands over until ``want`` holds (or fail at the deadline)."""
    merged = Pending()
    deadline = time.monotonic() + timeout
    while not want(merged):
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out; got {merged}"
        sink.event.wait(min(remaining, 0.1))
        sink.event.clear()
        got = sink.take()
        merged.paths.update(got.paths)
        merged.writing -= set(got.paths)
        merged.writing |= got.writing
        merged.rescans.update(got.rescans)
        merged.checks |= got.checks
        merged.state_changed |= got.state_changed
    return merged


@pytest.fixture
def inotify_watch(specs: Path) -> Iterator[tuple[RootWatch, DirtySet]]:
    require(inotify.available(), "no inotify on this system")
    (specs / "259_x").mkdir()
    sink = DirtySet()
    watch = RootWatch(specs.parent, specs, "state.json", "auto", sink)
    try:
        assert watch.start()
        assert watch.kind == "inotify"
        assert watch.watch_count == 2
        yield watch, sink
    finally:
        watch.stop()


def test_the_shared_reader_thread_stops_only_when_no_watch_uses_it(specs: Path) -> None:
    """The inotify reader is one thread per process; tests stop it between them."""
    require(inotify.available(), "no inotify on this system")
    watch = RootWatch(specs.parent, specs, "state.json", "auto", DirtySet())
    try:
        assert watch.start()
        reader = EVENT_READER.get()
        assert reader.is_alive()
        assert not EVENT_READER.stop_if_unused(), "a watch still reads through it"
        assert EVENT_READER.get() is reader
    finally:
        watch.stop()
    assert EVENT_READER.stop_if_unused()
    assert not reader.is_alive()
    # The next watch starts a new one, and it delivers events.
    sink = DirtySet()
    again = RootWatch(specs.parent, specs, "state.json", "auto", sink)
    try:
        assert again.start()
        assert EVENT_READER.get() is not reader
        (specs / "state.json").write_text("{}", encoding="utf-8")
        assert _collect(sink, lambda p: bool(p.state_changed)).state_changed == {specs.parent}
    finally:
        again.stop()


def test_a_file_still_open_for_writing_is_complete_only_when_closed(
    specs: Path, inotify_watch: tuple[RootWatch, DirtySet]
) -> None:
    _, sink = inotify_watch
    meta = str(specs / "259_x" / ".return-meta.json")
    with open(meta, "w", encoding="utf-8") as fh:
        fh.write("{}")
        fh.flush()
        pending = _collect(sink, lambda p: meta in p.paths)
        assert meta in pending.writing, "modified, not closed: maybe still being written"
    pending = _collect(sink, lambda p: meta in p.paths and meta not in p.writing)
    assert pending.paths[meta] == specs.parent


def test_a_file_renamed_into_place_is_complete_at_once(
    specs: Path, inotify_watch: tuple[RootWatch, DirtySet]
) -> None:
    _, sink = inotify_watch
    tmp = specs / "259_x" / ".meta.tmp"
    tmp.write_text("{}", encoding="utf-8")
    meta = specs / "259_x" / ".return-meta.json"
    tmp.rename(meta)
    pending = _collect(sink, lambda p: str(meta) in p.paths)
    assert str(meta) not in pending.writing
    assert list(pending.paths) == [str(meta)], "the temp file's own events are not marks"


def test_task_directories_come_and_go_with_their_watches(
    specs: Path, inotify_watch: tuple[RootWatch, DirtySet], tmp_path: Path
) -> None:
    watch, sink = inotify_watch
    (specs / "260_y").mkdir()
    _collect(sink, lambda p: str(specs / "260_y" / ".return-meta.json") in p.paths)
    assert watch.watch_count == 3
    (specs / "260_y" / "node_modules" / "a" / "b").mkdir(parents=True)
    assert watch.watch_count == 3, "nothing below a task directory is watched"
    # Moved out of the project: its watch goes, and its events no longer count.
    (specs / "260_y").rename(tmp_path / "elsewhere")
    _collect(sink, lambda p: str(specs / "260_y" / ".return-meta.json") in p.paths)
    assert watch.watch_count == 2
    (tmp_path / "elsewhere" / ".return-meta.json").write_text("{}", encoding="utf-8")
    (specs / "state.json").write_text("{}", encoding="utf-8")
    pending = _collect(sink, lambda p: bool(p.state_changed))
    assert pending.paths == {}


def test_an_overflow_is_one_rescan_of_that_root_only(
    specs: Path, inotify_watch: tuple[RootWatch, DirtySet]
) -> None:
    watch, sink = inotify_watch
    tree = SpecsTree(specs.parent, specs, "state.json", sink)
    tree.dispatch(-1, 0x4000, 0, b"")  # IN_Q_OVERFLOW, as the kernel queues it
    assert sink.take().rescans == {specs.parent: "event queue overflow"}
    assert watch.ensure(["259_x", "missing_dir"]) == 0, "known or gone: nothing added"
