"""The project tree: every read, write, rename and delete inside a project goes through here.

Agents write into the project, and an agent can be wrong or prompt-injected, so no name inside
it is trusted to be what it looks like. A ``Directory`` is a directory opened once with
``O_DIRECTORY | O_NOFOLLOW``; everything below it is reached relative to that descriptor
(``dir_fd=``), one plain name at a time, never through a symbolic link:

* the specs directory is opened component by component from the root (the one directory the
  user named), so ``specs`` or any part of ``specs_dir`` that is a link is refused;
* a task directory is opened by name relative to the specs directory, and its metadata file,
  marker and loop guard relative to the task directory: swapping the task directory for a
  link after it was opened changes nothing for us, and a link there before is refused;
* files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and must be regular (``fstat``): a link is
  refused (ELOOP), a FIFO neither blocks the open nor gets read.

Refusals are ``RefusedError``, an ``OSError``, so callers that already handle I/O errors handle
them too; its message says what was found and that it was not followed.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from postflightd.errors import ProjectFileError
from postflightd.fs import renameat2

#: Opening a directory that must not be a link, to list it or fsync it (the specs directory).
DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: ... and only to work inside it (a task directory): O_PATH is enough for every *at call and
#: fstat, and, unlike a real open, generates no open/close events for an inotify watch on the
#: directory (three per postflighted file otherwise, for a watcher that asks for them, as
#: watchdog's inotify observer does; ``daemon.watch.inotify_tree``'s masks leave them out
#: anyway).
PATH_DIR_FLAGS: Final = (
    getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
)
#: Opening a file that must be regular: a link fails (ELOOP), a FIFO opens without waiting for
#: a writer, a terminal device never becomes our controlling terminal.
FILE_FLAGS: Final = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: A file postflightd creates in the project (a lock file, a new state.json) gets 0o644 less
#: the umask, as any file this user creates.
NEW_FILE_MODE: Final = 0o644


#: The most one read asks for.
_CHUNK: Final = 1 << 20


class StoreError(ProjectFileError):
    """A project file could not be read or written; the original is left untouched."""


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """What makes 'the same file content' for safe deletion: device, inode, size, mtime.

    A metadata file is deleted only if it still has the identity it had when it was read, so a
    file an agent rewrote meanwhile is never deleted unprocessed.
    """

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class DirIdentity:
    """(device, inode) of a directory: tells the directory opened from one swapped in later."""

    dev: int
    ino: int


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


class RefusedError(OSError):
    """A name inside the project that is not what it must be (a link, a FIFO, ...): refused."""

    def __init__(self, path: Path | str, kind: str, expected: str = "a regular file") -> None:
        code = errno.ELOOP if kind == "a symbolic link" else errno.EINVAL
        super().__init__(code, f"is {kind}, not {expected}; refused and never followed")
        self.path = str(path)
        self.kind = kind
        self.expected = expected

    def __str__(self) -> str:
        return f"{self.path}: {self.strerror}"


def _check_name(name: str) -> None:
    # One plain component: "a/b", "..", "." or "" would step out of the directory opened.
    if not name or name in {".", ".."} or "/" in name or "\0" in name:
        raise RefusedError(name or "''", "not a plain file name", "a name inside the directory")


def _close(fd: int) -> None:
    # try/except, not contextlib.suppress: a scan closes two descriptors a file, and the
    # context manager cost more than the close.
    try:  # noqa: SIM105
        os.close(fd)
    except OSError:
        pass


class Directory:
    """A directory opened without following links; all work inside it is relative to ``fd``.

    ``path`` is only for messages. Every caller closes it, with a ``with`` block or
    ``close()``; ``__del__`` is only a safety net for a path that forgets.
    """

    # A scan opens one per task directory: no Path is built unless a message needs one.
    __slots__ = ("_path", "fd", "identity")

    def __init__(self, fd: int, path: Path | str, *, identify: bool = True) -> None:
        self.fd = fd
        self._path = str(path)
        #: (device, inode), for telling it from one put in its place later; None when not
        #: asked for (``identify``: a read-only scan never comes back to a directory).
        self.identity: DirIdentity | None = None
        if identify:
            try:
                st = os.fstat(fd)
            except OSError:
                _close(fd)
                raise
            self.identity = DirIdentity(st.st_dev, st.st_ino)

    @classmethod
    def anchor(cls, path: Path) -> Directory:
        """Open the directory the user named (a project root): the one place links are followed."""
        return cls(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path)

    @property
    def path(self) -> Path:
        return Path(self._path)

    @path.setter
    def path(self, value: Path) -> None:
        self._path = str(value)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            _close(fd)

    def __del__(self) -> None:
        # A safety net, not a way to close: no caller relies on it. Should a path ever forget
        # one, a daemon that runs for months must still not leak its descriptor; CPython
        # collects it as soon as it is unreachable.
        if getattr(self, "fd", -1) >= 0:
            self.close()

    def __enter__(self) -> Directory:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def child(self, name: str) -> Path:
        """The path of ``name`` inside this directory, for messages."""
        return Path(self._path, name)

    # --- directories ------------------------------------------------------------------------

    def subdir(
        self,
        name: str,
        *,
        expect: DirIdentity | None = None,
        listable: bool = False,
        identify: bool = True,
    ) -> Directory:
        """Open the directory ``name`` in this one; a link or a non-directory is refused.

        With ``expect``, the directory must be the very one seen before (same device and
        inode): one put in its place meanwhile is treated as gone (FileNotFoundError).
        ``listable``: opened for ``names()`` and ``fsync()`` too, not only to work inside it.
        ``identify``: its ``identity`` is wanted (an fstat; a read-only scan does without).
        """
        _check_name(name)
        try:
            fd = os.open(name, DIR_FLAGS if listable else PATH_DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise RefusedError(self.child(name), self._kind(name), "a directory") from None
            raise
        sub = Directory(fd, f"{self._path}{os.sep}{name}", identify=identify or expect is not None)
        if expect is not None and sub.identity != expect:
            sub.close()
            raise FileNotFoundError(
                errno.ENOENT, "replaced by another directory since it was read", str(sub.path)
            )
        return sub

    def _kind(self, name: str) -> str:
        try:
            return kind_of(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except OSError:
            return "not a directory"

    def fsync(self) -> None:
        os.fsync(self.fd)

    def names(self, limit: int | None = None) -> list[os.DirEntry[str]]:
        """The entries of this directory (``scandir`` on the descriptor: no path lookup); with
        ``limit``, at most that many, as listed (a directory of a million names is not read
        whole by a look that wants its first few)."""
        with os.scandir(self.fd) as it:
            if limit is None:
                return list(it)
            return list(itertools.islice(it, limit))

    # --- files --------------------------------------------------------------------------------

    def open_regular(
        self, name: str, flags: int = os.O_RDONLY, mode: int = 0o644
    ) -> tuple[int, os.stat_result]:
        """Open ``name`` (never through a link) and require a regular file: (fd, its fstat)."""
        _check_name(name)
        try:
            fd = os.open(name, flags | FILE_FLAGS, mode, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise RefusedError(self.child(name), "a symbolic link") from None
            if exc.errno == errno.EISDIR:
                raise RefusedError(self.child(name), "a directory") from None
            if exc.errno == errno.ENXIO:
                # O_WRONLY|O_NONBLOCK on a FIFO without a reader, or a socket.
                raise RefusedError(self.child(name), self._kind(name)) from None
            raise
        try:
            st = os.fstat(fd)
        except OSError:
            _close(fd)
            raise
        if not stat.S_ISREG(st.st_mode):
            _close(fd)
            raise RefusedError(self.child(name), kind_of(st.st_mode))
        return fd, st

    def read(self, name: str, limit: int | None = None) -> tuple[bytes, os.stat_result]:
        """The bytes of regular file ``name`` and its fstat.

        With ``limit``, at most ``limit + 1`` bytes are read, and none when fstat already says
        the file is larger (a 50 MB file costs one fstat): compare ``st_size`` and the length.
        """
        fd, st = self.open_regular(name)
        try:
            if limit is not None and st.st_size > limit:
                return b"", st
            # First the whole file and one byte more: a regular file's read returns less than
            # asked only at its end, so a short read is the whole file, without a second read
            # to find the end (a scan reads 10,000).
            wanted = min(st.st_size + 1, _CHUNK)
            chunk = os.read(fd, wanted)
            if len(chunk) < wanted:
                return chunk, st
            # Larger than a chunk, or grown since the fstat: read on, to the limit and a byte.
            chunks = [chunk]
            remaining = -1 if limit is None else limit + 1 - len(chunk)
            while remaining != 0:
                chunk = os.read(fd, _CHUNK if remaining < 0 else min(remaining, _CHUNK))
                if not chunk:
                    break
                chunks.append(chunk)
                if remaining > 0:
                    remaining -= len(chunk)
        finally:
            _close(fd)
        return b"".join(chunks), st

    def exists(self, name: str) -> bool:
        """Whether there is anything called ``name`` here (a link is not followed); no
        exception is raised to say no, which makes this the cheap question."""
        _check_name(name)
        return os.access(name, os.F_OK, dir_fd=self.fd, follow_symlinks=False)

    def lstat(self, name: str) -> os.stat_result | None:
        """``name``'s own metadata (a link is not followed), or None when there is none."""
        _check_name(name)
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def create_new(self, name: str, mode: int) -> int:
        """Create ``name``, which must not exist (O_EXCL: never through a planted link)."""
        _check_name(name)
        return os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=self.fd,
        )

    def rename(self, src: str, dst: str) -> None:
        """Rename within this directory; renaming never follows a link at either name."""
        _check_name(src)
        _check_name(dst)
        os.rename(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def exchange(self, a: str, b: str) -> None:
        """Swap names ``a`` and ``b`` in this directory atomically (``renameat2``'s
        RENAME_EXCHANGE): ``OSError`` with an errno of ``renameat2.UNSUPPORTED`` where the
        kernel or the filesystem cannot."""
        _check_name(a)
        _check_name(b)
        renameat2.exchange(self.fd, a, b)

    def rename_noreplace(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` only if ``dst`` does not exist (FileExistsError); the
        same ``OSError`` as ``exchange`` where that cannot be done."""
        _check_name(src)
        _check_name(dst)
        renameat2.rename_noreplace(self.fd, src, dst)

    def link(self, src: str, dst: str) -> None:
        """A hard link ``dst`` to ``src`` (itself, were it a link); never replaces ``dst``."""
        _check_name(src)
        _check_name(dst)
        os.link(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)

    def unlink(self, name: str) -> None:
        """Remove the name ``name`` (a link itself, never its target)."""
        _check_name(name)
        os.unlink(name, dir_fd=self.fd)


def open_specs(root: Path, specs_dir: str) -> Directory:
    """The specs directory of ``root``, each component of ``specs_dir`` opened without links.

    FileNotFoundError when it does not exist; RefusedError when a component is a link or not a
    directory (it could lead out of the root).
    """
    current = Directory.anchor(root)
    parts = Path(specs_dir).parts
    try:
        for i, part in enumerate(parts):
            nxt = current.subdir(part, listable=i == len(parts) - 1)
            current.close()
            current = nxt
    except BaseException:
        current.close()
        raise
    current.path = root / specs_dir
    return current
