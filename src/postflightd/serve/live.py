"""The dashboard's live state: what is on disk and in the journal now, and the events that tell
open pages about a change.

One poller per server (not per page), woken by events rather than a rescan: each root's specs
directory is followed by the daemon's own watch (``daemon.watch``: inotify on specs/ and each
task directory on Linux, watchdog's native observer elsewhere), and the journal by inotify on
its directory (its file and write-ahead log written). A change rebuilds the snapshot with the
same code as ``status`` (the ``collect`` function ``commands.serve`` hands in) and reads the
new journal rows as outcome events. Between changes, a light look every ``TICK_S`` (the
daemon's lock, errors.json's and state.json's identities: a few system calls per root) and a
rebuild when a run reaches its deadline or a waiting file's reason can pass with time. Where
no event can be had (a network filesystem, the inotify limits), the tree is polled at the
daemon's pace, and the journal by a stat every ``poll_s``.

Each open page has a bounded queue that keeps one snapshot at most (a state event is a whole
snapshot, so a newer one replaces an unread older one) and the latest outcomes: a page that
does not keep up loses its oldest events, never the server's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from postflightd.daemon.watch.dirty import DirtySet
from postflightd.daemon.watch.inotify_tree import EVENT_READER
from postflightd.daemon.watch.observer import POLL_INTERVAL_S, RootWatch
from postflightd.rules.findings import Finding
from postflightd.runs.status import RootStatus, RunStatus
from postflightd.serve import feed
from postflightd.serve.feed import findings_json, page_json, text
from postflightd.serve.follow import (
    JOURNAL_SUFFIXES,
    JournalWatch,
    Tree,
    context_signature,
    file_identity,
    tree_signature,
)

#: Findings of the invalid files, by (root, file as ``status`` names it).
FindingsByFile = dict[tuple[str, str], list[Finding]]
#: The runs under each root now, and the findings of the invalid ones (``commands.serve``).
Collect = Callable[[datetime], tuple[list[RootStatus], FindingsByFile]]

#: Events a page's queue holds at most before its oldest are dropped (one snapshot at most).
QUEUE_EVENTS: Final = 32
#: Outcomes kept to show a page that opens (or reconnects).
RECENT_OUTCOMES: Final = 50
#: The light look between changes: the daemons' locks, errors.json, the watches' health.
TICK_S: Final = 5.0
#: A polled tree (no events to be had) is listed again after this many times its last
#: listing's cost, if that is longer than the daemon's poll interval.
POLL_COST_FACTOR: Final = 50.0
#: Runs in flight, in the order shown (stuck first); files waiting for postflight apart.
_IN_FLIGHT: Final = ("stuck", "running", "writing")
WAITING: Final = "waiting"
#: Waiting reasons that pass with time alone (the snapshot is rebuilt at the next tick).
_PASSING: Final = ("still settling", "queued", "the project lock is busy")


@dataclass(frozen=True, slots=True)
class Event:
    """One server-sent event: its name, its data (JSON text), and an id for outcomes."""

    name: str
    data: str
    id: str | None = None


class Page:
    """One open page's queue: bounded, and holding one snapshot at most (the newest)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.events: deque[Event] = deque()
        self.ready = asyncio.Event()
        self.dropped = 0

    def put(self, event: Event) -> None:
        if event.name == "state":
            kept = [e for e in self.events if e.name != "state"]
            self.dropped += len(self.events) - len(kept)
            self.events = deque(kept)
        self.events.append(event)
        while len(self.events) > self.size:
            self.events.popleft()
            self.dropped += 1
        self.ready.set()

    async def get(self) -> Event:
        while not self.events:
            self.ready.clear()
            await self.ready.wait()
        return self.events.popleft()


class Hub:
    """The open pages' queues; publishing never blocks and never grows a queue past its bound."""

    def __init__(self, size: int = QUEUE_EVENTS) -> None:
        self.size = size
        self.clients: set[Page] = set()

    @property
    def dropped(self) -> int:
        return sum(c.dropped for c in self.clients)

    def subscribe(self) -> Page:
        page = Page(self.size)
        self.clients.add(page)
        return page

    def unsubscribe(self, page: Page) -> None:
        self.clients.discard(page)

    def publish(self, event: Event) -> None:
        for page in self.clients:
            page.put(event)


