"""The daemon's work on one watched root: rescans, batches, stuck runs, healing, its lock.

``loop.Daemon`` runs the loop and supervises the watches; everything it does for one root's
files goes through a ``WatchedRoot``: which files are due (complete, still being written,
throttled, held back by a busy lock or an unusable state.json), post-flighting them in
batches, following their runs (``runs.table.RunTable``) and logging what changed. Time comes
from a ``Clock`` passed in, so every path here runs in a unit test without waiting.

Why this module stays whole at ~800 lines: it is one class over one root's bookkeeping (each
file's ``files.FileState``: deferred, throttled, checked, held, lock-busy, stuck-unrecorded,
the identity last processed), and its methods are the rules that move a file between those
states (a file still being written is never throttled too; whatever ends a file's life goes
through ``gone``, which forgets its record). Split across modules, those rules would have no
single place to be read.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from postflightd.config import Config, policy_from
from postflightd.daemon.files import FileStates
from postflightd.daemon.healer import Healer
from postflightd.daemon.watch.dirty import DirtySet, RescanReason
from postflightd.daemon.watch.observer import POLL_INTERVAL_S, RootWatch
from postflightd.errors import PostflightError
from postflightd.fs.directory import FileIdentity
from postflightd.fs.locks import InstanceLock, InstanceLockError, LockTimeoutError, project_lock
from postflightd.journal.database import Journal, identity_text
from postflightd.logs import get_logger
from postflightd.models.files import META_NAME
from postflightd.pipeline.apply import apply_files
from postflightd.pipeline.check import check_file
from postflightd.pipeline.cleanup import clean_litter
from postflightd.pipeline.records import agent_type, record_stuck
from postflightd.pipeline.results import FileReport, Outcome
from postflightd.project.artifacts import artifact_probe
from postflightd.project.metafiles import MetaFileRef
from postflightd.project.root import Project
from postflightd.project.state import StateView
from postflightd.rules.findings import STATE_UNUSABLE, Finding, Severity
from postflightd.runs.events import emit, transition_event
from postflightd.runs.table import Run, RunTable, Sighting, Transition

log = get_logger()

#: Files post-flighted per commit: bounds the time a SIGTERM waits for the commit in flight.
BATCH_MAX: Final = 250
#: A polling root is rescanned every POLL_INTERVAL_S, or this many times its last rescan's cost
#: if that is longer: polling 100,000 task directories must not take a core.
POLL_COST_FACTOR: Final = 50.0
#: How long a batch waits for the project lock held by another writer (a commit takes
#: milliseconds): past it the files stay dirty and are retried every LOCK_RETRY_S, so a lock
#: held for minutes neither stalls the loop nor delays SIGTERM.
LOCK_WAIT_S: Final = 0.5
#: How often files held back by a busy project lock probe it again.
LOCK_RETRY_S: Final = 1.0
#: Task directories a periodic reconciliation looks into for crash litter (a listing each:
#: all 10,000 of a large tree would cost ~150 ms, five times the rest of the pass).
LITTER_DIRS_PER_PASS: Final = 1000


@dataclass(frozen=True, slots=True)
class Clock:
    """Where the daemon reads the time: ``monotonic`` for its timers, ``wall`` for the runs."""

    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.wall(), UTC)


@dataclass(slots=True)
class Shared:
    """What the daemon's roots share: the user's configuration (its process-wide settings:
    journal, log, observer, rescan interval; replaced on SIGHUP), the journal, the runs in
    flight, the hand-over from the watchers, the clock, and whether to stop. Each root's own
    configuration is its ``WatchedRoot``'s."""

    config: Config
    journal: Journal
    runs: RunTable
    dirty: DirtySet
    clock: Clock
    #: whether SIGTERM/SIGINT arrived: no new batch starts then (the files stay for the next start).
    stopping: Callable[[], bool]
    #: re-applies outcomes a writer that ignored the lock reverted.
    healer: Healer = field(default_factory=Healer)


# --- one root ---------------------------------------------------------------------------------


def _identity(path: str) -> FileIdentity | None:
    try:
        return FileIdentity.of(os.lstat(path))
    except OSError:
        return None


