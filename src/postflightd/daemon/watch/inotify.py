"""The Linux inotify(7) calls the watches need, through ctypes: nothing more.

watchdog (7.x) offers non-recursive watches and an event filter, but each scheduled path is
an emitter thread of its own, and its recursive watch follows every subdirectory (artifact
trees included): watching ``specs/`` and each task directory one level down, and nothing
deeper, would take one thread per task directory. Its inotify internals (``InotifyFD``) are
not a public API and were rewritten between 6.x and 7.x. This module is the minimum instead:
one inotify instance per root, watches added with exactly the mask the daemon uses, events
read as (wd, mask, cookie, name) tuples. docs/decisions/daemon-watching.md has the full
reasoning.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import struct
from typing import Final

IN_MODIFY: Final = 0x00000002
IN_CLOSE_WRITE: Final = 0x00000008
IN_MOVED_FROM: Final = 0x00000040
IN_MOVED_TO: Final = 0x00000080
IN_CREATE: Final = 0x00000100
IN_DELETE: Final = 0x00000200
IN_DELETE_SELF: Final = 0x00000400
IN_MOVE_SELF: Final = 0x00000800
IN_Q_OVERFLOW: Final = 0x00004000
IN_IGNORED: Final = 0x00008000
IN_ONLYDIR: Final = 0x01000000
IN_DONT_FOLLOW: Final = 0x02000000
IN_EXCL_UNLINK: Final = 0x04000000
IN_ISDIR: Final = 0x40000000

_IN_NONBLOCK: Final = os.O_NONBLOCK
_IN_CLOEXEC: Final = os.O_CLOEXEC
_HEADER: Final = struct.Struct("iIII")
#: Bytes read per read(2): about 1,000 events with names.
READ_SIZE: Final = 64 * 1024

Event = tuple[int, int, int, bytes]


class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes = [ctypes.c_int]
        self.init1.restype = ctypes.c_int
        self.add_watch = libc.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.add_watch.restype = ctypes.c_int
        self.rm_watch = libc.inotify_rm_watch
        self.rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        self.rm_watch.restype = ctypes.c_int


def _load() -> _Libc | None:
    try:
        return _Libc()
    except (OSError, AttributeError):  # not Linux, or a libc without inotify
        return None


_LIBC: Final = _load()


def available() -> bool:
    """True where the kernel interface exists (Linux)."""
    return _LIBC is not None


def _error(what: str) -> OSError:
    code = ctypes.get_errno()
    reason = {
        errno.ENOSPC: "the inotify watch limit is reached (fs.inotify.max_user_watches)",
        errno.EMFILE: "the inotify instance limit is reached (fs.inotify.max_user_instances)",
    }.get(code, os.strerror(code))
    return OSError(code, f"{what}: {reason}")


class Inotify:
    """One inotify instance: a non-blocking, close-on-exec file descriptor and its watches."""

    def __init__(self) -> None:
        if _LIBC is None:
            raise OSError(errno.ENOSYS, "inotify is not available on this system")
        self._libc = _LIBC
        fd = self._libc.init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise _error("inotify_init1")
        self.fd: int = fd

    def add_watch(self, path: bytes, mask: int) -> int:
        """Watch ``path`` (a directory, never followed if a link); the watch descriptor."""
        wd = int(self._libc.add_watch(self.fd, path, mask))
        if wd < 0:
            raise _error(f"inotify_add_watch {os.fsdecode(path)!r}")
        return wd

    def rm_watch(self, wd: int) -> None:
        # EINVAL: the kernel already dropped it (the directory went away); nothing to do.
        self._libc.rm_watch(self.fd, wd)

    def read(self) -> list[Event]:
        """Every event queued now (empty when none): never blocks."""
        events: list[Event] = []
        while True:
            try:
                data = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                return events
            except InterruptedError:
                continue
            if not data:
                return events
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, cookie, length = _HEADER.unpack_from(data, offset)
                start = offset + _HEADER.size
                name = data[start : start + length].rstrip(b"\0")
                offset = start + length
                events.append((wd, mask, cookie, name))
            if len(data) < READ_SIZE // 2:
                return events

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
