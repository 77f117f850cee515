"""Each root's file work on a thread of its own, so that a root whose filesystem hangs (a hard
NFS mount that stopped answering) holds nothing but itself.

Why a worker thread per root rather than one pool: a thread blocked in a syscall on a hung
filesystem cannot be interrupted or reused, so a pool would lose one thread per hung root
anyway, and a root's work must stay in order (its batches, its lock-busy retries, its stuck
timers): one thread per root gives both for the price of an idle thread (about 20 KB of
memory once started; its stack is reserved, not touched).

The loop hands a root its work as a *turn* (``RootWorker.hand``): a callable run on the worker,
which signals the loop's waker when it returns. Whoever holds the turn owns the root's
``WatchedRoot`` (its maps of deferred, throttled and held files): the loop while the root is
idle, the worker while it is busy; the hand-over goes through the worker's events, so nothing
in ``WatchedRoot`` needs a lock. What arrives for a busy root waits in the loop (``Work``) and
is handed over at its next turn.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from postflightd.daemon.watch.dirty import RescanReason

#: How long a root's turn may go on before the root is reported stalled (``root_stalled``).
#: Longer than any legitimate turn: a rescan of 100,000 task directories takes about 0.4 s on a
#: local disk and about 50 s over a network filesystem at 0.5 ms a round trip; a batch of
#: BATCH_MAX files a second or two, plus LOCK_WAIT_S per batch under a busy lock.
STALL_S: Final = 60.0
#: Test hook: the stall threshold in seconds, so that an end-to-end test of a hung root need
#: not wait a minute. Unset in production.
STALL_ENV: Final = "POSTFLIGHTD_STALL_AFTER_S"
#: How long ``Daemon.iterate`` waits for the turns it handed out to return (in real time),
#: unless new work for an idle root arrives first: longer than a healthy turn (a commit of a
#: batch, LOCK_WAIT_S on a busy lock), so one turn of the loop does what it started; a root
#: still busy after it is not waited for again.
TURN_GRACE_S: Final = 3.0


def stall_after_s() -> float:
    """STALL_S, or the test hook's value when set to a positive, finite number."""
    raw = os.environ.get(STALL_ENV)
    try:
        value = float(raw) if raw else STALL_S
    except ValueError:
        return STALL_S
    return value if math.isfinite(value) and value > 0 else STALL_S


@dataclass(slots=True)
class Work:
    """What the loop collected for one root since its last turn (kept while the root is busy)."""

    #: dirty paths from events, in arrival order.
    paths: dict[str, None] = field(default_factory=dict)
    #: those whose last event says a writer may still have them open.
    writing: set[str] = field(default_factory=set)
    #: its state file changed (held files retry; healing checks).
    state_changed: bool = False
    #: a rescan asked for (the first reason wins, as in ``DirtySet``).
    rescan: RescanReason | None = None
    #: a forced rescan: the root answered again after a stall.
    resumed: bool = False
    #: the supervisor's check of its watch and specs directory is due.
    check: bool = False
    #: the periodic reconciliation is due.
    periodic: bool = False
    #: SIGHUP: re-read this root's configuration (``retry_watch``: watch anew whatever it says).
    reload: bool = False
    retry_watch: bool = False

    def add_event(self, path: str, *, writing: bool) -> None:
        self.paths.pop(path, None)  # its latest event decides
        self.paths[path] = None
        if writing:
            self.writing.add(path)
        else:
            self.writing.discard(path)

    def __bool__(self) -> bool:
        return bool(
            self.paths
            or self.state_changed
            or self.rescan
            or self.resumed
            or self.check
            or self.periodic
            or self.reload
        )

    @property
    def worked(self) -> bool:
        """Whether it is work for the heap trim's purposes (a file, a rescan)."""
        return bool(
            self.paths or self.state_changed or self.rescan or self.resumed or self.periodic
        )


T = TypeVar("T")


class RootWorker(Generic[T]):
    """One root's worker thread: runs the turns handed to it, one at a time, in order.

    The thread is a daemon thread: one blocked for good in a hung filesystem's syscall does
    not keep the process from exiting.
    """

    def __init__(self, name: str, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._handed = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._turn: Callable[[], T] | None = None
        self._result: T | None = None
        self._error: BaseException | None = None
        self._returned = False
        self._closed = False
        #: the loop's monotonic time the turn in flight was handed over.
        self.started_at = 0.0
        #: what the turn in flight is doing, as far as known (for ``root_stalled``).
        self.doing = ""
        #: the loop's monotonic time the turn was found stalled (None: not stalled).
        self.stalled_at: float | None = None
        self._thread = threading.Thread(target=self._run, name=f"postflightd {name}", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    def hand(self, turn: Callable[[], T], now: float) -> None:
        """Run ``turn`` on the worker; the root is the worker's until it returns."""
        if self.busy or self._returned:
            raise RuntimeError("a root's turn was handed over while the last one is not back")
        self._turn = turn
        self.started_at = now
        self.doing = ""
        self._idle.clear()
        self._handed.set()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the turn in flight; whether it returned."""
        return self._idle.wait(timeout)

    def returned(self) -> bool:
        """Whether a turn came back whose result is not taken yet."""
        return self._returned and not self.busy

    def take(self) -> T:
        """The result of the turn that came back (its exception raised here, in the loop)."""
        if not self.returned():
            raise RuntimeError("no turn has come back")
        self._returned = False
        result, error = self._result, self._error
        self._result, self._error = None, None
        if error is not None:
            raise error
        return result  # type: ignore[return-value]  # set by the turn that returned

    def close(self) -> None:
        """Let the thread end once idle (a hung one stays blocked: it is a daemon thread)."""
        self._closed = True
        self._handed.set()

    def _run(self) -> None:
        while True:
            self._handed.wait()
            self._handed.clear()
            if self._closed:
                return
            turn, self._turn = self._turn, None
            if turn is None:
                continue
            try:
                self._result = turn()
            except BaseException as exc:  # noqa: BLE001 - handed to the loop, raised there
                self._error = exc
            self._returned = True
            self._idle.set()
            self._wake()