def _metadata_identities(specs_dir: Path) -> tuple[list[tuple[str, FileIdentity]], list[str]]:
    """(path, identity) of every ``specs/*/.return-meta.json``, and the task directory names.

    One lstat per task directory. The periodic reconciliation runs this over every task
    directory, so it stays on plain strings and ``scandir``'s cached entry types (an idle
    daemon stays under 0.1 % of a core); symlinked task directories are included for the
    pipeline to refuse.
    """
    out: list[tuple[str, FileIdentity]] = []
    names: list[str] = []
    try:
        entries = list(os.scandir(specs_dir))
    except OSError:
        return out, names
    suffix = os.sep + META_NAME
    lstat = os.lstat
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
            elif not entry.is_symlink():
                continue
            st = lstat(entry.path + suffix)
        except OSError:
            continue
        out.append((entry.path + suffix, FileIdentity.of(st)))
    return out, names


def _plain_dir(path: Path) -> bool:
    """A directory, not a link to one: a specs directory swapped for a link counts as gone."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _chunks(items: Sequence[MetaFileRef], size: int) -> Iterable[Sequence[MetaFileRef]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class WatchedRoot:
    """One root the daemon watches: its configuration, its watch, its instance lock, and the
    work on its files.

    ``config`` is this root's own (its project file, else the user's): nothing another root
    wrote governs it. The observer kind is the process's (``shared.config``).
    """

    def __init__(
        self,
        root: Path,
        config: Config,
        shared: Shared,
        lock: InstanceLock,
        on_fallback: Callable[[Path, str], None],
    ) -> None:
        self.root = root
        #: this root's configuration and validation policy (replaced together on SIGHUP).
        self.config = config
        self.policy = policy_from(config)
        self.specs_dir = root / config.specs_dir
        self.shared = shared
        self.lock = lock
        self.watch = RootWatch(
            root,
            self.specs_dir,
            config.postflight.state_file,
            shared.config.watch.observer,
            shared.dirty,
            on_fallback=lambda why: on_fallback(root, why),
        )
        #: each metadata file's record: the content last processed, and why it waits.
        self.files = FileStates()
        #: why state.json is unusable, as last logged (logged again only when it changes).
        self.state_problem: str | None = None
        #: the specs directory is gone (or not a directory): the supervisor looks for it.
        self.missing = False
        #: monotonic time the busy project lock is probed again.
        self.lock_retry_at = 0.0
        #: monotonic time the lock was first found busy (None: not busy), for one log line.
        self.lock_busy_since: float | None = None
        #: polling (no events): monotonic time the next poll is due.
        self.next_poll = 0.0
        #: polling: state.json's identity at the last poll (a change retries the held files).
        self.state_identity: FileIdentity | None = None
        #: where in the sorted task directories the next periodic litter sweep starts.
        self.litter_cursor = 0
        #: During the start's rescan, the journal's newest row before it (``Journal.last_id``):
        #: a file whose sighting the journal already held then is unchanged since the last run,
        #: counted in ``unchanged`` and summed up in one line, not logged again line by line.
        self.journal_mark: int | None = None
        self.unchanged = 0
        #: the start's rescan is running: what it defers joins ``start_deferred``.
        self.starting = False
        #: files the start's rescan found not parsing yet (a dead writer's truncated file
        #: among them): judged against ``journal_mark`` once they settle, and the summary
        #: line waits for them.
        self.start_deferred: set[str] = set()

    @property
    def _config(self) -> Config:
        return self.config

    @property
    def _settle_s(self) -> float:
        return self._config.watch.settle_ms / 1000

    def next_due(self) -> list[float]:
        """The monotonic times this root's own timers are due (for the loop's sleep)."""
        due: list[float] = []
        files = self.files.due()
        if files.deferred_since is not None:
            due.append(files.deferred_since + self._settle_s)
        if files.lock_busy:
            due.append(self.lock_retry_at)
        if files.throttled_until is not None:
            due.append(files.throttled_until)
        if self.watch.kind == "polling":
            due.append(self.next_poll)
        return due

    # --- the watch and the instance lock ------------------------------------------------------

    def start_watch(self) -> None:
        try:
            started = self.watch.start()
        except OSError as exc:
            log.error(  # noqa: TRY400 - an expected condition: the message says it all
                "watch_failed", root=str(self.root), error=exc.strerror or str(exc)
            )
            started = False
        if started:
            self.missing = False
            log.info(
                "watching",
                root=str(self.root),
                specs_dir=str(self.specs_dir),
                observer=self.watch.kind,
                reason=self.watch.why,
                watches=self.watch.watch_count or None,
            )
        else:
            self.missing = True

    def relock(self) -> None:
        """The specs directory is a new one (replaced, or moved by a reload): hold the instance
        lock in it, then release the old one; keep the old one, and log the loss, when the new
        one cannot be taken."""
        fresh = InstanceLock(self.specs_dir)
        try:
            fresh.acquire(self.root)
        except (InstanceLockError, OSError) as exc:
            log.error(  # noqa: TRY400 - expected; no traceback
                "instance_lock_lost", root=str(self.root), error=str(exc)
            )
            return
        self.lock.release()
        self.lock = fresh

    def supervise(self) -> None:
        """The supervisor's check: restart a watch that died or lost its directory (and rescan),
        or note the specs directory gone until it comes back."""
        problem = self.watch.problem()
        if problem is None:
            return
        if not _plain_dir(self.specs_dir):
            if not self.missing:
                self.watch.stop()
                self.missing = True
                log.warning(
                    "specs_dir_missing",
                    root=str(self.root),
                    specs_dir=str(self.specs_dir),
                    reason=problem,
                )
            return
        log.warning(
            "watch_restarted",
            root=str(self.root),
            reason="the specs directory is back" if self.missing else problem,
        )
        old_identity = self.watch.identity
        self.start_watch()
        if self.missing:
            return
        if self.watch.identity != old_identity:
            self.relock()
        self.rescan("watch restarted", force=True)

    # --- what is due --------------------------------------------------------------------------

    def on_events(self, paths: Iterable[str], writing: set[str], state_changed: bool) -> None:
        """Dirty paths from events: complete files now, files still being written later."""
        mono = self.shared.clock.monotonic()
        settle = self._settle_s
        files = self.files
        due: list[str] = []
        for path in paths:
            if path in writing:
                # Modified (or created) and not closed yet: the writer may still be writing.
                # Parse success alone is not completion (a closing brace can come before the
                # last byte): wait for the close, or for settle_ms of quiet.
                files.defer(path, mono).throttled_until = None
                continue
            known = files.get(path)
            last = known.checked_at if known is not None else None
            if last is not None and mono - last < settle:
                # Checked less than a settle window ago: at most once per window.
                files.throttle(path, last + settle).deferred_since = None
                continue
            due.append(path)
        if state_changed:
            self.heal()
            due.extend(files.take_held())
        if self.shared.stopping() or not due:
            return
        for p in due:
            if (known := files.get(p)) is not None:
                known.deferred_since = None
        self.process(due, report_unparsed=False)

    def poll(self) -> None:
        """A polling root (no events): rescan it, at a cost-bounded interval."""
        clock = self.shared.clock
        started = clock.monotonic()
        self.rescan("poll", force=False)
        state = _identity(str(self.specs_dir / self._config.postflight.state_file))
        if state != self.state_identity:
            self.state_identity = state
            held = self.files.take_held()
            if held:
                self.process(held, report_unparsed=False)
        cost = clock.monotonic() - started
        # Never more than about 2 % of a core on polling, whatever the tree's size.
        self.next_poll = clock.monotonic() + max(POLL_INTERVAL_S, cost * POLL_COST_FACTOR)

    def heal(self) -> None:
        """state.json changed: re-apply the recent outcomes a writer that ignored the lock lost.

        Before the held and dirty files are processed, so that a postflight of the same task
        never builds on the reverted entry.
        """
        if self.shared.stopping():
            return
        shared = self.shared
        try:
            shared.healer.check(self.root, self.config, shared.journal, now=shared.clock.now())
        except Exception as exc:  # healing is an aid: it must never stop the daemon
            log.exception("heal_failed", root=str(self.root), error=str(exc))

    def retry_settled(self) -> None:
        """Read files once they have been quiet for ``settle_ms`` (still open, or unparsed),
        and complete files whose once-per-settle-window turn has come."""
        settle = self._settle_s
        clock = self.shared.clock
        mono, wall = clock.monotonic(), clock.wall()
        turn = self.files.throttled_by(mono)
        if turn and not self.shared.stopping():
            self.process(turn, report_unparsed=False)
        due: list[str] = []
        for path, state in self.files.deferred():
            last = state.deferred_since
            if last is None or mono - last < settle:
                continue
            try:
                age = wall - os.lstat(path).st_mtime
            except OSError:
                age = settle
            if age < settle:
                # Written since its last event reached us (we may lag behind a fast
                # writer): the file is not quiet yet, whatever the event times say.
                self.files.defer(path, mono - max(age, 0.0))
                continue
            state.deferred_since = None
            due.append(path)
        if due and not self.shared.stopping():
            self.process(due, report_unparsed=True)

    def retry_lock_busy(self) -> None:
        """Process the files a busy lock held back, once a probe finds the lock free."""
        clock = self.shared.clock
        if not self.files.lock_busy() or self.shared.stopping():
            return
        if clock.monotonic() < self.lock_retry_at:
            return
        try:
            # A probe first: validating (and journaling) every held file again each
            # second while another writer keeps the lock would only add noise.
            with self._project() as project, project_lock(project.require_specs(), 0):
                pass
        except LockTimeoutError:
            self.lock_retry_at = clock.monotonic() + LOCK_RETRY_S
            return
        except (OSError, PostflightError):
            pass  # the lock file itself is the problem: postflight reports it
        paths = self.files.take_lock_busy()
        self.process(paths, report_unparsed=False)

    # --- scanning and processing --------------------------------------------------------------

    def rescan(self, reason: RescanReason, *, force: bool) -> None:
        """Events are hints, the directory is the truth: process whatever changed unseen.

        A file found changed is processed at once only if it has been quiet for settle_ms
        (its writer may still have it open: a rescan sees no close); otherwise it waits.
        """
        shared = self.shared
        if force:
            # At start and after a restart of the watch, first what a killed run left behind
            # (an interrupted deletion may put a metadata file back).
            with self._project() as project:
                for note in clean_litter(project, self.config, shared.journal):
                    log.warning("crash_leftover", root=str(self.root), note=note)
        found: set[str] = set()
        dirty: list[str] = []
        wall = shared.clock.wall()
        settle = self._settle_s
        identities, task_dirs = _metadata_identities(self.specs_dir)
        if reason == "periodic":
            self._sweep_litter(task_dirs)
            self.retry_stuck(shared.clock.now())
        files = self.files
        for path, identity in identities:
            found.add(path)
            known = files.get(path)
            if force or known is None or not known.processed or known.identity != identity:
                if wall - identity.mtime_ns / 1e9 < settle:
                    if known is None or known.deferred_since is None:
                        files.defer(path, shared.clock.monotonic())
                    if reason == "start":
                        self.start_deferred.add(path)
                elif known is None or known.deferred_since is None:
                    dirty.append(path)
        for key in shared.runs.keys_for(str(self.root)):
            path = str(self.specs_dir / key[1] / META_NAME)
            if path not in found:
                dirty.append(path)
        for path, state in list(files.items()):
            if state.processed and path not in found:
                state.forget_content()
                files.drop_idle(path)
        if force:
            self.state_problem = None
        added = self.watch.ensure(task_dirs)
        quiet = reason in ("periodic", "poll") and not dirty and not added
        level = log.debug if quiet else log.info
        level(
            "rescan",
            root=str(self.root),
            reason=reason,
            files=len(found),
            changed=len(dirty),
            watches_added=added or None,
        )
        if reason == "start":
            self.journal_mark = shared.journal.last_id()
            self.unchanged = 0
            self.start_deferred &= found
            self.starting = True
        try:
            if dirty:
                self.process(dirty, report_unparsed=False)
        finally:
            if reason == "start":
                self.starting = False
                self._start_settled(None)

    def _start_settled(self, path: str | None) -> None:
        """``path``, deferred by the start's rescan, is settled (or the rescan ended): once
        none is left, the files unchanged since the last run are summed up in one line."""
        if path is not None:
            self.start_deferred.discard(path)
        if self.journal_mark is None or self.start_deferred:
            return
        self.journal_mark = None
        if self.unchanged:
            log.info("unchanged_since_last_run", root=str(self.root), files=self.unchanged)

    def _sweep_litter(self, task_dirs: list[str]) -> None:
        """What a killed writer left (another process's, since the start): the temporary files
        beside state.json, and ``LITTER_DIRS_PER_PASS`` task directories' set-aside metadata
        files, the next ones each pass, so the whole tree is covered every few passes while a
        pass at 10,000 task directories stays a few milliseconds."""
        names = sorted(task_dirs)
        start = self.litter_cursor if self.litter_cursor < len(names) else 0
        chunk = names[start : start + LITTER_DIRS_PER_PASS]
        self.litter_cursor = start + len(chunk)
        with self._project() as project:
            for note in clean_litter(project, self.config, self.shared.journal, chunk):
                log.warning("crash_leftover", root=str(self.root), note=note)

    def process(self, paths: Iterable[str], *, report_unparsed: bool) -> None:
        """Post-flight ``paths`` (metadata files of this root) in batches of BATCH_MAX."""
        shared = self.shared
        refs: list[MetaFileRef] = []
        mono = shared.clock.monotonic()
        for path in dict.fromkeys(paths):
            meta = Path(path)
            task_dir = meta.parent
            if task_dir.parent != self.specs_dir:
                continue  # a file of that name deeper down (in an artifact directory)
            if (known := self.files.get(path)) is not None:
                known.throttled_until = None
            if not os.path.lexists(path):
                # Deleted (by our own clean-up, or by another postflight): no need to read
                # state.json to know that.
                self.gone(path)
                continue
            self.files.of(path).checked_at = mono
            # No symlink check here: the file is read (later) relative to its task directory,
            # opened then without following links, so a link is refused whenever it appears.
            refs.append(MetaFileRef.at(meta))
        for n, chunk in enumerate(_chunks(refs, BATCH_MAX)):
            if shared.stopping():
                return  # the files stay on disk; the next start picks them up
            now = shared.clock.now()
            with self._project() as project:
                if project.specs is None:
                    if project.specs_problem is not None:
                        log.error(
                            "specs_dir_refused", root=str(self.root), problem=project.specs_problem
                        )
                    return  # kept; the supervisor follows the specs directory
                try:
                    reports = apply_files(
                        project,
                        chunk,
                        self.config,
                        self.policy,
                        shared.journal,
                        now,
                        report_unparsed=report_unparsed,
                        lock_timeout_s=LOCK_WAIT_S,
                        first_seen=self._first_seen(chunk),
                    )
                except LockTimeoutError as exc:
                    self._lock_busy([r.path_text for r in refs[n * BATCH_MAX :]], exc)
                    return
                except Exception as exc:  # one bad batch must not stop the daemon
                    log.exception("postflight_failed", root=str(self.root), error=str(exc))
                    continue
            # The batch had the lock: its files held back by a busy lock before (a rescan met
            # them again) are done with it.
            for r in chunk:
                if (known := self.files.get(r.path_text)) is not None:
                    known.lock_busy = False
            if self.lock_busy_since is not None and not self.files.lock_busy():
                log.info(
                    "lock_free",
                    root=str(self.root),
                    waited_s=round(shared.clock.monotonic() - self.lock_busy_since, 1),
                )
                self.lock_busy_since = None
            for report in reports:
                self._after(report, now)

    def _first_seen(self, refs: Sequence[MetaFileRef]) -> dict[str, datetime]:
        """When this daemon first saw each file's run (those it follows): a final file it
        saw written is no leftover (PF607) however long it waits afterwards; one it meets
        first (at start-up, say) is first seen now."""
        runs, root = self.shared.runs, str(self.root)
        seen: dict[str, datetime] = {}
        for ref in refs:
            run = runs.get((root, ref.task_dir))
            if run is not None:
                seen[ref.path_text] = run.first_seen
        return seen

    def _lock_busy(self, paths: Iterable[str], exc: LockTimeoutError) -> None:
        """Keep ``paths`` dirty until the project lock is free; say so once, not per attempt."""
        mono = self.shared.clock.monotonic()
        for path in paths:
            self.files.hold_for_lock(path)
        self.lock_retry_at = mono + LOCK_RETRY_S
        if self.lock_busy_since is None:
            self.lock_busy_since = mono
            log.warning(
                "lock_busy",
                root=str(self.root),
                error=str(exc),
                files=len(self.files.lock_busy()),
                retry_s=LOCK_RETRY_S,
            )

    def _project(self) -> Project:
        """``Project.open`` for this root: the specs directory opened for this batch only, so a
        specs directory replaced meanwhile is never written through (load_state reuses the
        parse of unchanged bytes)."""
        try:
            return Project.open(self.root, self._config)
        except PostflightError as exc:
            # The specs directory became unreadable under the daemon (its permissions): the
            # files are kept and the daemon carries on, as for any other unusable project.
            state = StateView(
                self.specs_dir / self._config.postflight.state_file, True, None, str(exc)
            )
            return Project(
                self.root, self.specs_dir, state, artifact_probe(self.root), None, str(exc)
            )

    def gone(self, path: str) -> None:
        """``path`` no longer exists: forget it, and end its run."""
        self.files.pop(path, None)
        if path in self.start_deferred:
            self._start_settled(path)
        key = (str(self.root), Path(path).parent.name)
        ended = self.shared.runs.ended(key, applied=False)
        if ended is not None:
            self._log_transition(ended)

    def _sighting(self, report: FileReport) -> Sighting:
        v = report.validation
        return Sighting.from_doc(
            str(self.root),
            report.path.parent.name,
            report.task,
            report.loaded.doc,
            operation=v.operation if v else None,
            started_at=v.started_at if v else None,
            timeout_s=v.timeout_s if v else None,
        )

    def _after(self, report: FileReport, now: datetime) -> None:
        """Follow up one file's outcome: the run table, the log, retries."""
        path = report.path_text
        if self.starting and report.outcome is Outcome.DEFERRED:
            self.start_deferred.add(path)
        self._follow(report, now)
        if path in self.start_deferred and report.outcome is not Outcome.DEFERRED:
            self._start_settled(path)

    def _follow(self, report: FileReport, now: datetime) -> None:
        runs = self.shared.runs
        path = report.path_text
        outcome = report.outcome
        files = self.files
        if outcome is Outcome.DEFERRED:
            # Maybe still being written: wait for its next event or for it to settle.
            known = files.get(path)
            if known is None or known.deferred_since is None:
                files.defer(path, self.shared.clock.monotonic())
            return
        if (known := files.get(path)) is not None:
            known.deferred_since = None
        if outcome is Outcome.GONE:
            self.gone(path)
            return
        if outcome is Outcome.REWRITTEN:
            self.shared.dirty.mark(self.root, path)
            return
        if outcome is Outcome.INCOMPLETE:
            # In state.json, but TODO.md or errors.json could not be written (a full disk):
            # the file is kept, and forgetting its identity makes the next periodic rescan
            # apply it again, which completes the job.
            if known is not None:
                known.forget_content()
                files.drop_idle(path)
            log.error(
                "incomplete",
                **self._context(report),
                problem=next((f.message for f in report.findings if f.code == "PF606"), None),
            )
            return
        if outcome is Outcome.APPLIED:
            if known is not None:
                known.forget_content()
                known.checked_at = None
                known.held = False
                files.drop_idle(path)
            for t in runs.finished(self._sighting(report), now):
                self._log_transition(t)
            log.info(
                "applied",
                **self._context(report),
                status=report.raw_status,
                agent=agent_type(report),
                warnings=[f.code for f in report.findings],
                notes=list(report.notes) or None,
            )
            return
        identity = report.loaded.identity
        state = files.of(path)
        unchanged = not state.processed and self._seen_before(report)
        new_content = state.identity != identity or identity is None
        state.processed, state.identity = True, identity
        for t in runs.seen(self._sighting(report), now):
            if not unchanged:
                self._log_transition(t)
        if unchanged:
            self.unchanged += 1
            new_content = False
        if outcome is Outcome.STATE_UNUSABLE:
            state.held = True
            problem = next(
                (f.message for f in report.findings if f.code == STATE_UNUSABLE), STATE_UNUSABLE
            )
            if problem != self.state_problem:
                self.state_problem = problem
                log.error("state_unusable", **self._context(report), problem=problem)
            return
        # PF602 (stuck) is the stuck timer's to report, once, with an errors.json record.
        errors = [f for f in report.findings if f.severity is Severity.ERROR and f.code != "PF602"]
        if new_content and (outcome is Outcome.INVALID or errors):
            log.warning(
                "invalid",
                **self._context(report),
                status=report.raw_status,
                agent=agent_type(report),
                findings=[_finding_line(f) for f in report.findings],
            )

    def _seen_before(self, report: FileReport) -> bool:
        """The file is as the last run saw it (``journal_mark``), by its journal rows."""
        identity = report.loaded.identity
        if self.journal_mark is None or identity is None:
            return False
        if not self.starting and report.path_text not in self.start_deferred:
            return False  # changed since the start: judged as any new sighting
        return self.shared.journal.seen_before(
            self.journal_mark,
            root=str(self.root),
            file=report.rel_path,
            task=report.task,
            identity=identity_text(identity.dev, identity.ino, identity.size, identity.mtime_ns),
        )

    def _context(self, report: FileReport) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "task": report.task,
            "session": report.session,
            "file": report.rel_path,
        }

    def _log_transition(self, t: Transition) -> None:
        emit(transition_event(t, self._config.specs_dir, self.shared.clock.wall()))

    # --- stuck runs ---------------------------------------------------------------------------

    def check_stuck(self, run: Run, now: datetime) -> None:
        """``run``'s deadline passed: read its file again, and flag it stuck (once) if it is."""
        shared = self.shared
        runs = shared.runs
        path = self.specs_dir / run.sighting.task_dir / META_NAME
        with self._project() as project:
            report = check_file(project, MetaFileRef.at(path), self.config, self.policy, now)
            if not report.path.exists():
                self.gone(str(path))
                return
            if not report.stuck:
                # The file changed since it was last read (a new started_at, a final status).
                for t in runs.seen(self._sighting(report), now):
                    self._log_transition(t)
                current = runs.get(run.key)
                deadline = current.deadline if current is not None else None
                if deadline is not None and now.timestamp() > deadline:
                    runs.mark_stuck(run.key)  # never spin on a deadline in the past
                return
            runs.seen(self._sighting(report), now)
            flagged = runs.mark_stuck(run.key)
            if flagged is None:
                return
            self._log_transition(flagged)
            self._record_stuck(project, report, now)

    def _record_stuck(self, project: Project, report: FileReport, now: datetime) -> None:
        """errors.json's timeout record and the journal's row for a run just flagged stuck; a
        lock held by another writer postpones them to the next reconciliation (``retry_stuck``).
        """
        path = report.path_text
        try:
            record_stuck(project, report, self.config, self.shared.journal, now, LOCK_WAIT_S)
        except LockTimeoutError as exc:
            state = self.files.of(path)
            first = not state.stuck_unrecorded
            state.stuck_unrecorded = True
            if first:
                log.error(  # noqa: TRY400 - expected; no traceback
                    "stuck_record_failed",
                    **self._context(report),
                    error=str(exc),
                    retry="at the next reconciliation",
                )
            return
        except (OSError, PostflightError) as exc:
            self._clear_unrecorded(path)
            log.error(  # noqa: TRY400 - expected; no traceback
                "stuck_record_failed", **self._context(report), error=str(exc)
            )
            return
        if self._clear_unrecorded(path):
            log.info("stuck_recorded", **self._context(report))

    def _clear_unrecorded(self, path: str) -> bool:
        """``path``'s stuck run no longer waits to be recorded; whether it was waiting."""
        known = self.files.get(path)
        if known is None or not known.stuck_unrecorded:
            return False
        known.stuck_unrecorded = False
        self.files.drop_idle(path)
        return True

    def retry_stuck(self, now: datetime) -> None:
        """Record the stuck runs a busy lock kept from being recorded, if still stuck."""
        for path in self.files.stuck_unrecorded():
            if self.shared.stopping():
                return
            meta = Path(path)
            with self._project() as project:
                report = check_file(project, MetaFileRef.at(meta), self.config, self.policy, now)
                if not report.stuck or not report.path.exists():
                    # Finished, rewritten or gone since: nothing stuck to record any more.
                    self._clear_unrecorded(path)
                    continue
                self._record_stuck(project, report, now)


def _finding_line(finding: Finding) -> str:
    """``PF303 completion_data: message``, or ``PF102: message`` for a finding on the file."""
    where = f" {finding.location}" if finding.location else ""
    return f"{finding.code}{where}: {finding.message}"
