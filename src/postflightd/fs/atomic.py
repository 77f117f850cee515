"""Safe writes of the project files: atomic, never over an unseen update, deletes that check.

Used together with the project lock (``locks.project_lock``) by postflight:

* ``replace_if_unchanged`` is an optimistic read-modify-write for the writers that do not lock
  (a bare ``jq ... > tmp && mv tmp state.json``): it replaces only the version it read, and
  otherwise re-reads and re-applies.
* ``atomic_write`` makes every replacement all-or-nothing, whatever instant a crash hits;
  ``write_file`` is the same for a file outside a project tree.
* ``delete_if_unchanged`` deletes a metadata file only if it is still the content processed.

Every file is named relative to an open ``directory.Directory`` (the specs directory, a task
directory), never by a path: a project file that is a link or not a regular file is refused,
and nothing is read, written or created through it (an agent can plant a link anywhere in
the project).

How ``replace_if_unchanged`` keeps a writer that does not lock from losing its update: the new
file is written and fsynced under a temporary name, the target checked (one lstat) to still be
the version read, and the two names are then exchanged atomically (``renameat2`` with
RENAME_EXCHANGE). The file that comes out is in hand, under the temporary name: the version
read, it is deleted and the directory fsynced; another writer's (renamed in between the check
and the exchange), it is exchanged back at once, and the file read and the outcome applied
again. So an update that lands before our write is never overwritten, whatever the timing.
Two windows remain, both microseconds wide and only for tools outside the protocol: between
an exchange that caught a foreign version and the exchange back, a reader sees our version
(a non-locking writer reading then builds on it and loses its own previous write); and an
update written *after* ours, by a writer that read before it, replaces ours (the daemon's
healer re-applies ours). A tool closes both by taking the lock.

Where the kernel or the filesystem cannot exchange two names (not Linux, before 3.15, some
FUSE and network filesystems), the version is compared, bytes included, immediately before a
plain rename: a writer that renames its file in the microseconds between that comparison and
the rename has its update overwritten; no check by path can close that window.

The temporary and set-aside names made here are matched by ``litter`` after a crash: both the
names (``temp_name``, ``aside_name``) and their patterns (``TEMP_RE``, ``ASIDE_RE``) are
defined here, side by side.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from postflightd.fs.directory import (
    NEW_FILE_MODE,
    Directory,
    FileIdentity,
    RefusedError,
    StoreError,
    kind_of,
)
from postflightd.fs.faults import crash_point, fault_point
from postflightd.fs.locks import LOCK_NAME
from postflightd.fs.renameat2 import UNSUPPORTED

#: What ``temp_name`` and ``aside_name`` make; ``litter`` finds a killed writer's files by them.
TEMP_RE: Final = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp")
ASIDE_RE: Final = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.deleting")


def temp_name(name: str) -> str:
    """The temporary file a replacement of ``name`` is written to before the rename.

    Unique per process and per call, so threads and processes never share a temp file; the
    leading dot and the target's name say whose leftover it is after a crash.
    """
    # os.urandom(4).hex() is secrets.token_hex(4), without importing secrets (which loads
    # hmac and OpenSSL: 3 ms of the hook's start-up).
    return f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def aside_name(name: str) -> str:
    """The name ``name`` is renamed to while its deletion checks what was taken."""
    return f".{name}.{os.getpid()}.{os.urandom(4).hex()}.deleting"


# --- reading --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A file as read at one instant: its bytes and the identity they were read from."""

    path: Path  # for messages: ``directory`` and ``name`` are what is read and written
    raw: bytes | None  # None: the file does not exist
    identity: FileIdentity | None
    directory: Directory
    name: str


class TooLargeError(StoreError):
    """A file larger than its reader's limit: refused unread (``limit`` is that limit)."""

    def __init__(self, path: Path, limit: int) -> None:
        super().__init__(f"{path}: larger than {limit} bytes")
        self.limit = limit


def read_snapshot(directory: Directory, name: str, limit: int | None = None) -> Snapshot:
    """Read ``name`` and the identity of the very inode read (fstat, not a second stat).

    A link, a directory or a FIFO at ``name`` is refused (a StoreError), never followed. With
    ``limit``, a file of more bytes is a ``TooLargeError``, and at most ``limit + 1`` of them
    are read to find out (none when its size already says so).
    """
    path = directory.child(name)
    try:
        raw, st = directory.read(name, limit)
    except FileNotFoundError:
        return Snapshot(path, None, None, directory, name)
    except RefusedError as exc:
        raise StoreError(f"{path}: {exc.strerror}; move it away and retry") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror}") from None
    if limit is not None and (st.st_size > limit or len(raw) > limit):
        raise TooLargeError(path, limit)
    return Snapshot(path, raw, FileIdentity.of(st), directory, name)


# --- writing --------------------------------------------------------------------------------


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
    _replace(directory, name, data, crash_label)


def write_file(path: Path, data: bytes) -> None:
    """``atomic_write`` of a file outside any project tree (``report -o FILE``, the daemon's
    notes for ``status``): in the directory the user named, links on the way to it followed as
    for a project root. ``OSError`` when that directory cannot be opened; ``StoreError`` as
    ``atomic_write`` (a link at ``path`` itself is refused, never written through).
    """
    with Directory.anchor(path.parent) as directory:
        atomic_write(directory, path.name, data)


