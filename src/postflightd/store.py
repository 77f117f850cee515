"""Safe writes of the project files (SPEC 3.1): locked, atomic, never over an unseen update.

Three layers, used together by postflight:

* ``project_lock`` serialises the writers that cooperate (the daemon, a CLI run, a hook, and
  any shell tool that runs ``flock specs/.state.lock ...``).
* ``commit`` is an optimistic read-modify-write for the writers that do not lock (a bare
  ``jq ... > tmp && mv tmp state.json``): it checks just before replacing that the file is
  still what it read, and otherwise re-reads and re-applies.
* ``atomic_write`` makes every replacement all-or-nothing, whatever instant a crash hits.

The remaining window: ``commit`` checks ``unchanged`` after the new content is written and
fsynced to its temporary file and immediately before ``os.replace``; a writer that does not
lock and replaces the file in the microseconds between that check and the replace still has
its update overwritten. POSIX offers no compare-and-swap rename, so no check can close it.
It is acceptable because it only concerns tools outside the protocol, it is orders of
magnitude narrower than the whole read-modify-write it replaces, and any tool can close it
completely by taking the lock, which the README documents.
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

from postflightd.errors import ExitCode, PostflightError
from postflightd.loader import FileIdentity

LOCK_NAME: Final = ".state.lock"
CRASH_ENV: Final = "POSTFLIGHTD_CRASH_AT"
STOP_ENV: Final = "POSTFLIGHTD_STOP_AT"
FAULT_ENV: Final = "POSTFLIGHTD_FAULT_AT"
FAULT_WHILE_ENV: Final = "POSTFLIGHTD_FAULT_WHILE"
NEW_FILE_MODE: Final = 0o644
_READ_CHUNK: Final = 1 << 20


class LockTimeoutError(PostflightError):
    """Another writer held the project lock for longer than we were willing to wait."""

    exit_code = ExitCode.USAGE


class StoreError(PostflightError):
    """A project file could not be read or written; the original is left untouched."""

    exit_code = ExitCode.STATE_UNUSABLE


# --- the lock -------------------------------------------------------------------------------


@contextmanager
def project_lock(specs_dir: Path, timeout_s: float = 30.0) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``specs_dir/.state.lock`` for the ``with`` block.

    The lock lives on a dedicated file, never on state.json: ``os.replace`` gives state.json a
    new inode at every write, so a lock on it would not exclude the next writer. The lock is
    per open file description, hence not re-entrant: nesting two ``project_lock`` calls on the
    same directory in one process waits for itself until ``timeout_s``.
    """
    lock_path = specs_dir / LOCK_NAME
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        fd = _open_lock_file(lock_path)
        try:
            acquired = _try_flock(fd, lock_path)
            if acquired and _still_linked(fd, lock_path):
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


def _open_lock_file(lock_path: Path) -> int:
    try:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, NEW_FILE_MODE)
    except OSError as exc:
        raise StoreError(
            f"{lock_path}: cannot open the lock file: {exc.strerror}; the specs directory "
            "must exist and be writable"
        ) from None


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


def _still_linked(fd: int, lock_path: Path) -> bool:
    try:
        st = lock_path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


# --- reading --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A file as read at one instant: its bytes and the identity they were read from."""

    path: Path
    raw: bytes | None  # None: the file does not exist
    identity: FileIdentity | None


def read_snapshot(path: Path) -> Snapshot:
    """Read ``path`` and the identity of the very inode read (fstat, not a second stat)."""
    try:
        # O_NONBLOCK: a FIFO planted at the path must not hang the writer forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Snapshot(path, None, None)
    except IsADirectoryError:
        raise StoreError(f"{path}: is a directory; move it away and retry") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise StoreError(f"{path}: is a directory; move it away and retry")
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{path}: not a regular file; move it away and retry")
        chunks = []
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    return Snapshot(path, b"".join(chunks), FileIdentity.of(st))


def unchanged(snapshot: Snapshot) -> bool:
    """Whether the file is still the one read: same inode, size, mtime_ns *and* content.

    The content comparison covers what stat cannot: a rewrite in place within the
    filesystem's timestamp granularity that happens to keep the size.
    """
    try:
        st = snapshot.path.stat()
    except FileNotFoundError:
        return snapshot.raw is None
    except OSError:
        return False
    if snapshot.raw is None or FileIdentity.of(st) != snapshot.identity:
        return False
    try:
        current = read_snapshot(snapshot.path)
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


