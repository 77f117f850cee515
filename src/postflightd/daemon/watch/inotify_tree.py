"""inotify on one root's specs/ and on each task directory in it, one level down, and the one
thread that reads every root's events.

The Linux watch ``observer.RootWatch`` uses when inotify is available: never recursive (what an
agent leaves inside a task directory adds no watch and no event), one inotify instance per
root, one reader thread for the whole process. Events become dirty paths, rescans or checks
on the root's ``DirtySet``, exactly as watchdog's events do in ``observer``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import threading
from pathlib import Path
from typing import Final

from postflightd.daemon.watch import inotify
from postflightd.daemon.watch.dirty import DirtySet
from postflightd.models.files import META_NAME

#: specs/: task directories coming and going, state.json replaced or rewritten, itself moved.
SPECS_MASK: Final = (
    inotify.IN_CREATE
    | inotify.IN_MOVED_FROM
    | inotify.IN_MOVED_TO
    | inotify.IN_DELETE
    | inotify.IN_CLOSE_WRITE
    | inotify.IN_DELETE_SELF
    | inotify.IN_MOVE_SELF
    | inotify.IN_ONLYDIR
    | inotify.IN_DONT_FOLLOW
    | inotify.IN_EXCL_UNLINK
)
#: A task directory: its metadata file written, closed, renamed in or out, deleted. No
#: open/close-nowrite/access/attrib: reading a tree (our own rescans included) sends nothing.
TASK_MASK: Final = (
    inotify.IN_CREATE
    | inotify.IN_MODIFY
    | inotify.IN_CLOSE_WRITE
    | inotify.IN_MOVED_FROM
    | inotify.IN_MOVED_TO
    | inotify.IN_DELETE
    | inotify.IN_ONLYDIR
    | inotify.IN_DONT_FOLLOW
    | inotify.IN_EXCL_UNLINK
)
_META_B: Final = os.fsencode(META_NAME)
_ARRIVED: Final = inotify.IN_CREATE | inotify.IN_MOVED_TO
_LEFT: Final = inotify.IN_DELETE | inotify.IN_MOVED_FROM


class SpecsTree:
    """One root's inotify instance: a watch on specs/ and one on each task directory.

    Never recursive: what an agent leaves inside a task directory (a ``node_modules``, a build
    tree) adds no watch and no event. The event reader thread calls ``dispatch``; the
    daemon's loop calls ``ensure`` after each rescan (a task directory created while events
    were lost); both under ``_lock``.
    """

    def __init__(self, root: Path, specs_dir: Path, state_file: str, sink: DirtySet) -> None:
        self.root = root
        self._specs = os.fsencode(specs_dir)
        self._specs_str = str(specs_dir)
        self._state_b = os.fsencode(state_file)
        self._sink = sink
        self._lock = threading.Lock()
        self._ino: inotify.Inotify | None = None
        self._specs_wd = -1
        #: wd -> task directory name (bytes), and back.
        self._dirs: dict[int, bytes] = {}
        self._wds: dict[bytes, int] = {}
        #: set when a watch could not be added while running (the watch limit): the
        #: supervisor falls back to polling for this root.
        self.failed: str | None = None

    @property
    def fd(self) -> int:
        return self._ino.fd if self._ino is not None else -1

    @property
    def watch_count(self) -> int:
        return len(self._dirs) + (1 if self._specs_wd >= 0 else 0)

    def start(self) -> None:
        """Watch specs/ and every task directory in it; OSError (ENOSPC ...) leaves none."""
        ino = inotify.Inotify()
        try:
            self._ino = ino
            self._specs_wd = ino.add_watch(self._specs, SPECS_MASK)
            with os.scandir(self._specs) as it:
                names = [e.name for e in it if e.is_dir(follow_symlinks=False)]
            with self._lock:
                for name in names:
                    self._add(ino, name)
        except BaseException:
            self.close()
            raise

    def _add(self, ino: inotify.Inotify, name: bytes) -> None:
        """Watch task directory ``name`` (under the lock); a vanished one is skipped."""
        if name in self._wds or name.startswith(b"."):
            return
        try:
            wd = ino.add_watch(self._specs + b"/" + name, TASK_MASK)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ELOOP):
                return  # gone, a file, unreadable or a link: nothing to watch there
            raise
        old = self._dirs.get(wd)
        if old is not None:
            self._wds.pop(old, None)  # the same inode under a new name (moved within specs)
        self._dirs[wd] = name
        self._wds[name] = wd

    def _drop(self, name: bytes) -> None:
        wd = self._wds.pop(name, None)
        if wd is not None:
            self._dirs.pop(wd, None)
            if self._ino is not None:
                # A directory moved out keeps its watch (inotify follows the inode): drop it,
                # or its events would be reported under the old path.
                self._ino.rm_watch(wd)

    def ensure(self, names: list[str]) -> int:
        """Watch the task directories in ``names`` not watched yet; how many were added."""
        added = 0
        with self._lock:
            ino = self._ino
            if ino is None:
                return 0
            for raw in names:
                name = os.fsencode(raw)
                if name in self._wds:
                    continue
                try:
                    self._add(ino, name)
                except OSError as exc:
                    self.failed = str(exc.strerror or exc)
                    self._sink.request_check(self.root)
                    return added
                added += name in self._wds
        return added

    def read(self) -> None:
        """Read every queued event and dispatch it (the event reader thread)."""
        # Under the lock: close() takes it too, so the descriptor cannot be closed (and its
        # number reused by another file) while it is being read.
        with self._lock:
            if self._ino is None:
                return
            try:
                events = self._ino.read()
            except OSError:
                return
        for event in events:
            self.dispatch(*event)

    def dispatch(self, wd: int, mask: int, _cookie: int, name: bytes) -> None:
        """Turn one inotify event into dirty paths, a rescan or a check. Nothing slow."""
        if mask & inotify.IN_Q_OVERFLOW:
            # Events were lost: one rescan of this root (no watch is rebuilt, so the rescan
            # itself sends no events and cannot overflow the queue again).
            self._sink.request_rescan(self.root, "event queue overflow")
            return
        if wd == self._specs_wd:
            self._specs_event(mask, name)
            return
        with self._lock:
            task = self._dirs.get(wd)
            if mask & inotify.IN_IGNORED:
                if task is not None:
                    self._dirs.pop(wd, None)
                    if self._wds.get(task) == wd:
                        del self._wds[task]
                return
        if task is None or name != _META_B:
            return
        path = os.fsdecode(self._specs + b"/" + task + b"/" + name)
        # Modified or created: a writer has it open. Closed, renamed in, or gone: complete.
        writing = bool(mask & (inotify.IN_MODIFY | inotify.IN_CREATE))
        self._sink.mark(self.root, path, complete=not writing)

    def _specs_event(self, mask: int, name: bytes) -> None:
        if mask & (inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF | inotify.IN_IGNORED):
            self._sink.request_check(self.root)
            return
        if not name:
            return
        if name == self._state_b:
            if mask & (inotify.IN_CLOSE_WRITE | inotify.IN_MOVED_TO | inotify.IN_CREATE):
                self._sink.state_changed(self.root)
            return
        if name.startswith(b"."):
            return  # our own temporary files, the pid and lock files: never a task directory
        meta = f"{self._specs_str}{os.sep}{os.fsdecode(name)}{os.sep}{META_NAME}"
        if mask & _ARRIVED:
            if mask & inotify.IN_ISDIR:
                with self._lock:
                    ino = self._ino
                    if ino is None:
                        return
                    try:
                        # Watch first, then look: a file written before the watch existed is
                        # found by the look, one written after sends its event.
                        self._add(ino, name)
                    except OSError as exc:
                        self.failed = str(exc.strerror or exc)
                        self._sink.request_check(self.root)
            # A symlink to a directory arrives as a file (no IN_ISDIR): marked too, so that
            # the pipeline refuses it with PF100.
            self._sink.mark(self.root, meta)
        elif mask & _LEFT and mask & inotify.IN_ISDIR:
            with self._lock:
                self._drop(name)
            self._sink.mark(self.root, meta)

    def close(self) -> None:
        with self._lock:
            ino, self._ino = self._ino, None
            self._dirs.clear()
            self._wds.clear()
            self._specs_wd = -1
            if ino is not None:
                ino.close()  # closing the instance frees every watch at once


class EventReader(threading.Thread):
    """The one thread reading every root's inotify instance (poll(2); no timeout when idle)."""

    def __init__(self) -> None:
        super().__init__(name="postflightd-inotify", daemon=True)
        self._lock = threading.Lock()
        self._trees: dict[int, SpecsTree] = {}
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)
        self._stopping = False

    def add(self, tree: SpecsTree) -> None:
        with self._lock:
            self._trees[tree.fd] = tree
            self._poller.register(tree.fd, select.POLLIN)
        self._wake()

    def remove(self, tree: SpecsTree) -> None:
        with self._lock:
            for fd, known in list(self._trees.items()):
                if known is tree:
                    del self._trees[fd]
                    with contextlib.suppress(KeyError, ValueError):
                        self._poller.unregister(fd)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"\0")

    @property
    def in_use(self) -> bool:
        with self._lock:
            return bool(self._trees)

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread and close its wake-up pipe."""
        self._stopping = True
        self._wake()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)
        if not self.is_alive():
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def run(self) -> None:
        while not self._stopping:
            ready = self._poller.poll()
            for fd, _ in ready:
                if fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self._wake_r, 4096):
                            continue
                    continue
                with self._lock:
                    tree = self._trees.get(fd)
                if tree is not None:
                    tree.read()


class SharedReader:
    """The process's one ``EventReader``, shared by every root: started on first use (again
    if it died). The daemon keeps it for its whole life; tests stop it between them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reader: EventReader | None = None

    def get(self) -> EventReader:
        """The running reader thread."""
        with self._lock:
            if self._reader is None or not self._reader.is_alive():
                self._reader = EventReader()
                self._reader.start()
            return self._reader

    def stop_if_unused(self) -> bool:
        """Stop the reader when no root's tree is on it; False when one still is."""
        with self._lock:
            reader, self._reader = self._reader, None
            if reader is not None and reader.in_use:
                self._reader = reader
                return False
        if reader is not None:
            reader.stop()
        return True


EVENT_READER: Final = SharedReader()
