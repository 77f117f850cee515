"""The runtime process that runs the hook, found up its parents, and its standard error.

Some runtimes, run without their interactive screen (``codex exec``, ``copilot -p``), show a
hook's ``systemMessage`` nowhere and drop the hook's own stderr; the person reads only what
that runtime process prints. ``tell_stderr_of`` appends the person's message there, found
through ``/proc`` (where there is none, nothing is written and the answer alone remains).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

#: Parents looked at: the runtime's ``sh -c``, a wrapper script.
MAX_PARENTS: Final = 4


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def argv_of(pid: int) -> list[bytes] | None:
    """The process's arguments, or None when they cannot be read."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None


def runtime_pid(is_runtime: Callable[[list[bytes]], bool], start: int | None = None) -> int | None:
    """The first of this process's nearest parents whose arguments ``is_runtime`` accepts."""
    pid: int | None = os.getppid() if start is None else start
    for _ in range(MAX_PARENTS):
        if pid is None or pid <= 1:
            return None
        argv = argv_of(pid)
        if argv is not None and is_runtime(argv):
            return pid
        pid = _parent_of(pid)
    return None


def tell_stderr_of(pid: int | None, message: str) -> bool:
    """Append ``message`` to the standard error of process ``pid``; whether it was written."""
    if pid is None:
        return False
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_NONBLOCK
    try:
        fd = os.open(f"/proc/{pid}/fd/2", flags)
    except OSError:
        return False
    try:
        os.write(fd, (message + "\n").encode("utf-8", "replace"))
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