def atomic_write(path: Path, data: bytes, *, crash_label: str | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash at any instant leaves old or new.

    A temporary file in the same directory is written, fsynced, given the original file's
    permission bits (and owner, when we may), renamed over ``path`` and the directory is
    fsynced. On any error the temporary file is removed, the original is untouched and a
    ``StoreError`` says what failed. A symbolic link at ``path`` is kept: its target is
    replaced.
    """
    _replace(path, data, crash_label, precondition=None)


def commit(
    path: Path,
    transform: Callable[[Snapshot], bytes | None],
    *,
    attempts: int = 5,
    crash_label: str | None = None,
) -> Snapshot | None:
    """Read-modify-write ``path`` without losing an update made by a writer that does not lock.

    ``transform`` gets the file as read and returns the new bytes (None: nothing to write).
    Just before the replace the file must still be unchanged since it was read; otherwise it
    is read again and ``transform`` re-applied, up to ``attempts`` times. Returns the snapshot
    that was written over, or None when ``transform`` wrote nothing. See the module docstring
    for the window that remains between the check and ``os.replace``.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for _ in range(attempts):
        snapshot = read_snapshot(path)
        data = transform(snapshot)
        if data is None:
            return None
        if _replace(path, data, crash_label, precondition=functools.partial(unchanged, snapshot)):
            return snapshot
    raise StoreError(
        f"{path}: {path.name} keeps changing while postflightd updates it (another writer "
        f"replaced it {attempts} times in a row); nothing was written. Make the other tool "
        f"take the lock (`flock {path.parent / LOCK_NAME} ...`) and retry"
    )


def _replace(
    path: Path,
    data: bytes,
    crash_label: str | None,
    precondition: Callable[[], bool] | None,
) -> bool:
    """Write ``data`` over ``path`` atomically; False (nothing written) if the check fails."""
    target = path.resolve() if path.is_symlink() else path
    directory = target.parent
    try:
        original: os.stat_result | None = target.stat()
    except FileNotFoundError:
        original = None
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror}") from None
    # Unique per process and per call, so threads and processes never share a temp file; the
    # leading dot and the target's name say whose leftover it is after a crash.
    temp = directory / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        # O_EXCL|O_NOFOLLOW: never write through a link someone planted at the temp name.
        # A new file gets 0o644 less the umask, as any file this user creates.
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            NEW_FILE_MODE,
        )
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
            temp.unlink()
            return False
        if crash_label is not None:
            fault_point(f"{crash_label}:replace")
        temp.replace(target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
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


def _fsync_directory(directory: Path, path: Path) -> None:
    """Make the rename itself durable: without it a power loss can bring the old name back."""
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise StoreError(
            f"{path}: written, but cannot open its directory: {exc.strerror}"
        ) from None
    try:
        os.fsync(dfd)
    except OSError as exc:
        # Some filesystems (certain FUSE and network ones) cannot fsync a directory at all.
        if exc.errno != errno.EINVAL:
            raise StoreError(
                f"{path}: written, but its directory could not be synced: {exc.strerror}"
            ) from None
    finally:
        os.close(dfd)


# --- deleting -------------------------------------------------------------------------------


def delete_if_unchanged(path: Path, identity: FileIdentity) -> bool:
    """Delete ``path`` only if it is still the content processed (dev, inode, size, mtime_ns).

    The file is first renamed aside, atomically, and the identity checked on what was taken:
    so whatever is deleted is exactly what was processed, with no window between the check
    and the deletion. A file rewritten meanwhile is put back (``os.link``, which never
    clobbers a newer file that arrived in between) for processing again. A writer that still
    holds the old file open and writes into it after the check is beyond any check by path.
    Returns True when deleted; a missing file gives False.
    """
    aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.deleting")
    try:
        path.rename(aside)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(f"{path}: cannot delete: {exc.strerror}") from None
    crash_point("delete:after-rename")
    try:
        st = aside.lstat()
        if FileIdentity.of(st) == identity:
            aside.unlink()
            return True
        _put_back(aside, path)
    except OSError as exc:
        raise StoreError(f"{path}: cannot delete: {exc.strerror}") from None
    return False


def _put_back(aside: Path, path: Path) -> None:
    try:
        path.hardlink_to(aside)
    except FileExistsError:
        # An even newer file arrived while ours was aside: it supersedes ours, exactly as if
        # its writer had replaced ours a moment later.
        aside.unlink()
        return
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        # No hard links on this filesystem: a rename, which could overwrite a file arriving in
        # the same microsecond; only on filesystems that leave no better way.
        if not path.exists():
            aside.rename(path)
        else:
            aside.unlink()
        return
    aside.unlink()


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

    path: Path
    #: the file it belonged to (``state.json``, ``.return-meta.json``, ...)
    name: str


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


def _leftovers(directory: Path, pattern: re.Pattern[str], names: frozenset[str]) -> list[Leftover]:
    out: list[Leftover] = []
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return out
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        # A pid past Linux's pid_max (2**22) was never one of our writers.
        if match is None or match["name"] not in names or len(match["pid"]) > 7:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        # Only regular files: a link or directory of that name is not ours to touch.
        if stat.S_ISREG(st.st_mode) and _writer_gone(int(match["pid"]), st, now):
            out.append(Leftover(Path(entry.path), match["name"]))
    return out


def remove_stale_temps(directory: Path, names: frozenset[str]) -> list[Path]:
    """Remove the temporary files of ``names`` that a killed writer left in ``directory``.

    Call with the project lock held. Returns the paths removed.
    """
    removed: list[Path] = []
    for leftover in _leftovers(directory, _TEMP_RE, names):
        with contextlib.suppress(FileNotFoundError):
            leftover.path.unlink()
            removed.append(leftover.path)
    return removed


def deletions_left_aside(task_dir: Path, name: str) -> list[Leftover]:
    """Files named ``name`` that a killed ``delete_if_unchanged`` left renamed aside."""
    return _leftovers(task_dir, _ASIDE_RE, frozenset({name}))


def read_leftover(leftover: Leftover, max_bytes: int) -> bytes | None:
    """Its bytes (None when unreadable or larger than ``max_bytes``), never through a link."""
    try:
        fd = os.open(leftover.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= max_bytes else None


def settle_leftover(leftover: Leftover, *, recorded: bool) -> str:
    """Finish or undo an interrupted deletion; what was done: removed, restored or kept.

    ``recorded``: the content is safely recorded elsewhere (the journal), so it goes. Otherwise
    it is put back under its own name, unless a newer file took that name meanwhile: then it is
    kept, for a person to look at, since nothing else holds what it says.
    """
    if recorded:
        leftover.path.unlink()
        return "removed"
    target = leftover.path.with_name(leftover.name)
    try:
        # A hard link never replaces a file that exists: a newer metadata file wins.
        os.link(leftover.path, target, follow_symlinks=False)
    except FileExistsError:
        return "kept"
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        if os.path.lexists(target):
            return "kept"
        leftover.path.rename(target)
        return "restored"
    leftover.path.unlink()
    return "restored"
