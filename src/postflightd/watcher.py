"""The watchdog adapter: which metadata files changed, and whether each watch still holds.

Events are hints; the directory is the truth. The handler only records dirty paths and wakes
the daemon's loop. ``RootWatch`` owns one observer per root and answers whether it is still
watching the right directory: watchdog fails silently in several ways (a dead dispatcher or
emitter thread, a specs directory replaced under it, a queue overflow that is only logged),
and each one turns into a rescan request here.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from watchdog.events import (
    EVENT_TYPE_ATTRIB,
    EVENT_TYPE_CLOSED_NO_WRITE,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_OPENED,
    FileSystemEvent,
    FileSystemEventHandler,
)

from postflightd.loader import META_NAME

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

ObserverMode = Literal["auto", "inotify", "polling"]
ObserverKind = Literal["native", "polling"]

#: Events that cannot change what a metadata file holds.
_IGNORED_EVENTS: Final = frozenset(
    {EVENT_TYPE_OPENED, EVENT_TYPE_CLOSED_NO_WRITE, EVENT_TYPE_ATTRIB}
)

#: Filesystems that send no inotify events for changes made by other machines.
NETWORK_FILESYSTEMS: Final = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "afs",
        "ceph",
        "glusterfs",
        "lustre",
        "fuse.sshfs",
        "fuse.glusterfs",
        "fuse.davfs2",
        "fuse.s3fs",
        "fuse.rclone",
    }
)

POLL_INTERVAL_S: Final = 1.0
#: How often watchdog's own threads wake when nothing happens (idle CPU, SPEC 6).
IDLE_WAKE_S: Final = 10.0


@dataclass(slots=True)
class Pending:
    """What the handlers and the supervisor collected since the loop last looked."""

    paths: dict[str, Path] = field(default_factory=dict)
    #: roots to rescan (None: every root), with the reason.
    rescans: dict[Path | None, str] = field(default_factory=dict)
    #: roots whose watch must be checked now (the specs directory itself changed).
    checks: set[Path | None] = field(default_factory=set)
    #: roots whose state file changed (files held back by an unusable state.json retry).
    state_changed: set[Path] = field(default_factory=set)


class DirtySet:
    """Thread-safe hand-over from watchdog's threads to the daemon's loop."""

    def __init__(self, wake: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._pending = Pending()
        #: set on every hand-over when no ``wake`` callback is given (tests wait on it).
        self.event = threading.Event()
        self._wake = wake if wake is not None else self.event.set

    def mark(self, root: Path, path: str) -> None:
        with self._lock:
            self._pending.paths[path] = root
        self._wake()

    def request_rescan(self, root: Path | None, reason: str) -> None:
        with self._lock:
            self._pending.rescans.setdefault(root, reason)
        self._wake()

    def request_check(self, root: Path | None) -> None:
        with self._lock:
            self._pending.checks.add(root)
        self._wake()

    def state_changed(self, root: Path) -> None:
        with self._lock:
            self._pending.state_changed.add(root)
        self._wake()

    def take(self) -> Pending:
        with self._lock:
            taken, self._pending = self._pending, Pending()
        return taken


class SpecsEventHandler(FileSystemEventHandler):
    """Marks metadata files dirty. Nothing else: an exception here kills the observer thread.

    A plain handler overriding ``dispatch``: watchdog's pattern-matching handlers test only one
    path of a move, so they drop the rename whose *destination* is the metadata file (the
    write-temp-then-rename pattern). Both paths are checked here.
    """

    def __init__(self, root: Path, specs_dir: Path, state_file: str, sink: DirtySet) -> None:
        super().__init__()
        self._root = root
        self._specs = str(specs_dir)
        self._state_file = state_file
        self._sink = sink

    def dispatch(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        if kind in _IGNORED_EVENTS:
            return
        for raw, arrived in ((event.src_path, kind == EVENT_TYPE_CREATED), (event.dest_path, True)):
            if not raw:
                continue
            path = os.fsdecode(raw)
            parent, name = os.path.split(path)
            if name == META_NAME:
                self._sink.mark(self._root, path)
            elif path == self._specs:
                # The specs directory itself was deleted or moved: the watch is now blind.
                self._sink.request_check(self._root)
            elif parent == self._specs:
                if name == self._state_file:
                    self._sink.state_changed(self._root)
                elif arrived:
                    # A task directory moved in whole brings its metadata file without any
                    # event for the file itself; a symlink to a directory arrives as a *file*
                    # event (inotify sets no IN_ISDIR on links), so every new entry counts.
                    self._sink.mark(self._root, f"{path}{os.sep}{META_NAME}")


class OverflowTrap(logging.Handler):
    """Turns watchdog's queue-overflow log warning into a rescan of every root.

    watchdog (inotify) reports a kernel IN_Q_OVERFLOW only by logging a warning: for a
    non-recursive or rebuilt watch no event reaches the handler, so the events lost are
    invisible unless the log line itself is caught.
    """

    def __init__(self, sink: DirtySet) -> None:
        super().__init__(level=logging.WARNING)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed log record must not break watchdog
            return
        if "overflow" in text.lower():
            self._sink.request_rescan(None, "event queue overflow")


def install_overflow_trap(sink: DirtySet) -> OverflowTrap:
    trap = OverflowTrap(sink)
    wd_logger = logging.getLogger("watchdog")
    wd_logger.addHandler(trap)
    # Our trap is the one handler: watchdog's own warning is re-logged by the daemon instead.
    wd_logger.propagate = False
    return trap


def filesystem_type(path: Path) -> str | None:
    """The filesystem type of the mount holding ``path`` (Linux /proc/self/mountinfo)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:  # noqa: PTH123
            lines = fh.readlines()
    except OSError:
        return None
    target = os.path.realpath(path)
    best, best_type = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, best_type = mount, right.split()[0]
    return best_type


