"""Safe writes of the project files (SPEC 3.1): locked, atomic, never over an unseen update.

Three layers, used together by postflight:

* ``project_lock`` serialises the writers that cooperate (the daemon, a CLI run, a hook, and
  any shell tool that runs ``flock specs/.state.lock ...``). The daemon's ``InstanceLock``
  (one daemon per root, ``specs/.postflightd.pid``) sits next to it: every lock postflightd
  takes in a project, and who holds it (``lock_holder``), is decided here.
* ``commit`` is an optimistic read-modify-write for the writers that do not lock (a bare
  ``jq ... > tmp && mv tmp state.json``): it checks just before replacing that the file is
  still what it read, and otherwise re-reads and re-applies.
* ``atomic_write`` makes every replacement all-or-nothing, whatever instant a crash hits.

Every file is named relative to an open ``tree.Directory`` (the specs directory, a task
directory), never by a path: a project file that is a link or not a regular file is refused,
and nothing is read, written or created through it (SPEC 7.1).

The remaining window: ``commit`` checks ``unchanged`` after the new content is written and
fsynced to its temporary file and immediately before ``os.replace``; a writer that does not
lock and replaces the file in the microseconds between that check and the replace still has
its update overwritten. POSIX offers no compare-and-swap rename, so no check can close it.
It is acceptable because it only concerns tools outside the protocol, it is orders of
magnitude narrower than the whole read-modify-write it replaces, and any tool can close it
completely by taking the lock, which the README documents.

Why one module of ~640 lines: the locks, the replace, the guarded delete and the clean-up of
what a killed writer left are one protocol over the same files. The clean-up recognises the
temporary and set-aside names that ``_replace`` and ``delete_if_unchanged`` make, and it is
safe only because every writer of ours takes ``project_lock`` before making them; split
apart, a change to one side could silently stop matching the other.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import random
import re
import secrets
import signal
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from postflightd.errors import ProjectFileError, ProjectLockedError, UsageError
from postflightd.fs.directory import Directory, RefusedError, kind_of, open_specs
from postflightd.project.metadata import FileIdentity

LOCK_NAME: Final = ".state.lock"
#: The instance lock: one daemon per root (``InstanceLock``).
PID_FILE_NAME: Final = ".postflightd.pid"
CRASH_ENV: Final = "POSTFLIGHTD_CRASH_AT"
STOP_ENV: Final = "POSTFLIGHTD_STOP_AT"
FAULT_ENV: Final = "POSTFLIGHTD_FAULT_AT"
FAULT_WHILE_ENV: Final = "POSTFLIGHTD_FAULT_WHILE"
NEW_FILE_MODE: Final = 0o644
_READ_CHUNK: Final = 1 << 20


class LockTimeoutError(ProjectLockedError):
    """Another writer held the project lock for longer than we were willing to wait."""


class StoreError(ProjectFileError):
    """A project file could not be read or written; the original is left untouched."""


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
            # Jittered backoff: two waiters must not wake in lock step.
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


# --- reading --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A file as read at one instant: its bytes and the identity they were read from."""

    path: Path  # for messages: ``directory`` and ``name`` are what is read and written
    raw: bytes | None  # None: the file does not exist
    identity: FileIdentity | None
    directory: Directory
    name: str


def read_snapshot(directory: Directory, name: str) -> Snapshot:
    """Read ``name`` and the identity of the very inode read (fstat, not a second stat).

    A link, a directory or a FIFO at ``name`` is refused (a StoreError), never followed.
    """
    path = directory.child(name)
    try:
        raw, st = directory.read(name)
    except FileNotFoundError:
        return Snapshot(path, None, None, directory, name)
    except RefusedError as exc:
        raise StoreError(f"{path}: {exc.strerror}; move it away and retry") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror}") from None
    return Snapshot(path, raw, FileIdentity.of(st), directory, name)


