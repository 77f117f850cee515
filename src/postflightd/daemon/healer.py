"""The daemon's healer: after a state.json write, re-apply the recently applied
outcomes it lost to a writer that ignored the lock, and log someone's edits once.

What is lost, and how it is re-applied, is verify.py's (``inspect_root``, ``repair_root``);
this module remembers, per root, what was applied recently, so that the check after each
write costs one comparison per recent task.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from postflightd.config import Config
from postflightd.fs.locks import LockTimeoutError
from postflightd.journal.database import Journal, format_ts
from postflightd.logs import get_logger
from postflightd.pipeline.verify import Verdict, entry_of, repair_root, state_view
from postflightd.postflight.transform import task_index
from postflightd.project.state import StateView

log = get_logger()

#: ``status`` counts the re-applied and overwritten outcomes of this window.
STATUS_WINDOW: Final = timedelta(hours=24)
#: How long the daemon's healer waits for the project lock. A holder is writing: its write
#: brings the next state.json change, and the check runs again then; the daemon must not
#: stall behind it.
HEAL_LOCK_TIMEOUT_S: Final = 2.0


@dataclass(slots=True)
class _Recent:
    #: task -> (journal id, ts, entry after) of its latest postflight in the window. Only the
    #: ``after`` is kept: judging a difference reads the journal again under the lock, and
    #: the daemon's memory holds one entry per recent task, not two (an idle daemon
    #: watching 1,000 task directories stays under 60 MB RSS).
    latest: dict[int, tuple[int, str, Any]] = field(default_factory=dict)
    last_id: int = 0
    #: task -> (journal id, entry) already judged not lost: not re-examined while unchanged
    judged: dict[int, tuple[int, Any]] = field(default_factory=dict)
    #: journal ids already logged as overwritten (also read back from the journal)
    reported: set[int] | None = None


@dataclass(frozen=True, slots=True)
class HealStats:
    checked: int
    candidates: int
    reapplied: int
    seconds: float


class Healer:
    """After a state.json write: re-apply recently applied outcomes it lost, log edits once.

    Cost when nothing was lost: one journal query for rows newer than the last one seen
    (usually none), and one comparison per recently applied task against state.json as
    ``load_state`` already parsed it for the daemon.
    """

    def __init__(self) -> None:
        #: each root's recent outcomes: the daemon's roots heal on their own worker threads,
        #: each touching only its own entry once it has it (taken under the lock).
        self._roots: dict[str, _Recent] = {}
        self._lock = threading.Lock()

    def check(
        self,
        root: Path,
        config: Config,
        journal: Journal,
        *,
        now: datetime | None = None,
    ) -> HealStats | None:
        """Compare the root's recently applied tasks with state.json; heal what was lost."""
        window = config.watch.heal_window_s
        if window <= 0 or not journal.enabled:
            return None
        started = time.perf_counter()
        now = now or datetime.now(UTC)
        since = format_ts(now - timedelta(seconds=window))
        with self._lock:
            recent = self._roots.setdefault(str(root), _Recent())
        # One row at a time, keeping its ``after`` only: a burst's rows decoded all at once
        # were the daemon's memory peak (Journal.iter_changes).
        for row in journal.iter_changes(roots=[str(root)], since=since, after_id=recent.last_id):
            recent.last_id = row.id
            recent.latest[row.task] = (row.id, row.ts, row.change.after)
        for task in [k for k, (_, ts, _) in recent.latest.items() if ts < since]:
            del recent.latest[task]
            recent.judged.pop(task, None)
        view = state_view(root, config)
        if view.doc is None:
            return None
        entry_for = _entry_lookup(view, view.doc)
        candidates: list[int] = []
        for task, (id_, _, after) in recent.latest.items():
            entry = entry_for(task)
            if entry == after:  # the one comparison per task
                continue
            judged = recent.judged.get(task)
            if judged is not None and judged[0] == id_ and judged[1] == entry:
                continue
            candidates.append(task)
        healed = 0
        if candidates:
            healed = self._heal(root, config, journal, since, set(candidates), recent)
        return HealStats(len(recent.latest), len(candidates), healed, time.perf_counter() - started)

    def _heal(
        self,
        root: Path,
        config: Config,
        journal: Journal,
        since: str,
        tasks: set[int],
        recent: _Recent,
    ) -> int:
        try:
            result = repair_root(
                root, config, journal, since, tasks=tasks, lock_timeout_s=HEAL_LOCK_TIMEOUT_S
            )
        except LockTimeoutError as exc:
            log.info("heal_deferred", root=str(root), reason=str(exc))
            return 0
        if result.problem is not None:
            log.warning("heal_failed", root=str(root), problem=result.problem)
            return 0
        if recent.reported is None:
            recent.reported = journal.refs(kind="overwritten", root=str(root), since=since)
        view = state_view(root, config)
        index = task_index(view.doc) if view.doc is not None else {}
        healed = 0
        for c in result.checks:
            t = c.tracked.latest
            ctx = {"root": t.root, "task": t.task, "session": t.session, "file": t.file}
            if c.repaired:
                healed += 1
                log.info(
                    "reapplied",
                    **ctx,
                    status=t.status,
                    postflighted_at=t.ts,
                    reason="state.json held the task's entry from before this postflight "
                    "(a writer that ignored the lock)",
                )
                continue
            if view.doc is not None:
                recent.judged[t.task] = (t.id, entry_of(view.doc, t.task, index))
            if c.verdict not in (Verdict.REVERTED, Verdict.SUPERSEDED, Verdict.REMOVED):
                continue
            if t.id in recent.reported:
                continue
            recent.reported.add(t.id)
            journal.record(
                "overwritten",
                root=t.root,
                file=t.file,
                task=t.task,
                session=t.session,
                status=t.status,
                ref=t.id,
            )
            level = log.warning if c.verdict is Verdict.REVERTED else log.info
            level(
                "outcome_overwritten",
                **ctx,
                verdict=c.verdict.value,
                reverted=list(c.judgement.reverted) or None,
                superseded=list(c.judgement.superseded) or None,
                postflighted_at=t.ts,
                message="the task's entry was edited since this postflight; left as it is",
            )
        return healed


def _entry_lookup(view: StateView, doc: dict[str, Any]) -> Callable[[int], Any]:
    """Task -> entry, as cheaply as exactness allows.

    ``view.tasks`` (built when the bytes were parsed) holds the last entry of a number and
    postflight changes the first: the same one unless a number is listed twice, when the
    slower search of ``find_task`` decides.
    """
    if len(view.tasks) == len(doc["active_projects"]):
        return view.tasks.get
    index = task_index(doc)
    return lambda task: entry_of(doc, task, index)


def healing_counts(journal: Journal, root: Path, now: datetime) -> dict[str, Any]:
    """For ``status``: outcomes re-applied and found overwritten in the last 24 hours."""
    since = format_ts(now - STATUS_WINDOW)
    counts = journal.count_kinds(root=str(root), kinds=("reapplied", "overwritten"), since=since)
    return {"since": since, **counts}