def _observer(kind: ObserverKind) -> BaseObserver:
    if kind == "polling":
        from watchdog.observers.polling import PollingObserver

        return PollingObserver(timeout=POLL_INTERVAL_S)
    from watchdog.observers import Observer

    _shorten_move_pairing()
    # The dispatcher thread wakes every ``timeout`` seconds even when idle (queue.get with a
    # timeout); stop() does not wait for it (it queues a stop marker), so a long one is free.
    return Observer(timeout=IDLE_WAKE_S)


#: How long watchdog holds an IN_MOVED_FROM to pair it with its IN_MOVED_TO.
MOVE_PAIRING_S: Final = 0.02


def _shorten_move_pairing() -> None:
    """Hold unpaired IN_MOVED_FROM events for 20 ms instead of watchdog's 0.5 s.

    watchdog's inotify move grouper (``InotifyMoveEventGrouper.delay``, a class attribute)
    puts every IN_MOVED_FROM on a DelayedQueue whose ``get`` sleeps out the whole delay when
    that event reaches the head, even if the matching IN_MOVED_TO removes it a moment later.
    Our own clean-up renames each applied file aside, so every event behind such a head
    (the next agent's final file) waited 0.5 s. The handler reads src and dest paths itself
    and needs no paired moves: an unpaired half is a deleted or created event, just as dirty.
    """
    try:
        from watchdog.observers.inotify_move_event_grouper import InotifyMoveEventGrouper
    except ImportError:  # watchdog < 6 kept the delay on InotifyBuffer; leave it as it is
        return
    InotifyMoveEventGrouper.delay = MOVE_PAIRING_S


def choose_kind(mode: ObserverMode, specs_dir: Path) -> tuple[ObserverKind, str]:
    """Which observer to try first, and why."""
    if mode == "polling":
        return "polling", 'observer = "polling" in the configuration'
    fstype = filesystem_type(specs_dir)
    if mode == "auto" and fstype in NETWORK_FILESYSTEMS:
        return "polling", f"{fstype} is a network filesystem: inotify sees no remote changes"
    return "native", "inotify" if mode == "inotify" else "native events"


#: An identity of a directory: (st_dev, st_ino).
DirId = tuple[int, int]


def dir_identity(path: Path) -> DirId | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class RootWatch:
    """One root's observer over its specs directory, and the checks that it still works."""

    def __init__(
        self,
        root: Path,
        specs_dir: Path,
        state_file: str,
        mode: ObserverMode,
        sink: DirtySet,
        on_fallback: Callable[[str], None] | None = None,
    ) -> None:
        self.root = root
        self.specs_dir = specs_dir
        self.mode = mode
        self.kind: ObserverKind | None = None
        #: why this kind of observer was chosen (for the log).
        self.why = ""
        self.identity: DirId | None = None
        self._observer: BaseObserver | None = None
        self._handler = SpecsEventHandler(root, specs_dir, state_file, sink)
        self._on_fallback = on_fallback

    @property
    def watching(self) -> bool:
        return self._observer is not None

    def start(self) -> bool:
        """Start watching; False when the specs directory does not exist (yet)."""
        self.stop()
        identity = dir_identity(self.specs_dir)
        if identity is None:
            return False
        kind, why = choose_kind(self.mode, self.specs_dir)
        try:
            self._observer = self._started(kind)
        except OSError as exc:
            if kind == "polling" or exc.errno not in (errno.ENOSPC, errno.EMFILE, errno.ENOSYS):
                raise
            # The inotify watch or instance limit is reached: polling still sees everything.
            if self._on_fallback is not None:
                self._on_fallback(f"{exc.strerror or exc}; falling back to polling")
            kind = "polling"
            self._observer = self._started(kind)
            why = "inotify unavailable"
        self.kind = kind
        self.why = why
        # The observer watches whatever inode the path named when it was scheduled.
        self.identity = identity
        return True

    def _started(self, kind: ObserverKind) -> BaseObserver:
        observer = _observer(kind)
        observer.daemon = True
        observer.schedule(self._handler, str(self.specs_dir), recursive=True)
        try:
            observer.start()
        except BaseException:
            observer.unschedule_all()
            raise
        return observer

    def problem(self) -> str | None:
        """Why the watch no longer sees the specs directory's changes, or None."""
        if self._observer is None:
            return "not watching"
        if not self._observer.is_alive():
            return "the observer thread died"
        if not all(e.is_alive() for e in self._observer.emitters):
            return "the event emitter stopped"
        identity = dir_identity(self.specs_dir)
        if identity is None:
            return "the specs directory is gone"
        if identity != self.identity:
            # inotify watches inodes: after a rename or re-creation it watches the old one.
            return "the specs directory was replaced"
        return None

    def stop(self, timeout: float = 1.0) -> None:
        observer, self._observer = self._observer, None
        if observer is None:
            return
        # A dead observer may fail to stop; it is dropped anyway.
        with contextlib.suppress(Exception):
            observer.stop()
        if observer.is_alive() and threading.current_thread() is not observer:
            observer.join(timeout)