def unchanged(snapshot: Snapshot) -> bool:
    """Whether the file is still the one read: same inode, size, mtime_ns *and* content.

    The content comparison covers what stat cannot: a rewrite in place within the
    filesystem's timestamp granularity that happens to keep the size.
    """
    try:
        st = snapshot.directory.lstat(snapshot.name)
    except OSError:
        return False
    if st is None:
        return snapshot.raw is None
    if snapshot.raw is None or FileIdentity.of(st) != snapshot.identity:
        return False
    try:
        current = read_snapshot(snapshot.directory, snapshot.name)
    except StoreError:
        return False
    return current.identity == snapshot.identity and current.raw == snapshot.raw


# --- writing --------------------------------------------------------------------------------


def crash_point(label: str) -> None:
    """Test hook: die by SIGKILL here when ``$POSTFLIGHTD_CRASH_AT`` names this point.

    ``$POSTFLIGHTD_STOP_AT`` stops the process (SIGSTOP) there instead, every time it passes,
    so a test can run another command at exactly that instant and SIGCONT it after.
    """
    if os.environ.get(CRASH_ENV) == label:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(STOP_ENV) == label:
        os.kill(os.getpid(), signal.SIGSTOP)


def fault_point(label: str) -> None:
    """Test hook: raise an ``OSError`` here when ``$POSTFLIGHTD_FAULT_AT`` names this point.

    ``POSTFLIGHTD_FAULT_AT=todo:write=ENOSPC,errors:replace=EIO`` (errno names; EIO when none
    is given). With ``$POSTFLIGHTD_FAULT_WHILE=PATH`` the fault fires only while PATH exists,
    so a test can end a simulated full disk under a running daemon.
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    for item in spec.split(","):
        name, _, code = item.strip().partition("=")
        if name != label:
            continue
        flag = os.environ.get(FAULT_WHILE_ENV)
        if flag and not os.path.lexists(flag):
            return
        number = getattr(errno, code.strip() or "EIO", errno.EIO)
        raise OSError(number, os.strerror(number))


def atomic_write(
    directory: Directory, name: str, data: bytes, *, crash_label: str | None = None
) -> None:
    """Replace ``name`` in ``directory`` with ``data`` so that a crash leaves old or new.

    A temporary file in the same directory is written, fsynced, given the original file's
    permission bits (and owner, when we may), renamed over ``name`` and the directory is
    fsynced. On any error the temporary file is removed, the original is untouched and a
    ``StoreError`` says what failed. A symbolic link (or any non-regular file) at ``name`` is
    refused: nothing is written, neither through it nor over it.
    """
    _replace(directory, name, data, crash_label, precondition=None)


def commit(
    directory: Directory,
    name: str,
    transform: Callable[[Snapshot], bytes | None],
    *,
    attempts: int = 5,
    crash_label: str | None = None,
) -> Snapshot | None:
    """Read-modify-write ``name`` without losing an update made by a writer that does not lock.

    ``transform`` gets the file as read and returns the new bytes (None: nothing to write).
    Just before the replace the file must still be unchanged since it was read; otherwise it
    is read again and ``transform`` re-applied, up to ``attempts`` times. Returns the snapshot
    that was written over, or None when ``transform`` wrote nothing. See the module docstring
    for the window that remains between the check and the rename.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for _ in range(attempts):
        snapshot = read_snapshot(directory, name)
        data = transform(snapshot)
        if data is None:
            return None
        check = functools.partial(unchanged, snapshot)
        if _replace(directory, name, data, crash_label, precondition=check):
            return snapshot
    raise StoreError(
        f"{directory.child(name)}: {name} keeps changing while postflightd updates it (another "
        f"writer replaced it {attempts} times in a row); nothing was written. Make the other "
        f"tool take the lock (`flock {directory.child(LOCK_NAME)} ...`) and retry"
    )


