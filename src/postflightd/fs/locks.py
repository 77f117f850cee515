"""Every lock postflightd takes in a project, and who holds it.

``project_lock`` serialises the writers that cooperate (the daemon, a CLI run, a hook, and any
shell tool that runs ``flock specs/.state.lock ...``). The daemon's ``InstanceLock`` (one daemon
per root, ``specs/.postflightd.pid``) sits next to it, and ``lock_holder`` tells whether a
daemon watches a root. Both lock files are opened relative to the specs directory
(``directory.Directory``), never through a link.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from postflightd.errors import ProjectLockedError, UsageError
from postflightd.fs.directory import NEW_FILE_MODE, Directory, RefusedError, StoreError, open_specs

LOCK_NAME: Final = ".state.lock"
#: The instance lock: one daemon per root (``InstanceLock``).
PID_FILE_NAME: Final = ".postflightd.pid"


class LockTimeoutError(ProjectLockedError):
    """Another writer held the project lock for longer than we were willing to wait."""


# --- the lock -------------------------------------------------------------------------------


@contextmanager
def project_lock(specs: Directory, timeout_s: float = 30.0) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``specs/.state.lock`` for the ``with`` block.

    The lock lives on a dedicated file, never on state.json: ``os.replace`` gives state.json a
    new inode at every write, so a lock on it would not exclude the next writer. The lock is
    per open file description, hence not re-entrant: nesting two ``project_lock`` calls on the
    same directory in one process waits for itself until ``timeout_s``.
    """
    lock_path = specs.child(LOCK_NAME)
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        fd = _open_lock_file(specs)
        try:
            acquired = _try_flock(fd, lock_path)
            if acquired and _still_linked(fd, specs):
                break
        except BaseException:
            os.close(fd)
            raise
        # Not acquired, or acquired on a lock file someone deleted or replaced meanwhile (the
        # next writer would lock the new file, so holding the old one excludes nobody).
        os.close(fd)
        if not acquired and time.monotonic() >= deadline:
            raise LockTimeoutError(
                f"{lock_path}: another writer has held this lock for more than "
                f"{timeout_s:g} s; find it with `fuser -v {lock_path}` (a postflightd daemon, "
                "a hook, or a script under `flock`) and retry"
            )
        if not acquired:
            # Jittered backoff: two waiters must not wake in lock step. (random is imported
            # only when a lock is contended: 1.6 ms of every command's start-up else.)
            import random

            time.sleep(delay * (0.5 + random.random()))  # noqa: S311 - timing jitter, not crypto
            delay = min(delay * 2, 0.05)
    try:
        yield
    finally:
        # Closing the descriptor releases the flock; no explicit LOCK_UN needed.
        os.close(fd)


def _open_lock_file(specs: Directory) -> int:
    lock_path = specs.child(LOCK_NAME)
    try:
        fd, _ = specs.open_regular(LOCK_NAME, os.O_RDWR | os.O_CREAT, NEW_FILE_MODE)
    except RefusedError as exc:
        raise StoreError(
            f"{lock_path}: the lock file {exc.strerror}: remove it (postflightd creates it)"
        ) from None
    except OSError as exc:
        raise StoreError(
            f"{lock_path}: cannot open the lock file: {exc.strerror}; the specs directory "
            "must exist and be writable"
        ) from None
    return fd


def _try_flock(fd: int, lock_path: Path) -> bool:
    # Imported here: fcntl is POSIX only, and `scan` and `check-return` import this module
    # without ever taking the lock.
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        # ENOLCK and friends: some network filesystems do not support flock at all.
        raise StoreError(f"{lock_path}: cannot lock: {exc.strerror}") from None
    return True


def _still_linked(fd: int, specs: Directory) -> bool:
    st = specs.lstat(LOCK_NAME)
    if st is None:
        return False
    held = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


# --- one daemon per root: the instance lock -------------------------------------------------


class InstanceLockError(UsageError):
    """The instance lock cannot be taken (exit 2): another daemon, or a refused pid file."""


class AlreadyRunningError(InstanceLockError):
    """A second daemon on a root: exit 2, naming the first one's pid."""


class InstanceLock:
    """An ``flock`` on ``specs/.postflightd.pid``, which holds the owner's pid while it runs.

    The pid in the file is only informative (the lock is the truth), so a stale file left by a
    crash never blocks a new daemon.
    """

    def __init__(self, specs_dir: Path) -> None:
        self.path = specs_dir / PID_FILE_NAME
        self._fd: int | None = None

    def acquire(self, root: Path) -> None:
        import fcntl  # POSIX only: see _try_flock

        # The pid file is opened relative to the specs directory, itself opened without links,
        # and must be a regular file: a link planted at it is refused, never truncated (a
        # daemon running as root would otherwise empty whatever file it points to), and a
        # FIFO neither blocks the open nor is written.
        try:
            with open_specs(root, str(self.path.parent.relative_to(root))) as specs:
                fd, _ = specs.open_regular(PID_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except RefusedError as exc:
            raise InstanceLockError(
                f"{exc}: the daemon's pid file must be a plain file; remove it and retry"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            who = f"pid {pid}" if pid else "another process"
            raise AlreadyRunningError(
                f"another postflightd ({who}) is already watching {root} "
                f"(lock {self.path}); one daemon per root: stop it first"
                + (f" (kill {pid})" if pid else "")
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def lock_holder(specs: Directory | None) -> int | None:
    """The pid of the daemon watching ``specs`` (0 if unknown), or None when there is none.

    A pid file that is a link or a FIFO is never opened through (no daemon can hold it).
    """
    import fcntl  # POSIX only: see _try_flock

    if specs is None:
        return None
    try:
        fd, _ = specs.open_regular(PID_FILE_NAME)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd) or 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def project_lock_busy(specs: Directory | None) -> bool:
    """Whether another writer holds the project lock now (a probe: a shared lock tried and
    let go at once, on the lock file opened read-only and never created)."""
    import fcntl  # POSIX only: see _try_flock

    if specs is None:
        return False
    try:
        fd, _ = specs.open_regular(LOCK_NAME)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False  # a filesystem without flock: nobody can hold it
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
