"""The daemon's table of runs: one run per task directory and root, what the daemon last read
from its metadata file.

The daemon feeds it sightings and endings and asks it for the next stuck deadline; everything
here is pure (the clock is an argument) so the transitions are unit-tested without a
filesystem. The table is shared by the daemon's root workers (each root's turn runs on its own
thread), so its methods take a lock.
"""

from __future__ import annotations

import _thread
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from postflightd.runs.lifecycle import IN_PROGRESS, stuck_deadline
from postflightd.timestamps import parse_timestamp


class Change(StrEnum):
    """What a sighting or an ending did to the run table (the log event names)."""

    STARTED = "run_started"
    PROGRESS = "run_progress"
    #: PF603: a new session replaced an in_progress run of another session.
    REPLACED = "run_replaced"
    #: the run's file now holds a final status (applied or not yet).
    REPORTED = "run_reported"
    FINISHED = "run_finished"
    VANISHED = "run_vanished"
    STUCK = "run_stuck"


def _opt_str(doc: Mapping[str, Any] | None, key: str) -> str | None:
    value = doc.get(key) if doc is not None else None
    return value if isinstance(value, str) and value else None


def _opt_int(doc: Mapping[str, Any] | None, key: str) -> int | None:
    value = doc.get(key) if doc is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_obj(doc: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    value = doc.get(key) if doc is not None else None
    return value if isinstance(value, Mapping) else None


@dataclass(frozen=True, slots=True)
class Sighting:
    """What one read of a task's metadata file says about its run."""

    root: str
    task_dir: str
    task: int | None
    status: str | None
    session: str | None = None
    agent: str | None = None
    operation: str | None = None
    stage: str | None = None
    phases_completed: int | None = None
    phases_total: int | None = None
    started_at: datetime | None = None
    timeout_s: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.root, self.task_dir)

    @classmethod
    def from_doc(
        cls,
        root: str,
        task_dir: str,
        task: int | None,
        doc: object,
        *,
        operation: str | None = None,
        started_at: datetime | None = None,
        timeout_s: float | None = None,
    ) -> Sighting:
        """Read a raw document defensively: an invalid file still tells what it can."""
        top = doc if isinstance(doc, Mapping) else None
        meta = _opt_obj(top, "metadata")
        progress = _opt_obj(top, "partial_progress")
        if started_at is None:
            raw = _opt_str(top, "started_at")
            started_at = parse_timestamp(raw) if raw else None
        completed = _opt_int(progress, "phases_completed")
        total = _opt_int(progress, "phases_total")
        return cls(
            root=root,
            task_dir=task_dir,
            task=task,
            status=_opt_str(top, "status"),
            session=_opt_str(meta, "session_id"),
            agent=_opt_str(meta, "agent_type"),
            operation=operation,
            stage=_opt_str(progress, "stage"),
            phases_completed=completed
            if completed is not None
            else _opt_int(meta, "phases_completed"),
            phases_total=total if total is not None else _opt_int(meta, "phases_total"),
            started_at=started_at,
            timeout_s=timeout_s,
        )


@dataclass(frozen=True, slots=True)
class Run:
    """A run the daemon follows: the latest sighting, when it was first seen, whether flagged."""

    sighting: Sighting
    first_seen: datetime
    updated: datetime
    stuck: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return self.sighting.key

    @property
    def in_progress(self) -> bool:
        return self.sighting.status == IN_PROGRESS

    @property
    def deadline(self) -> float | None:
        """POSIX time after which this run is stuck; None when it cannot be (or is final)."""
        s = self.sighting
        if not self.in_progress or s.started_at is None or s.timeout_s is None:
            return None
        return stuck_deadline(s.started_at, s.timeout_s)


@dataclass(frozen=True, slots=True)
class Transition:
    change: Change
    run: Run
    #: for REPLACED: the unfinished run of the other session.
    previous: Run | None = None


def _progress_key(s: Sighting) -> tuple[object, ...]:
    return (s.status, s.stage, s.phases_completed, s.phases_total, s.started_at, s.timeout_s)