def _run_json(root: str, run: RunStatus) -> dict[str, Any]:
    return {
        "root": text(root),
        "file": text(run.file),
        "task": run.task,
        "state": run.state,
        "status": text(run.status),
        "agent": text(run.agent),
        "session": text(run.session),
        "operation": text(run.operation),
        "stage": text(run.stage),
        "phases_completed": run.phases_completed,
        "phases_total": run.phases_total,
        "started_at": text(run.started_at),
        "elapsed_s": run.elapsed_s,
        "timeout_s": run.timeout_s,
        "waiting": text(run.waiting),
        "waiting_since": text(run.waiting_since),
    }


def _daemon_json(status: RootStatus) -> dict[str, Any]:
    running = status.daemon_pid is not None
    return {
        "root": text(str(status.root)),
        "daemon": running,
        "pid": status.daemon_pid or None,
        "since": text(status.daemon_since),
        "start": None if running else text(f"postflightd watch {status.root}"),
        "note": text(status.note),
    }


def snapshot_json(
    statuses: Sequence[RootStatus], findings: FindingsByFile, now: datetime
) -> dict[str, Any]:
    """The runs in flight (stuck first, then the longest running), the files waiting for
    postflight (the oldest first) and the invalid files now."""
    runs: list[dict[str, Any]] = []
    waiting: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for status in statuses:
        root = str(status.root)
        for run in status.runs:
            # A stuck run is an invalid file too only when its file breaks the format
            # (``collect`` gives its findings then): being stuck alone is its row's.
            if run.state == "invalid" or (run.state == "stuck" and (root, run.file) in findings):
                entry = _run_json(root, run)
                entry["findings"] = findings_json(findings.get((root, run.file), []))
                invalid.append(entry)
            if run.state in _IN_FLIGHT:
                runs.append(_run_json(root, run))
            elif run.state == WAITING:
                waiting.append(_run_json(root, run))
    runs.sort(key=lambda r: (_IN_FLIGHT.index(r["state"]), -(r["elapsed_s"] or 0.0)))
    waiting.sort(key=lambda r: r["waiting_since"] or "")
    return {
        "generated": now.isoformat(),
        "roots": [_daemon_json(s) for s in statuses],
        "runs": runs,
        "stuck": sum(1 for r in runs if r["state"] == "stuck"),
        "waiting": waiting,
        "invalid": invalid,
    }


def next_change(doc: dict[str, Any], now: float) -> float:
    """When time alone changes what the snapshot says (POSIX time): a run in progress reaching
    its timeout, a waiting reason that passes (the next tick); infinity when nothing does."""
    due = float("inf")
    for run in doc.get("runs", ()):
        if run["state"] == "running" and run["timeout_s"] and run["elapsed_s"] is not None:
            due = min(due, now + run["timeout_s"] - run["elapsed_s"] + 0.5)
        elif run["state"] == "writing":
            due = min(due, now + TICK_S)
    for run in doc.get("waiting", ()):
        if (run["waiting"] or "").startswith(_PASSING):
            due = min(due, now + TICK_S)
    return due


@dataclass(slots=True)
class LiveState:
    """What the poller knows now; read by the routes, written by the poller alone."""

    snapshot: str = "{}"
    snapshot_doc: dict[str, Any] = field(default_factory=dict)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_OUTCOMES))
    journal_id: int = 0
    #: applied outcomes since the server's local midnight, and which midnight
    applied_today: int = 0
    today: str = ""
    #: how many times the snapshot was rebuilt (the tests' and the benchmark's count)
    builds: int = 0