def _replace(
    directory: Directory,
    name: str,
    data: bytes,
    crash_label: str | None,
    precondition: Callable[[], bool] | None,
) -> bool:
    """Write ``data`` over ``name`` atomically; False (nothing written) if the check fails."""
    path = directory.child(name)
    try:
        original = directory.lstat(name)
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror}") from None
    if original is not None and not stat.S_ISREG(original.st_mode):
        # A link planted here would otherwise have its target rewritten (or, dangling, created
        # anywhere). The rename below never follows one, so a link planted after this check
        # is replaced, not written through.
        raise StoreError(
            f"{path}: is {kind_of(original.st_mode)}, not a regular file; refused and never "
            "followed: nothing was written; replace it with a regular file"
        )
    # Unique per process and per call, so threads and processes never share a temp file; the
    # leading dot and the target's name say whose leftover it is after a crash.
    temp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        # O_EXCL|O_NOFOLLOW: never write through a link someone planted at the temp name.
        # A new file gets 0o644 less the umask, as any file this user creates.
        fd = directory.create_new(temp, NEW_FILE_MODE)
    except OSError as exc:
        raise StoreError(f"{path}: cannot create a temporary file: {exc.strerror}") from None
    try:
        try:
            if crash_label is not None:
                fault_point(f"{crash_label}:write")
            _write_all(fd, data)
            if original is not None:
                # fchmod is not filtered by the umask: the file keeps exactly its bits.
                os.fchmod(fd, stat.S_IMODE(original.st_mode))
                _keep_owner(fd, original)
            os.fsync(fd)
        finally:
            os.close(fd)
        if crash_label is not None:
            crash_point(f"{crash_label}:after-temp-write")
        if precondition is not None and not precondition():
            directory.unlink(temp)
            return False
        if crash_label is not None:
            fault_point(f"{crash_label}:replace")
        directory.rename(temp, name)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            directory.unlink(temp)
        if isinstance(exc, OSError):
            raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise
    if crash_label is not None:
        crash_point(f"{crash_label}:after-replace")
    _fsync_directory(directory, path)
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _keep_owner(fd: int, original: os.stat_result) -> None:
    if (original.st_uid, original.st_gid) == (os.geteuid(), os.getegid()):
        return
    # Only root (or a member of the file's group) may do this; otherwise the new file is ours,
    # as with any editor's save.
    with contextlib.suppress(PermissionError):
        os.fchown(fd, original.st_uid, original.st_gid)


def _fsync_directory(directory: Directory, path: Path) -> None:
    """Make the rename itself durable: without it a power loss can bring the old name back."""
    try:
        directory.fsync()
    except OSError as exc:
        # Some filesystems (certain FUSE and network ones) cannot fsync a directory at all.
        if exc.errno != errno.EINVAL:
            raise StoreError(
                f"{path}: written, but its directory could not be synced: {exc.strerror}"
            ) from None


# --- deleting -------------------------------------------------------------------------------


def delete_if_unchanged(directory: Directory, name: str, identity: FileIdentity) -> bool:
    """Delete ``name`` only if it is still the content processed (dev, inode, size, mtime_ns).

    The file is first renamed aside, atomically, and the identity checked on what was taken:
    so whatever is deleted is exactly what was processed, with no window between the check
    and the deletion. A file rewritten meanwhile is put back (a hard link, which never
    clobbers a newer file that arrived in between) for processing again. A writer that still
    holds the old file open and writes into it after the check is beyond any check by path.
    Everything happens inside ``directory``, the task directory the file was read from: a
    name swapped for a link is moved aside and put back as a link, its target never touched.
    Returns True when deleted; a missing file gives False.
    """
    path = directory.child(name)
    aside = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.deleting"
    try:
        directory.rename(name, aside)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(f"{path}: cannot delete: {exc.strerror}") from None
    crash_point("delete:after-rename")
    try:
        st = directory.lstat(aside)
        if st is not None and FileIdentity.of(st) == identity:
            directory.unlink(aside)
            return True
        _put_back(directory, aside, name)
    except OSError as exc:
        raise StoreError(f"{path}: cannot delete: {exc.strerror}") from None
    return False


def _put_back(directory: Directory, aside: str, name: str) -> None:
    try:
        directory.link(aside, name)
    except FileExistsError:
        # An even newer file arrived while ours was aside: it supersedes ours, exactly as if
        # its writer had replaced ours a moment later.
        directory.unlink(aside)
        return
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        # No hard links on this filesystem: a rename, which could overwrite a file arriving in
        # the same microsecond; only on filesystems that leave no better way.
        if directory.lstat(name) is None:
            directory.rename(aside, name)
        else:
            directory.unlink(aside)
        return
    directory.unlink(aside)


