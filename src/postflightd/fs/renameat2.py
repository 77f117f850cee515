"""Linux ``renameat2(2)``: swap two names at once (RENAME_EXCHANGE), or rename without replacing.

Python's ``os`` module offers neither flag. glibc has had a ``renameat2`` wrapper since 2.28;
an older C library (or one without it, as some musl builds) is reached through
``syscall(SYS_renameat2)`` with the number of the machine's architecture. Where neither exists
(not Linux, an unknown architecture, an interpreter without ctypes) ``exchange`` and
``rename_noreplace`` raise ``OSError`` with ENOSYS, as the kernel itself does when it predates
the call (3.15): callers fall back to a plain rename.

ctypes is imported on first use only: a command that never replaces state.json never loads it.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable
from typing import Final

RENAME_NOREPLACE: Final = 1
RENAME_EXCHANGE: Final = 2

#: ``SYS_renameat2`` per ``platform.machine()``, for a C library without the wrapper.
_SYSCALL_NUMBERS: Final = {
    "x86_64": 316,
    "amd64": 316,
    "i386": 353,
    "i686": 353,
    "aarch64": 276,
    "arm64": 276,
    "riscv64": 276,
    "loongarch64": 276,
    "armv7l": 382,
    "armv6l": 382,
    "ppc64le": 357,
    "ppc64": 357,
    "s390x": 347,
}

#: Errors that say "this kernel or filesystem cannot do it", not "this rename failed": ENOSYS
#: (no such call: an old kernel, a seccomp filter, not Linux), EINVAL and EOPNOTSUPP (the
#: filesystem does not support the flag: some FUSE and network filesystems).
UNSUPPORTED: Final = frozenset({errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP})

_Call = Callable[[int, bytes, int, bytes, int], int]


@functools.cache
def _call() -> _Call | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes  # on first use only: see the module docstring
    except ImportError:
        # An interpreter built without ctypes (its _ctypes extension left out, as in some
        # minimal images), or one that blocks it: no way to make the call, as without it.
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    wrapper = getattr(libc, "renameat2", None)
    if wrapper is not None:
        wrapper.argtypes = [
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_uint,
        ]
        wrapper.restype = ctypes.c_int
        return wrapper  # type: ignore[no-any-return]
    import platform  # only without the C library's wrapper: 1.5 ms of every start-up else

    number = _SYSCALL_NUMBERS.get(platform.machine().lower())
    syscall = getattr(libc, "syscall", None)
    if number is None or syscall is None:
        return None
    syscall.restype = ctypes.c_long

    def via_syscall(olddirfd: int, old: bytes, newdirfd: int, new: bytes, flags: int) -> int:
        return int(
            syscall(
                ctypes.c_long(number),
                ctypes.c_int(olddirfd),
                ctypes.c_char_p(old),
                ctypes.c_int(newdirfd),
                ctypes.c_char_p(new),
                ctypes.c_uint(flags),
            )
        )

    return via_syscall


def _renameat2(dir_fd: int, old: str, new: str, flags: int) -> None:
    call = _call()
    if call is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), old, None, new)
    import ctypes  # already loaded by _call

    if call(dir_fd, os.fsencode(old), dir_fd, os.fsencode(new), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), old, None, new)


def exchange(dir_fd: int, a: str, b: str) -> None:
    """Swap names ``a`` and ``b`` in the directory ``dir_fd``, atomically: each now names what
    the other did. Both must exist (FileNotFoundError otherwise). Links are swapped, never
    followed."""
    _renameat2(dir_fd, a, b, RENAME_EXCHANGE)


def rename_noreplace(dir_fd: int, src: str, dst: str) -> None:
    """Rename ``src`` to ``dst`` in ``dir_fd`` only if ``dst`` does not exist (FileExistsError
    otherwise), atomically: no file created at ``dst`` meanwhile is ever replaced."""
    _renameat2(dir_fd, src, dst, RENAME_NOREPLACE)