class Poller:
    """Follows the trees and the journal, and publishes what changed."""

    def __init__(
        self,
        collect: Collect,
        roots: Sequence[Tree],
        journal: Path,
        hub: Hub,
        poll_s: float = 0.2,
    ) -> None:
        self.collect = collect
        self.trees = list(roots)
        self.roots = [(t.root, t.specs) for t in roots]
        self.root_names = [str(t.root) for t in roots]
        self.journal_path = journal
        self.hub = hub
        self.poll_s = poll_s
        self.state = LiveState()
        self._conn: sqlite3.Connection | None = None
        self._first_look = True
        # A look runs in a worker thread that outlives a cancelled poll: closing waits for it,
        # and no look opens the journal again after.
        self._lock = threading.Lock()
        self._closed = False
        #: wakes the serving loop (set by ``start``); called from the watch threads.
        self._wake: Callable[[], object] = lambda: None
        self.dirty = DirtySet(wake=self._wake_loop)
        self.watches: list[RootWatch] = []
        self.journal_watch: JournalWatch | None = None
        self._journal_stat: tuple[tuple[int, int, int] | None, ...] = ()
        self._journal_dirty = True
        self._polled_signature: tuple[Any, ...] | None = None
        self._poll_at = 0.0
        self._context: tuple[Any, ...] | None = None
        self._tick_at = 0.0
        self._due = float("inf")

    # --- watching --------------------------------------------------------------------------

    def _wake_loop(self) -> None:
        self._wake()  # looked up at each call: ``start`` sets it after the watches exist

    def start(self, wake: Callable[[], object]) -> None:
        """Watch every root and the journal; ``wake`` is called (from any thread) on a change."""
        self._wake = wake
        for tree in self.trees:
            watch = RootWatch(
                tree.root,
                tree.root / tree.specs,
                tree.state_file,
                "polling" if tree.observer == "polling" else "auto",
                self.dirty,
            )
            try:
                watch.start()
            except OSError:
                watch.kind = "polling"
            self.watches.append(watch)
        self.journal_watch = JournalWatch(self.journal_path)

    @property
    def polled(self) -> bool:
        """Whether any tree is looked at without events (listed on a timer)."""
        return any(w.kind in (None, "polling") for w in self.watches)

    def wait_s(self) -> float:
        """Seconds until the next look that no event will ask for."""
        now = time.monotonic()
        due = self._tick_at
        if self.polled:
            due = min(due, self._poll_at)
        if self.journal_watch is None or self.journal_watch.fd < 0:
            due = min(due, now + self.poll_s)
        wall_due = self._due - time.time()
        return max(0.0, min(due - now, wall_due))

    def journal_event(self) -> None:
        """The journal's directory has events (called by the loop's reader on its fd)."""
        if self.journal_watch is not None and self.journal_watch.changed():
            self._journal_dirty = True  # read at the next look
            self._wake()

    # --- looking ---------------------------------------------------------------------------

    def _journal(self) -> sqlite3.Connection | None:
        """The read-only connection, opened when the journal is there. At the first look, what
        it holds is history (the recent outcomes a page opens with); a journal that appears or
        is replaced later is read from its first row, as outcomes."""
        if self._conn is None:
            self._conn = feed.connect(self.journal_path)
            if self._conn is not None:
                try:
                    with feed.snapshot(self._conn):  # the recent rows are those up to `last`
                        last = feed.last_id(self._conn)
                        if self._first_look:
                            self.state.recent.extend(
                                feed.recent(self._conn, self.root_names, RECENT_OUTCOMES)
                            )
                    if self._first_look:
                        self.state.journal_id = last
                    elif last < self.state.journal_id:
                        self.state.journal_id = 0
                except sqlite3.Error:
                    self._drop_journal()
        return self._conn

    def _drop_journal(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def refresh(self, force: bool = False) -> list[Event]:
        """One look (blocking I/O: run it in a worker thread); the events to publish."""
        with self._lock:
            if self._closed:
                return []
            return self._look(force)

    def _tree_changed(self, mono: float) -> bool:
        pending = self.dirty.take()
        changed = bool(pending.paths or pending.rescans or pending.checks or pending.state_changed)
        if self.polled and mono >= self._poll_at:
            t0 = time.monotonic()
            signature = tree_signature(self.roots)
            cost = time.monotonic() - t0
            self._poll_at = mono + max(POLL_INTERVAL_S, POLL_COST_FACTOR * cost)
            changed = changed or signature != self._polled_signature
            self._polled_signature = signature
        return changed

    def _tick(self, mono: float) -> bool:
        """The light look: a daemon started or stopped, errors.json or state.json replaced, a
        watch that no longer sees its directory (restarted). True when the snapshot may differ."""
        if mono < self._tick_at:
            return False
        self._tick_at = mono + TICK_S
        changed = False
        for watch in self.watches:
            if watch.kind != "polling" and watch.problem() is not None:
                with contextlib.suppress(OSError):
                    watch.start()
                changed = True
        context = context_signature(self.trees)
        changed = changed or context != self._context
        self._context = context
        return changed

    def _journal_changed(self) -> bool:
        """Whether the journal may hold new rows: its files' identities, statted only where
        no inotify event says so."""
        if self.journal_watch is not None and self.journal_watch.fd >= 0:
            changed, self._journal_dirty = self._journal_dirty, False
            return changed
        base = str(self.journal_path)
        stat = tuple(file_identity(base + s) for s in JOURNAL_SUFFIXES)
        changed = stat != self._journal_stat
        self._journal_stat = stat
        return changed

    def _look(self, force: bool) -> list[Event]:
        mono = time.monotonic()
        rebuild = self._tree_changed(mono)
        rebuild = self._tick(mono) or rebuild or force or time.time() >= self._due
        if rebuild:
            now = datetime.now(UTC)
            statuses, findings = self.collect(now)
            doc = snapshot_json(statuses, findings, now)
            self.state.snapshot_doc = doc
            self.state.builds += 1
            self._due = next_change(doc, time.time())
        outcomes = self._read_journal(force)
        today = datetime.now().astimezone().date().isoformat()
        counted = False
        if outcomes or force or today != self.state.today:
            counted = self._count_today(today)
        events: list[Event] = []
        if (rebuild or outcomes or counted) and self.state.snapshot_doc:
            self._summarise()
            self.state.snapshot = page_json(self.state.snapshot_doc)
            events.append(Event("state", self.state.snapshot))
        events.extend(Event("outcome", page_json(o), str(o["id"])) for o in outcomes)
        self._first_look = False
        return events

    def _read_journal(self, force: bool) -> list[dict[str, Any]]:
        if not (self._journal_changed() or force or self._conn is None):
            return []
        conn = self._journal()
        if conn is None:
            return []
        outcomes: list[dict[str, Any]] = []
        try:
            while feed.last_id(conn) > self.state.journal_id:
                before = self.state.journal_id
                self.state.journal_id, batch = feed.tail(conn, before, self.root_names)
                for outcome in batch:
                    self.state.recent.append(outcome)
                    outcomes.append(outcome)
                if self.state.journal_id == before:
                    break
        except sqlite3.Error:
            self._drop_journal()  # pruned, replaced or locked: opened again next time
        return outcomes

    def _count_today(self, today: str) -> bool:
        """Applied outcomes since local midnight; whether the count changed."""
        conn = self._conn
        if conn is None:
            return False
        midnight = datetime.fromisoformat(today).astimezone()  # local midnight
        try:
            count = feed.applied_since(conn, self.root_names, midnight)
        except sqlite3.Error:
            return False
        changed = count != self.state.applied_today or today != self.state.today
        self.state.applied_today, self.state.today = count, today
        return changed

    def _summarise(self) -> None:
        """The header's figures, into the snapshot: what a person needs first."""
        doc = self.state.snapshot_doc
        last = self.state.recent[-1] if self.state.recent else None
        doc["summary"] = {
            "in_flight": len(doc.get("runs", ())),
            "stuck": doc.get("stuck", 0),
            "waiting": len(doc.get("waiting", ())),
            "invalid": len(doc.get("invalid", ())),
            "applied_today": self.state.applied_today,
            "last_outcome": last["ts"] if last else None,
            "last_outcome_kind": last["outcome"] if last else None,
        }

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop_journal()
            for watch in self.watches:
                watch.stop()
            self.watches.clear()
            if self.journal_watch is not None:
                self.journal_watch.close()
        EVENT_READER.stop_if_unused()
