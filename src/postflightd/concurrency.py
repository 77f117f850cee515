"""Work in other processes, one way for every command: ``Worker``, a forked process that sends
its results back through a pipe.

The worker inherits what this process has loaded (the rules, the type check's schema) and the
work it is given (never pickled, so a closure will do); only its messages cross the pipe,
pickled, each after its length. It never writes to this process's streams and never runs its
exit handlers (it ends with ``os._exit``): the output, buffered here or not, is this
process's alone, and a worker that Ctrl-C interrupts ends without a word.

A worker that fails (killed, out of memory, an exception) is seen as ended: its work is the
caller's to do. ``pickle`` is imported when a worker starts: a command that never forks does
without it.

The standard library's ``ProcessPoolExecutor`` with the fork context did the same work for
about 55 ms more CPU time a 10,000-file scan (5 %, paired runs; ``docs/benchmarks.md``), where
the scan stays within twice its floor by less than that.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from typing import Final

#: A message's length, before it.
_LENGTH: Final = 8

#: How much a pipe holds where the system lets a process say so (Linux): a worker's messages
#: wait there while this process is busy, instead of the worker waiting.
PIPE_BYTES: Final = 1 << 20


class Worker:
    """A forked process running ``work(send)``; each ``send(message)`` reaches ``receive``.

    (A plain class: a dataclass compiles its methods at import.)
    """

    __slots__ = ("ended", "fd", "pid")

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        #: the pipe the messages come through
        self.fd = fd
        #: the worker sent its last message, or failed
        self.ended = False

    @classmethod
    def start(
        cls, work: Callable[[Callable[[object], None]], object], close: Iterable[int] = ()
    ) -> Worker | None:
        """Fork a worker running ``work``; None when there is no process to spare (or no
        fork on this system). ``close``: descriptors the worker must not hold (another
        worker's pipe: only its reader may)."""
        if not hasattr(os, "fork"):
            return None
        import pickle  # noqa: F401 - before the fork, for both processes: only a worker needs it

        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return None
        if pid == 0:  # pragma: no cover - runs in the worker
            code = 1
            try:
                os.close(read_fd)
                for fd in close:
                    os.close(fd)
                grow_pipe(write_fd, PIPE_BYTES)
                work(partial_send(write_fd))
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        return cls(pid, read_fd)

    def receive(self) -> object | None:
        """The next message; None at the end, or on anything but a message: the worker is
        then over (``ended``) and reaped."""
        import pickle  # loaded by start, which made this worker

        try:
            size = self._read_exactly(_LENGTH)
            data = None if size is None else self._read_exactly(int.from_bytes(size, "little"))
            if data is not None:
                message: object = pickle.loads(data)  # noqa: S301 - our own child's output
                return message
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, OSError, MemoryError):
            pass
        self.ended = True
        self.stop()
        return None

    def _read_exactly(self, size: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < size:
            data = os.read(self.fd, min(size - len(buf), 1 << 20))
            if not data:
                return None
            buf += data
        return bytes(buf)

    def stop(self) -> None:
        """Close the pipe (a worker still writing gets EPIPE and ends) and reap it."""
        if self.fd < 0:
            return
        fd, self.fd = self.fd, -1
        os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def partial_send(fd: int) -> Callable[[object], None]:  # pragma: no cover - in the worker
    import pickle  # loaded by Worker.start, before the fork

    def send(message: object) -> None:
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        view = memoryview(len(data).to_bytes(_LENGTH, "little") + data)
        while view:
            view = view[os.write(fd, view) :]

    return send


def grow_pipe(fd: int, at_least: int) -> None:
    """Ask for a larger pipe buffer where the system allows it (Linux); otherwise keep it."""
    try:
        import fcntl  # not on every system; a fork is POSIX-only anyway
    except ImportError:
        return
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setsize, max(at_least, PIPE_BYTES))
