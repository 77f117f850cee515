"""One root's watch: which observer it uses, and whether it still holds.

Events are hints; the directory is the truth. The handlers only record dirty paths on a
``dirty.DirtySet``, which wakes the daemon's loop. ``RootWatch`` owns one root's watch
(inotify through ``inotify_tree`` on Linux, watchdog's observer elsewhere, or none when
polling) and answers whether it is still watching the right directory: watchdog fails silently
in several ways (a dead dispatcher or emitter thread, a specs directory replaced under it, a
queue overflow that is only logged), and each one turns into a rescan request here.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable
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

from postflightd.daemon.watch import inotify
from postflightd.daemon.watch.dirty import DirtySet
from postflightd.daemon.watch.inotify_tree import EVENT_READER, EventReader, SpecsTree
from postflightd.models.files import META_NAME

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

ObserverMode = Literal["auto", "inotify", "polling"]
ObserverKind = Literal["inotify", "native", "polling"]

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
#: How often watchdog's own threads wake when nothing happens (an idle daemon must cost next
#: to no CPU).
IDLE_WAKE_S: Final = 10.0


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
    invisible unless the log line itself is caught. ``remove`` takes the trap off and gives
    watchdog's logger back the ``propagate`` flag it had.
    """

    def __init__(self, sink: DirtySet) -> None:
        super().__init__(level=logging.WARNING)
        self._sink = sink
        self._logger = logging.getLogger("watchdog")
        self._propagate: bool | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed log record must not break watchdog
            return
        if "overflow" in text.lower():
            self._sink.request_rescan(None, "event queue overflow")

    def install(self) -> None:
        if self._propagate is None:
            self._propagate = self._logger.propagate
        self._logger.addHandler(self)
        # watchdog's records stop at the trap: the daemon logs an overflow in its own format
        # (``event_queue_overflow``, when the rescan runs); a handler on the root logger (an
        # embedding program's, pytest's) would otherwise print watchdog's raw warning too.
        self._logger.propagate = False

    def remove(self) -> None:
        self._logger.removeHandler(self)
        if self._propagate is not None:
            self._logger.propagate = self._propagate
            self._propagate = None


def install_overflow_trap(sink: DirtySet) -> OverflowTrap:
    """An ``OverflowTrap`` on watchdog's logger; ``remove()`` it when done."""
    trap = OverflowTrap(sink)
    trap.install()
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


def _observer() -> BaseObserver:
    """watchdog's native observer (FSEvents, kqueue, ReadDirectoryChangesW): not on Linux."""
    from watchdog.observers import Observer

    # The dispatcher thread wakes every ``timeout`` seconds even when idle (queue.get with a
    # timeout); stop() does not wait for it (it queues a stop marker), so a long one is free.
    return Observer(timeout=IDLE_WAKE_S)


def choose_kind(mode: ObserverMode, specs_dir: Path) -> tuple[ObserverKind, str]:
    """Which kind of watch to try first, and why."""
    if mode == "polling":
        return "polling", 'observer = "polling" in the configuration'
    fstype = filesystem_type(specs_dir)
    if mode == "auto" and fstype in NETWORK_FILESYSTEMS:
        return "polling", f"{fstype} is a network filesystem: inotify sees no remote changes"
    if inotify.available():
        return "inotify", "inotify on specs/ and each task directory (not recursive)"
    return "native", "native events (watchdog)"


#: An identity of a directory: (st_dev, st_ino).
DirId = tuple[int, int]


def dir_identity(path: Path) -> DirId | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


#: errno values of inotify_init1/inotify_add_watch that polling works around.
_FALLBACK_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EMFILE, errno.ENOSYS})


class RootWatch:
    """One root's watch over its specs directory, and the checks that it still works.

    ``kind`` is ``inotify`` (Linux: specs/ and each task directory), ``native`` (watchdog's
    observer elsewhere) or ``polling``: no events at all, the daemon rescans the root on a
    timer (configured, a network filesystem, or the inotify limits reached).
    """

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
        #: why this kind of watch was chosen (for the log).
        self.why = ""
        #: set once inotify failed for this root (its limits): polling until a reload.
        self.fallback: str | None = None
        self.identity: DirId | None = None
        self._state_file = state_file
        self._sink = sink
        self._observer: BaseObserver | None = None
        self._tree: SpecsTree | None = None
        self._reader: EventReader | None = None
        self._handler = SpecsEventHandler(root, specs_dir, state_file, sink)
        self._on_fallback = on_fallback

    @property
    def watch_count(self) -> int:
        """inotify watches this root holds (0 when polling)."""
        return self._tree.watch_count if self._tree is not None else 0

    def start(self) -> bool:
        """Start watching; False when the specs directory does not exist (yet)."""
        self.stop()
        identity = dir_identity(self.specs_dir)
        if identity is None:
            return False
        kind, why = choose_kind(self.mode, self.specs_dir)
        if self.fallback is not None and kind != "polling":
            kind, why = "polling", self.fallback
        try:
            self._begin(kind)
        except OSError as exc:
            if kind == "polling" or exc.errno not in _FALLBACK_ERRNOS:
                raise
            # The inotify watch or instance limit is reached: polling still sees everything.
            self.fallback = f"{exc.strerror or exc}; polling instead"
            if self._on_fallback is not None:
                self._on_fallback(self.fallback)
            kind, why = "polling", self.fallback
            self._begin(kind)
        self.kind = kind
        self.why = why
        # inotify watches whatever inode the path named when the watch was added.
        self.identity = identity
        return True

    def _begin(self, kind: ObserverKind) -> None:
        if kind == "polling":
            return
        if kind == "inotify":
            tree = SpecsTree(self.root, self.specs_dir, self._state_file, self._sink)
            tree.start()
            self._tree = tree
            self._reader = EVENT_READER.get()
            self._reader.add(tree)
            return
        observer = _observer()
        observer.daemon = True
        observer.schedule(self._handler, str(self.specs_dir), recursive=True)
        try:
            observer.start()
        except BaseException:
            observer.unschedule_all()
            raise
        self._observer = observer

    def ensure(self, task_dirs: list[str]) -> int:
        """After a rescan: watch task directories created while events were lost."""
        return self._tree.ensure(task_dirs) if self._tree is not None else 0

    def problem(self) -> str | None:
        """Why the watch no longer sees the specs directory's changes, or None."""
        if self.kind is None:
            return "not watching"
        if self._tree is not None:
            if self._tree.failed is not None:
                self.fallback = f"{self._tree.failed}; polling instead"
                if self._on_fallback is not None:
                    self._on_fallback(self.fallback)
                return self._tree.failed
            if self._reader is None or not self._reader.is_alive():
                return "the event reader thread died"
        if self._observer is not None:
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
        self.kind = None
        tree, self._tree = self._tree, None
        reader, self._reader = self._reader, None
        if tree is not None:
            if reader is not None:
                reader.remove(tree)
            tree.close()
        observer, self._observer = self._observer, None
        if observer is None:
            return
        # A dead observer may fail to stop; it is dropped anyway.
        with contextlib.suppress(Exception):
            observer.stop()
        if observer.is_alive() and threading.current_thread() is not observer:
            observer.join(timeout)