class RunTable:
    """Every run in flight, keyed by (root, task directory).

    Thread-safe: each of the daemon's roots updates its own runs from its worker thread while
    the loop reads the next deadline and the status line's counts; one lock (held for
    dictionary work only, never across I/O) keeps every method whole.
    """

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str], Run] = {}
        # threading.RLock's own C lock, without importing threading on a scan's path.
        self._lock = _thread.RLock()

    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[Run]:
        with self._lock:
            return iter(list(self._runs.values()))

    def get(self, key: tuple[str, str]) -> Run | None:
        return self._runs.get(key)

    def seen(self, s: Sighting, now: datetime) -> list[Transition]:
        """Record a sighting; return what changed (nothing for a repeat of the same content)."""
        with self._lock:
            return self._seen(s, now)

    def _seen(self, s: Sighting, now: datetime) -> list[Transition]:
        prev = self._runs.get(s.key)
        if prev is None:
            run = Run(s, first_seen=now, updated=now)
            self._runs[s.key] = run
            change = Change.STARTED if s.status == IN_PROGRESS else Change.REPORTED
            return [Transition(change, run)]
        replaced = (
            prev.in_progress
            and prev.sighting.session is not None
            and s.session is not None
            and prev.sighting.session != s.session
        )
        if replaced:
            run = Run(s, first_seen=now, updated=now)
            self._runs[s.key] = run
            follow = Change.STARTED if s.status == IN_PROGRESS else Change.REPORTED
            return [Transition(Change.REPLACED, run, prev), Transition(follow, run)]
        same_session = prev.sighting.session == s.session
        run = Run(s, prev.first_seen, now, stuck=prev.stuck and same_session)
        self._runs[s.key] = run
        if _progress_key(prev.sighting) == _progress_key(s):
            return []
        if s.status == IN_PROGRESS:
            return [Transition(Change.PROGRESS, run)]
        return [Transition(Change.REPORTED, run)]

    def ended(self, key: tuple[str, str], *, applied: bool) -> Transition | None:
        """The file was post-flighted (applied) or went away; the run leaves the table."""
        with self._lock:
            run = self._runs.pop(key, None)
        if run is None:
            return None
        return Transition(Change.FINISHED if applied else Change.VANISHED, run)

    def finished(self, s: Sighting, now: datetime) -> list[Transition]:
        """A final file was applied: note a replaced session (PF603), then end the run."""
        with self._lock:
            out = [t for t in self._seen(s, now) if t.change is Change.REPLACED]
            ended = self.ended(s.key, applied=True)
        if ended is not None:
            out.append(ended)
        return out

    def next_deadline(self, root: str | None = None) -> float | None:
        """The earliest stuck deadline of a run not yet flagged (one timer is armed for it), of
        ``root``'s runs only when given."""
        with self._lock:
            deadlines = [
                d
                for r in self._runs.values()
                if not r.stuck
                and (root is None or r.sighting.root == root)
                and (d := r.deadline) is not None
            ]
        return min(deadlines, default=None)

    def due(self, now: datetime, root: str | None = None) -> list[Run]:
        """Runs past their deadline not flagged yet (of ``root`` only when given): a stuck run
        is reported once per session."""
        t = now.timestamp()
        with self._lock:
            return [
                r
                for r in self._runs.values()
                if not r.stuck
                and (root is None or r.sighting.root == root)
                and (d := r.deadline) is not None
                and t > d
            ]

    def mark_stuck(self, key: tuple[str, str]) -> Transition | None:
        with self._lock:
            run = self._runs.get(key)
            if run is None or run.stuck:
                return None
            flagged = Run(run.sighting, run.first_seen, run.updated, stuck=True)
            self._runs[key] = flagged
        return Transition(Change.STUCK, flagged)

    def keys_for(self, root: str) -> list[tuple[str, str]]:
        with self._lock:
            return [k for k in self._runs if k[0] == root]
