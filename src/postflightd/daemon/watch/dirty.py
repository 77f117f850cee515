"""The hand-over from the watch threads to the daemon's loop: which paths changed, which roots
to rescan or check.

Every watch (``inotify_tree``'s reader thread, watchdog's threads in ``observer``) only marks
what it saw on a ``DirtySet``; the loop takes the ``Pending`` batch and does the work in its
own thread. Events are hints; the directory is the truth.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

#: Why a root is scanned whole: the daemon started, the periodic rescan, a polling watch's
#: turn, the watch restarted, the configuration reloaded, events lost to an overflow, or the
#: root answered again after a stall (what arrived meanwhile may have been missed).
RescanReason = Literal[
    "start",
    "periodic",
    "poll",
    "watch restarted",
    "configuration reloaded",
    "event queue overflow",
    "root resumed",
]


@dataclass(slots=True)
class Pending:
    """What the handlers and the supervisor collected since the loop last looked."""

    paths: dict[str, Path] = field(default_factory=dict)
    #: paths whose last event says a writer may still have them open (modified or created,
    #: not yet closed): complete once closed, or after ``settle_ms`` of quiet.
    writing: set[str] = field(default_factory=set)
    #: roots to rescan (None: every root), with the reason.
    rescans: dict[Path | None, RescanReason] = field(default_factory=dict)
    #: roots whose watch must be checked now (the specs directory itself changed).
    checks: set[Path | None] = field(default_factory=set)
    #: roots whose state file changed (files held back by an unusable state.json retry).
    state_changed: set[Path] = field(default_factory=set)


class DirtySet:
    """Thread-safe hand-over from the watch threads (inotify reader, watchdog's) to the loop."""

    def __init__(self, wake: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._pending = Pending()
        #: set on every hand-over when no ``wake`` callback is given (tests wait on it).
        self.event = threading.Event()
        self._wake = wake if wake is not None else self.event.set

    def mark(self, root: Path, path: str, *, complete: bool = True) -> None:
        """``path`` changed; ``complete=False`` when its writer may still be writing it."""
        with self._lock:
            self._pending.paths[path] = root
            if complete:
                self._pending.writing.discard(path)
            else:
                self._pending.writing.add(path)
        self._wake()

    def request_rescan(self, root: Path | None, reason: RescanReason) -> None:
        with self._lock:
            self._pending.rescans.setdefault(root, reason)
        self._wake()

    def request_check(self, root: Path | None) -> None:
        with self._lock:
            self._pending.checks.add(root)
        self._wake()

    def state_changed(self, root: Path) -> None:
        with self._lock:
            self._pending.state_changed.add(root)
        self._wake()

    def roots_waiting(self) -> set[Path | None]:
        """The roots something is waiting for (None: every root), without taking it."""
        with self._lock:
            p = self._pending
            return {*p.paths.values(), *p.rescans, *p.checks, *p.state_changed}

    def take(self) -> Pending:
        with self._lock:
            taken, self._pending = self._pending, Pending()
        return taken
