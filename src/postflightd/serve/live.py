"""The dashboard's live state: what is on disk and in the journal now, and the events that tell
open pages about a change.

One poller per server (not per page) looks every ``poll_s``: a stat of each task directory's
metadata file (cheap: no file is read unless something changed) and the journal's last row id.
A change rebuilds the snapshot with the same code as ``status`` (the ``collect`` function
``commands.serve`` hands in) and reads the new journal rows as outcome events. Each open page
has a bounded queue: a page that does not keep up loses its oldest events, never the
server's memory (a state event is a whole snapshot, so the next one makes up for any lost).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from postflightd.models.files import META_NAME
from postflightd.rules.findings import Finding
from postflightd.runs.status import RootStatus, RunStatus
from postflightd.serve import feed
from postflightd.serve.feed import findings_json, page_json, text

#: Findings of the invalid files, by (root, file as ``status`` names it).
FindingsByFile = dict[tuple[str, str], list[Finding]]
#: The runs under each root now, and the findings of the invalid ones (``commands.serve``).
Collect = Callable[[datetime], tuple[list[RootStatus], FindingsByFile]]

#: Events a page's queue holds at most before its oldest are dropped.
QUEUE_EVENTS: Final = 32
#: Outcomes kept to show a page that opens (or reconnects).
RECENT_OUTCOMES: Final = 50
#: A snapshot is rebuilt at least this often, unchanged trees or not: a run becomes stuck
#: with time alone.
REFRESH_S: Final = 5.0
_IN_FLIGHT: Final = ("stuck", "running", "writing", "waiting")


@dataclass(frozen=True, slots=True)
class Event:
    """One server-sent event: its name, its data (JSON text), and an id for outcomes."""

    name: str
    data: str
    id: str | None = None


class Hub:
    """The open pages' queues; publishing never blocks and never grows a queue past its bound."""

    def __init__(self, size: int = QUEUE_EVENTS) -> None:
        self.size = size
        self.clients: set[asyncio.Queue[Event]] = set()
        self.dropped = 0

    def subscribe(self) -> asyncio.Queue[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=self.size)
        self.clients.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        self.clients.discard(queue)

    def publish(self, event: Event) -> None:
        for queue in self.clients:
            if queue.full():
                queue.get_nowait()
                self.dropped += 1
            queue.put_nowait(event)


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
    }


def snapshot_json(
    statuses: Sequence[RootStatus], findings: FindingsByFile, now: datetime
) -> dict[str, Any]:
    """The runs in flight (stuck first, then the longest running) and the invalid files now."""
    runs: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for status in statuses:
        root = str(status.root)
        for run in status.runs:
            if run.state == "invalid" or (not run.valid and run.state == "stuck"):
                entry = _run_json(root, run)
                entry["findings"] = findings_json(findings.get((root, run.file), []))
                invalid.append(entry)
            if run.state in _IN_FLIGHT:
                runs.append(_run_json(root, run))
    runs.sort(key=lambda r: (_IN_FLIGHT.index(r["state"]), -(r["elapsed_s"] or 0.0)))
    return {
        "generated": now.isoformat(),
        "roots": [
            {
                "root": text(str(s.root)),
                "daemon": s.daemon_pid is not None,
                "note": text(s.note),
            }
            for s in statuses
        ],
        "runs": runs,
        "stuck": sum(1 for r in runs if r["state"] == "stuck"),
        "invalid": invalid,
    }


def tree_signature(roots: Iterable[tuple[Path, str]]) -> tuple[Any, ...]:
    """What changes when a metadata file appears, changes or goes: a stat per task directory.

    ``roots``: each root with its specs directory's name. Links are not followed (``status``
    refuses them and says so; a change of the link itself is seen here).
    """
    sig: list[Any] = []
    for root, specs_name in roots:
        specs = f"{root}{os.sep}{specs_name}"
        try:
            entries = list(os.scandir(specs))
        except OSError as exc:
            sig.append((specs, exc.errno))
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                # os.stat on a string: this runs for every task directory several times a second
                st = os.stat(f"{entry.path}{os.sep}{META_NAME}", follow_symlinks=False)  # noqa: PTH116
            except OSError:
                continue
            sig.append((entry.name, st.st_mtime_ns, st.st_size, st.st_ino))
    sig.sort()
    return tuple(sig)


@dataclass(slots=True)
class LiveState:
    """What the poller knows now; read by the routes, written by the poller alone."""

    snapshot: str = "{}"
    snapshot_doc: dict[str, Any] = field(default_factory=dict)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_OUTCOMES))
    journal_id: int = 0
    #: when the snapshot was built (monotonic), and from which tree signature
    built: float = 0.0
    signature: tuple[Any, ...] | None = None


class Poller:
    """Looks at the trees and the journal, and publishes what changed."""

    def __init__(
        self,
        collect: Collect,
        roots: Sequence[tuple[Path, str]],
        journal: Path,
        hub: Hub,
        poll_s: float = 0.2,
    ) -> None:
        self.collect = collect
        self.roots = list(roots)
        self.root_names = [str(r) for r, _ in roots]
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

    def _journal(self) -> sqlite3.Connection | None:
        """The read-only connection, opened when the journal is there. At the first look, what
        it holds is history (the recent outcomes a page opens with); a journal that appears or
        is replaced later is read from its first row, as outcomes."""
        if self._conn is None:
            self._conn = feed.connect(self.journal_path)
            if self._conn is not None:
                try:
                    last = feed.last_id(self._conn)
                    if self._first_look:
                        self.state.recent.extend(
                            feed.recent(self._conn, self.root_names, RECENT_OUTCOMES)
                        )
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

    def _look(self, force: bool) -> list[Event]:
        events: list[Event] = []
        signature = tree_signature(self.roots)
        stale = time.monotonic() - self.state.built >= REFRESH_S
        if force or stale or signature != self.state.signature:
            now = datetime.now(UTC)
            statuses, findings = self.collect(now)
            doc = snapshot_json(statuses, findings, now)
            self.state.snapshot_doc = doc
            self.state.snapshot = page_json(doc)
            self.state.built = time.monotonic()
            self.state.signature = signature
            events.append(Event("state", self.state.snapshot))
        conn = self._journal()
        if conn is not None:
            try:
                if feed.last_id(conn) > self.state.journal_id:
                    self.state.journal_id, outcomes = feed.tail(
                        conn, self.state.journal_id, self.root_names
                    )
                    for outcome in outcomes:
                        self.state.recent.append(outcome)
                        events.append(Event("outcome", page_json(outcome), str(outcome["id"])))
            except sqlite3.Error:
                self._drop_journal()  # pruned, replaced or locked: opened again next time
        self._first_look = False
        return events

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop_journal()