# --- crash leftovers ------------------------------------------------------------------------
#
# A writer killed mid-step leaves two kinds of files of ours: the temporary file of
# ``_replace`` (``.state.json.PID.HEX.tmp``) and the metadata file renamed aside by
# ``delete_if_unchanged`` (``..return-meta.json.PID.HEX.deleting``). Both names are made above;
# these patterns must match them. Every postflightd writer takes the project lock before making
# either, so a caller holding the lock knows no live writer of ours is using them; the pid and
# age checks are a second guard (a writer from another pid namespace, a stale lock).

_TEMP_RE: Final = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp")
_ASIDE_RE: Final = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.deleting")
#: A leftover this old is removed even when its pid is alive again (pid reuse): a write or a
#: delete takes milliseconds.
LEFTOVER_MAX_AGE_S: Final = 600.0


@dataclass(frozen=True, slots=True)
class Leftover:
    """One file a killed writer of ours left behind."""

    path: Path  # for messages; ``entry`` is its name in the directory it was found in
    #: the file it belonged to (``state.json``, ``.return-meta.json``, ...)
    name: str
    entry: str


def _writer_gone(pid: int, st: os.stat_result, now: float) -> bool:
    if now - st.st_mtime > LEFTOVER_MAX_AGE_S:
        return True
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # EPERM: alive, someone else's
    return False


def _leftovers(
    directory: Directory, pattern: re.Pattern[str], names: frozenset[str]
) -> list[Leftover]:
    out: list[Leftover] = []
    now = time.time()
    try:
        entries = directory.names()
    except OSError:
        return out
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or match["name"] not in names or len(match["pid"]) > 7:
            continue
        try:
            st = directory.lstat(entry.name)
        except OSError:
            continue
        if st is not None and stat.S_ISREG(st.st_mode) and _writer_gone(int(match["pid"]), st, now):
            out.append(Leftover(directory.child(entry.name), match["name"], entry.name))
    return out


def remove_stale_temps(directory: Directory, names: frozenset[str]) -> list[Path]:
    """Remove the temporary files of ``names`` that a killed writer left in ``directory``.

    Call with the project lock held. Returns the paths removed.
    """
    removed: list[Path] = []
    for leftover in _leftovers(directory, _TEMP_RE, names):
        with contextlib.suppress(FileNotFoundError):
            directory.unlink(leftover.entry)
            removed.append(leftover.path)
    return removed


def deletions_left_aside(task: Directory, name: str) -> list[Leftover]:
    """Files named ``name`` that a killed ``delete_if_unchanged`` left renamed aside in the
    (listable) task directory ``task``."""
    return _leftovers(task, _ASIDE_RE, frozenset({name}))


def read_leftover(task: Directory, leftover: Leftover, max_bytes: int) -> bytes | None:
    """Its bytes (None when unreadable or larger than ``max_bytes``), never through a link."""
    try:
        data, st = task.read(leftover.entry, max_bytes)
    except OSError:
        return None
    return data if max(st.st_size, len(data)) <= max_bytes else None


def settle_leftover(task: Directory, leftover: Leftover, *, recorded: bool) -> str:
    """Finish or undo an interrupted deletion; what was done: removed, restored or kept.

    ``recorded``: the content is safely recorded elsewhere (the journal), so it goes. Otherwise
    it is put back under its own name, unless a newer file took that name meanwhile: then it is
    kept, for a person to look at, since nothing else holds what it says.
    """
    if recorded:
        task.unlink(leftover.entry)
        return "removed"
    try:
        task.link(leftover.entry, leftover.name)
    except FileExistsError:
        return "kept"
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        if task.lstat(leftover.name) is not None:
            return "kept"
        task.rename(leftover.entry, leftover.name)
        return "restored"
    task.unlink(leftover.entry)
    return "restored"