def replace_if_unchanged(
    directory: Directory,
    name: str,
    transform: Callable[[Snapshot], bytes | None],
    *,
    attempts: int = 10,
    crash_label: str | None = None,
    limit: int | None = None,
) -> Snapshot | None:
    """Read-modify-write ``name`` without losing an update made by a writer that does not lock.

    ``transform`` gets the file as read and returns the new bytes (None: nothing to write).
    The new file is swapped in only over the very version read: when another writer replaced
    it meanwhile, theirs is put back, the file read again and ``transform`` re-applied, up to
    ``attempts`` times (each costs a read, the transform and an fsync: against a `jq` loop
    rewriting the file a dozen times a second, five in a row sometimes all lost the race on
    a loaded machine). Returns the snapshot that was written over, or None when ``transform``
    wrote nothing. ``limit``: as ``read_snapshot``'s, at every read (a file over it is never
    given to ``transform``). The module docstring says how, and what remains where the kernel
    or the filesystem cannot swap two names.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for _ in range(attempts):
        snapshot = read_snapshot(directory, name, limit)
        data = transform(snapshot)
        if data is None:
            return None
        if _replace(directory, name, data, crash_label, expected=snapshot):
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
    expected: Snapshot | None = None,
) -> bool:
    """Write ``data`` over ``name`` atomically; with ``expected``, only over that version of
    it: False (nothing written, nothing left behind) when another writer replaced it."""
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
    temp = temp_name(name)
    ours: int | None = None
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
            ours = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        if crash_label is not None:
            crash_point(f"{crash_label}:after-temp-write")
        if expected is None:
            if crash_label is not None:
                fault_point(f"{crash_label}:replace")
            directory.rename(temp, name)
        elif not _swap_in(directory, name, temp, expected, ours, crash_label):
            return False
    except BaseException as exc:
        _discard(directory, temp, ours, expected)
        if isinstance(exc, OSError):
            raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise
    if crash_label is not None:
        crash_point(f"{crash_label}:after-replace")
    _fsync_directory(directory, path)
    return True


def _swap_in(
    directory: Directory,
    name: str,
    temp: str,
    expected: Snapshot,
    ours: int,
    crash_label: str | None,
) -> bool:
    """Put ``temp`` (inode ``ours``, written and fsynced) in place of ``name``, only over the
    version ``expected``: True when done; False when another writer's version stands instead
    (then ``temp`` is gone and ``name`` holds theirs).

    The names are exchanged, so the file that comes out is in hand, under ``temp``: if it is
    not the version read, it is another writer's, landed since the check just before, and the
    names are exchanged back at once (see the module docstring).
    """
    if not _same_version(directory, name, expected, read=False):
        # The cheap check first (one lstat): a version that changed while the new one was
        # computed and written never leaves its place, not even for microseconds.
        directory.unlink(temp)
        return False
    if crash_label is not None:
        fault_point(f"{crash_label}:replace")
        crash_point(f"{crash_label}:before-exchange")
    try:
        if crash_label is not None:
            # A test hook: ENOSYS here takes the path of a kernel without the call.
            fault_point(f"{crash_label}:exchange")
        if expected.raw is None:
            directory.rename_noreplace(temp, name)
            return True
        directory.exchange(temp, name)
        if crash_label is not None:
            crash_point(f"{crash_label}:after-exchange")
    except (FileExistsError, FileNotFoundError):
        # Created (or deleted) by another writer since the check.
        directory.unlink(temp)
        return False
    except OSError as exc:
        if exc.errno not in UNSUPPORTED:
            raise
        # Neither call on this kernel or filesystem: compare, then rename (the window the
        # module docstring describes remains).
        if not _same_version(directory, name, expected, read=True):
            directory.unlink(temp)
            return False
        directory.rename(temp, name)
        return True
    if _same_version(directory, temp, expected, read=True):
        directory.unlink(temp)  # the version read, now superseded by ours
        return True
    # Another writer's version came out: it goes back in place before anything else.
    directory.exchange(temp, name)
    back = directory.lstat(temp)
    if back is not None and back.st_ino != ours:
        # A third write landed on ours in the microseconds between: the newest goes in place.
        directory.exchange(temp, name)
    directory.unlink(temp)
    return False


def _same_version(directory: Directory, name: str, expected: Snapshot, *, read: bool) -> bool:
    """Whether ``name`` is the version ``expected`` was read from: the same identity (inode,
    size, mtime) and, with ``read``, the same bytes (a rewrite in place within the
    filesystem's timestamp granularity keeps all three)."""
    try:
        st = directory.lstat(name)
    except OSError:
        return False
    if st is None or expected.raw is None:
        return st is None and expected.raw is None
    if FileIdentity.of(st) != expected.identity:
        return False
    if not read:
        return True
    try:
        raw, st = directory.read(name)
    except OSError:
        return False
    return FileIdentity.of(st) == expected.identity and raw == expected.raw


def _discard(directory: Directory, temp: str, ours: int | None, expected: Snapshot | None) -> None:
    """Remove the temporary name after a failure, unless it holds another writer's version
    (a failure between the exchange and the exchange back): that one is left for a person,
    never deleted."""
    with contextlib.suppress(OSError):
        st = directory.lstat(temp)
        if st is None:
            return
        mine = ours is None or st.st_ino == ours
        if mine or (expected is not None and FileIdentity.of(st) == expected.identity):
            directory.unlink(temp)


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
    aside = aside_name(name)
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
