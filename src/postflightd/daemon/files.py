"""What the daemon knows of each metadata file of one watched root: one ``FileState`` per path.

A record at its defaults says the same as no record at all, so forgetting a file is one
``pop``, and a record whose last mark is cleared is dropped (``drop_idle``) only to keep the
table small. "What is due" is one query (``FileStates.due``) over the files a timer waits for.
"""

from __future__ import annotations

from dataclasses import dataclass

from postflightd.fs.directory import FileIdentity


@dataclass(slots=True)
class FileState:
    """One metadata file: the content last processed, and why it waits, if it does.

    A timer's mark (``deferred_since``, ``throttled_until``, ``lock_busy``) is set through
    its ``FileStates`` (``defer``, ``throttle``, ``hold_for_lock``), and cleared here.
    """

    #: whether a content of it was processed (a rescan skips it while its identity holds).
    processed: bool = False
    #: the identity of the content last processed (None: it could not be had).
    identity: FileIdentity | None = None
    #: not complete yet (still open, or not parsing): monotonic time of its last event; read
    #: once quiet for settle_ms.
    deferred_since: float | None = None
    #: monotonic time it was last read and validated: a file that keeps changing is
    #: re-validated at most once per settle window (an agent rewriting its file in a loop
    #: cannot make the daemon spin).
    checked_at: float | None = None
    #: complete but held back by that limit: monotonic time it is due.
    throttled_until: float | None = None
    #: kept because state.json is unusable: retried when it changes.
    held: bool = False
    #: not post-flighted because another writer held the project lock: retried later.
    lock_busy: bool = False
    #: its run was flagged stuck, and a busy lock postponed the record of it.
    stuck_unrecorded: bool = False

    def forget_content(self) -> None:
        """The next rescan processes it again, whatever its identity."""
        self.processed = False
        self.identity = None

    def idle(self) -> bool:
        """Nothing known of it and nothing pending: the same as no record."""
        return not (
            self.processed
            or self.held
            or self.lock_busy
            or self.stuck_unrecorded
            or self.deferred_since is not None
            or self.checked_at is not None
            or self.throttled_until is not None
        )


@dataclass(frozen=True, slots=True)
class Due:
    """When a root's files are next due: the earliest deferred file's last event and the
    earliest throttled file's turn (None: none), and whether a busy lock holds any back."""

    deferred_since: float | None
    throttled_until: float | None
    lock_busy: bool


class FileStates(dict[str, FileState]):
    """A root's ``FileState`` by path (a file's ``str`` path, as the watch gives it).

    The three marks that make a file due by a timer (deferred, throttled, lock-busy) are set
    through ``defer``, ``throttle`` and ``hold_for_lock``, which note the path among those
    waiting: the loop asks what is due at every wake, and a root keeping thousands of files
    (runs in progress, invalid files) must not be walked for it. That note is only a hint,
    never kept in step: a mark is cleared on the record alone, and a record forgotten with
    ``pop``; the queries pass over, and drop, waiting paths with no mark left.
    """

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        super().__init__()
        #: the paths that may carry a timer's mark (a superset).
        self._waiting: dict[str, None] = {}

    def of(self, path: str) -> FileState:
        """``path``'s record, made if it has none."""
        state = self.get(path)
        if state is None:
            state = self[path] = FileState()
        return state

    def drop_idle(self, path: str) -> None:
        """Drop ``path``'s record if nothing is left in it."""
        state = self.get(path)
        if state is not None and state.idle():
            del self[path]

    # --- the timers' marks ----------------------------------------------------------------

    def defer(self, path: str, since: float) -> FileState:
        """Mark ``path`` not complete yet, as of its last event at ``since``."""
        state = self.of(path)
        state.deferred_since = since
        self._waiting[path] = None
        return state

    def throttle(self, path: str, until: float) -> FileState:
        """Mark ``path`` due again at ``until`` (checked less than a settle window ago)."""
        state = self.of(path)
        state.throttled_until = until
        self._waiting[path] = None
        return state

    def hold_for_lock(self, path: str) -> None:
        """Mark ``path`` held back by a busy project lock."""
        self.of(path).lock_busy = True
        self._waiting[path] = None

    def _waiting_states(self) -> list[tuple[str, FileState]]:
        """The records with a timer's mark, in the order they were first marked; the paths
        without one dropped from the waiting."""
        out: list[tuple[str, FileState]] = []
        stale: list[str] = []
        for path in self._waiting:
            state = self.get(path)
            if state is None or (
                state.deferred_since is None
                and state.throttled_until is None
                and not state.lock_busy
            ):
                stale.append(path)
            else:
                out.append((path, state))
        for path in stale:
            del self._waiting[path]
        return out

    # --- what is due ----------------------------------------------------------------------

    def due(self) -> Due:
        """What is due, in one pass over the waiting records."""
        deferred: float | None = None
        throttled: float | None = None
        lock_busy = False
        for _path, state in self._waiting_states():
            since = state.deferred_since
            if since is not None and (deferred is None or since < deferred):
                deferred = since
            until = state.throttled_until
            if until is not None and (throttled is None or until < throttled):
                throttled = until
            lock_busy = lock_busy or state.lock_busy
        return Due(deferred, throttled, lock_busy)

    def deferred(self) -> list[tuple[str, FileState]]:
        """The files not complete yet, with their records."""
        return [(path, s) for path, s in self._waiting_states() if s.deferred_since is not None]

    def throttled_by(self, mono: float) -> list[str]:
        """The throttled files whose turn has come at ``mono``."""
        return [
            path
            for path, s in self._waiting_states()
            if s.throttled_until is not None and s.throttled_until <= mono
        ]

    def lock_busy(self) -> list[str]:
        """The files held back by a busy lock."""
        return [path for path, s in self._waiting_states() if s.lock_busy]

    def take_lock_busy(self) -> list[str]:
        """The files held back by a busy lock, no longer marked."""
        busy = self.lock_busy()
        for path in busy:
            self[path].lock_busy = False
        return busy

    # --- the marks no timer follows -------------------------------------------------------

    def take_held(self) -> list[str]:
        """The files held back by an unusable state.json, no longer marked."""
        held = [path for path, s in self.items() if s.held]
        for path in held:
            self[path].held = False
        return held

    def stuck_unrecorded(self) -> list[str]:
        """The files whose stuck run waits to be recorded."""
        return [path for path, s in self.items() if s.stuck_unrecorded]
