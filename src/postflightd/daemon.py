"""``postflightd watch``: the loop turning file events into postflight, and the service around it.

One thread does all the work (validation, postflight, stuck detection): watchdog's threads only
hand dirty paths over (``watcher.DirtySet``), so every state.json commit happens here, in
order, and a signal only ever lands between two commits. The loop sleeps in ``select`` on a
self-pipe until the next thing that can be due: an event, the stuck deadline of the earliest
run, a deferred (half-written) file's settle time, the supervisor's check, the periodic
rescan, or the systemd watchdog ping. There is no per-second polling of the runs.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, Final

import structlog

from postflightd.config import Config
from postflightd.daemon_notes import remove_daemon_notes, write_daemon_notes
from postflightd.errors import PostflightError, StateUnusableError, UsageError
from postflightd.findings import Severity
from postflightd.journal import Journal, journal_path
from postflightd.lifecycle import Change, RunTable, Sighting, Transition
from postflightd.loader import (
    META_NAME,
    FileIdentity,
    MetaFileRef,
    StateView,
    artifact_probe,
)
from postflightd.logs import configure_logging
from postflightd.pipeline import (
    FileReport,
    Outcome,
    Project,
    check_file,
    clean_litter,
    policy_from,
    postflight,
    record_stuck,
)
from postflightd.sdnotify import SystemdNotifier
from postflightd.store import (
    InstanceLock,
    InstanceLockError,
    LockTimeoutError,
    project_lock,
)
from postflightd.tree import RefusedError, open_specs
from postflightd.verify import Healer
from postflightd.watcher import (
    POLL_INTERVAL_S,
    DirtySet,
    Pending,
    RootWatch,
    install_overflow_trap,
)

log = structlog.get_logger()

#: How often the supervisor checks that each observer is alive and on the right directory.
SUPERVISE_S: Final = 2.0
#: ...and while a specs directory is missing, how often it looks for it to come back.
MISSING_RECHECK_S: Final = 0.25
#: Files post-flighted per commit: bounds the time a SIGTERM waits for the commit in flight.
BATCH_MAX: Final = 250
#: A polling root is rescanned every POLL_INTERVAL_S, or this many times its last rescan's cost
#: if that is longer: polling 100,000 task directories must not take a core.
POLL_COST_FACTOR: Final = 50.0
#: The periodic reconciliation runs every rescan_interval_s, or this many times its last
#: cost if that is longer (at most 0.05 % of a core).
PERIODIC_COST_FACTOR: Final = 2000.0
#: Journal pruning: the first run this long after start, then every PRUNE_EVERY_S.
PRUNE_FIRST_S: Final = 5.0
PRUNE_EVERY_S: Final = 6 * 3600.0
#: A stuck timer fires this long after the deadline, so ``now > deadline`` holds when it does.
DEADLINE_SLACK_S: Final = 0.005
#: How long a batch waits for the project lock held by another writer (a commit takes
#: milliseconds): past it the files stay dirty and are retried every LOCK_RETRY_S, so a lock
#: held for minutes neither stalls the loop nor delays SIGTERM.
LOCK_WAIT_S: Final = 0.5
LOCK_RETRY_S: Final = 1.0


# --- the loop's wake-up ---------------------------------------------------------------------


class Waker:
    """A self-pipe: watchdog threads and signals both wake the loop's ``select``.

    A pipe rather than a ``threading.Event``: a signal handler that sets an Event can deadlock
    on the Event's internal lock if the signal lands while the main thread holds it.
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        for fd in (self._r, self._w):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)

    @property
    def write_fd(self) -> int:
        return self._w

    def set(self) -> None:
        # A full pipe (BlockingIOError) means the loop is already due to wake.
        with contextlib.suppress(OSError):
            os.write(self._w, b"\0")

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(InterruptedError):
            select.select([self._r], [], [], max(0.0, timeout))
        with contextlib.suppress(BlockingIOError):  # drained: the pipe is non-blocking
            while os.read(self._r, 4096):
                continue

    def close(self) -> None:
        os.close(self._r)
        os.close(self._w)


# --- per-root state ---------------------------------------------------------------------------


@dataclass(slots=True)
class RootState:
    root: Path
    specs_dir: Path
    watch: RootWatch
    lock: InstanceLock
    #: path -> identity of the content last processed (a rescan skips unchanged files).
    identities: dict[str, FileIdentity | None] = field(default_factory=dict)
    #: files that did not parse yet -> monotonic time of their last event.
    deferred: dict[str, float] = field(default_factory=dict)
    #: files kept because state.json is unusable: retried when it changes.
    held: set[str] = field(default_factory=set)
    state_problem: str | None = None
    missing: bool = False
    #: files not post-flighted because another writer held the project lock: retried later.
    lock_busy: set[str] = field(default_factory=set)
    lock_retry_at: float = 0.0
    #: monotonic time the lock was first found busy (None: not busy), for one log line.
    lock_busy_since: float | None = None
    #: path -> monotonic time it was last read and validated: a file that keeps changing is
    #: re-validated at most once per settle window (SPEC 7.1).
    checked: dict[str, float] = field(default_factory=dict)
    #: complete files held back by that limit -> monotonic time they are due.
    throttled: dict[str, float] = field(default_factory=dict)
    #: polling (no events): when the next poll is due, and state.json's identity at the last.
    next_poll: float = 0.0
    state_identity: FileIdentity | None = None


def _plain_dir(path: Path) -> bool:
    """A directory, not a link to one: a specs directory swapped for a link counts as gone."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _identity(path: str) -> FileIdentity | None:
    try:
        return FileIdentity.of(os.lstat(path))
    except OSError:
        return None


def _metadata_identities(specs_dir: Path) -> tuple[list[tuple[str, FileIdentity]], list[str]]:
    """(path, identity) of every ``specs/*/.return-meta.json``, and the task directory names.

    One lstat per task directory. The periodic reconciliation runs this over every task
    directory, so it stays on plain strings and ``scandir``'s cached entry types (the idle
    CPU target of SPEC 6); symlinked task directories are included for the pipeline to refuse.
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


def _chunks(items: Sequence[MetaFileRef], size: int) -> Iterable[Sequence[MetaFileRef]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class Daemon:
    """Watch roots and post-flight their metadata files until told to stop."""

    def __init__(
        self,
        roots: Sequence[Path],
        config: Config,
        load_config: Callable[[], Config],
        *,
        notifier: SystemdNotifier | None = None,
    ) -> None:
        self.config = config
        self.policy = policy_from(config)
        self._load_config = load_config
        self.runs = RunTable()
        self._last_status = ""
        self._waker = Waker()
        self.dirty = DirtySet(self._waker.set)
        self._notifier = notifier if notifier is not None else SystemdNotifier()
        #: per-root notes for ``status`` (the polling fallback), kept in the user state dir.
        self._notes: dict[str, str] = {}
        self._roots = {root: self._root_state(root, config) for root in roots}
        self._journal: Journal | None = None
        # Re-applies outcomes a writer that ignored the lock reverted (issue 10).
        self.healer = Healer()
        self._pruner: JournalPruner | None = None
        self._stop = False
        self._reload = False
        self._next_supervise = 0.0
        self._next_rescan = 0.0
        self._next_ping = 0.0

    def _root_state(self, root: Path, config: Config) -> RootState:
        specs = root / config.specs_dir
        watch = RootWatch(
            root,
            specs,
            config.postflight.state_file,
            config.watch.observer,
            self.dirty,
            on_fallback=lambda why: self._fell_back(root, why),
        )
        return RootState(root, specs, watch, InstanceLock(specs))

    def _fell_back(self, root: Path, why: str) -> None:
        log.warning(
            "observer_fallback",
            root=str(root),
            reason=why,
            observer="polling",
            hint="raise fs.inotify.max_user_watches (sysctl) and send SIGHUP to watch again",
        )
        self._notes[str(root)] = f"polling: {why}"
        write_daemon_notes(self._notes)

    # --- signals ------------------------------------------------------------------------------

    def _on_stop(self, signum: int, _frame: FrameType | None) -> None:
        self._stop = True
        self._waker.set()

    def _on_hup(self, _signum: int, _frame: FrameType | None) -> None:
        self._reload = True
        self._waker.set()

    def _install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_thread_death(self, args: threading.ExceptHookArgs) -> None:
        # An exception in a handler kills watchdog's dispatcher thread silently (the observer
        # just stops delivering events): log it and let the supervisor restart the observer.
        log.error(
            "watcher_thread_died",
            thread=args.thread.name if args.thread else None,
            error=f"{args.exc_type.__name__}: {args.exc_value}",
        )
        self.dirty.request_check(None)

    # --- start and stop ------------------------------------------------------------------------

    def run(self) -> int:
        """Run until SIGTERM/SIGINT; return the exit code."""
        self._install_signals()
        for rs in self._roots.values():
            try:
                open_specs(rs.root, self.config.specs_dir).close()
            except RefusedError as exc:
                raise StateUnusableError(
                    f"{rs.specs_dir}: the specs directory {exc.strerror} (PF604); nothing is "
                    "watched through it: make it a plain directory inside the root"
                ) from None
            except OSError:
                raise UsageError(
                    f"{rs.root}: no {self.config.specs_dir}/ directory to watch "
                    "(give a project root holding one, or set specs_dir)"
                ) from None
        acquired: list[RootState] = []
        try:
            for rs in self._roots.values():
                rs.lock.acquire(rs.root)
                acquired.append(rs)
            return self._serve()
        finally:
            for rs in acquired:
                rs.lock.release()

    def _serve(self) -> int:
        previous_hook = threading.excepthook
        threading.excepthook = self._on_thread_death
        trap = install_overflow_trap(self.dirty)
        self._journal = Journal.open(journal_path(self.config.journal.path))
        self._start_pruner()
        try:
            # Start every observer first, then scan what is there: a file written between the
            # scan and the observer's start would otherwise be seen by neither.
            for rs in self._roots.values():
                self._start_watch(rs)
            for rs in self._roots.values():
                self._rescan(rs, "start", force=True)
            now = time.monotonic()
            self._next_supervise = now + SUPERVISE_S
            self._next_rescan = now + self.config.watch.rescan_interval_s
            self._last_status = self._status_line()
            self._notifier.notify("READY=1", f"STATUS={self._last_status}")
            log.info(
                "daemon_started",
                pid=os.getpid(),
                roots=[str(r) for r in self._roots],
                config=self.config.source or None,
            )
            while not self._stop:
                self._iterate()
            log.info("daemon_stopping", pid=os.getpid())
            self._notifier.notify("STOPPING=1")
        finally:
            for rs in self._roots.values():
                rs.watch.stop()
            if self._pruner is not None:
                self._pruner.stop()
            import logging

            logging.getLogger("watchdog").removeHandler(trap)
            threading.excepthook = previous_hook
            if self._journal is not None:
                self._journal.close()
            self._notifier.close()
            self._waker.close()
            remove_daemon_notes()
        log.info("daemon_stopped", pid=os.getpid())
        return 0

    def _start_pruner(self) -> None:
        if self._pruner is not None:
            self._pruner.stop()
            self._pruner = None
        journal = self._journal
        if journal is None or not journal.enabled or journal.path is None:
            return
        cfg = self.config.journal
        self._pruner = JournalPruner(journal.path, cfg.keep_days, cfg.max_content_mb)
        self._pruner.start()

    def _start_watch(self, rs: RootState) -> None:
        try:
            started = rs.watch.start()
        except OSError as exc:
            log.error(  # noqa: TRY400 - an expected condition: the message says it all
                "watch_failed", root=str(rs.root), error=exc.strerror or str(exc)
            )
            started = False
        if started:
            rs.missing = False
            log.info(
                "watching",
                root=str(rs.root),
                specs_dir=str(rs.specs_dir),
                observer=rs.watch.kind,
                reason=rs.watch.why,
                watches=rs.watch.watch_count or None,
            )
        else:
            rs.missing = True

    # --- the loop -----------------------------------------------------------------------------

    def _next_wake(self) -> float:
        """The monotonic time the loop must be awake at, at the latest."""
        mono, wall = time.monotonic(), time.time()
        candidates = [self._next_supervise, self._next_rescan]
        deadline = self.runs.next_deadline()
        if deadline is not None:
            candidates.append(mono + (deadline - wall) + DEADLINE_SLACK_S)
        settle = self.config.watch.settle_ms / 1000
        for rs in self._roots.values():
            if rs.deferred:
                candidates.append(min(rs.deferred.values()) + settle)
            if rs.lock_busy:
                candidates.append(rs.lock_retry_at)
            if rs.throttled:
                candidates.append(min(rs.throttled.values()))
            if rs.watch.kind == "polling":
                candidates.append(rs.next_poll)
        if self._notifier.watchdog_interval_s is not None:
            candidates.append(self._next_ping)
        return min(candidates)

    def _iterate(self) -> None:
        self._waker.wait(self._next_wake() - time.monotonic())
        if self._stop:
            return
        if self._reload:
            self._reload = False
            # sd_notify(3): RELOADING=1 while the configuration is re-read, READY=1 after.
            self._notifier.notify("RELOADING=1", "STATUS=reloading the configuration")
            try:
                self._reload_config()
            finally:
                self._last_status = self._status_line()
                self._notifier.notify("READY=1", f"STATUS={self._last_status}")
        pending = self.dirty.take()
        mono = time.monotonic()
        if pending.checks or mono >= self._next_supervise:
            self._supervise()
            missing = any(rs.missing for rs in self._roots.values())
            self._next_supervise = mono + (MISSING_RECHECK_S if missing else SUPERVISE_S)
        # Files named by events first: a rescan of a large root must not delay an agent's
        # postflight in another (or the same) root.
        self._process_events(pending)
        for target, reason in pending.rescans.items():
            for rs in self._targets(target):
                if reason == "event queue overflow":
                    log.warning("event_queue_overflow", root=str(rs.root))
                self._rescan(rs, reason, force=False)
        for rs in self._roots.values():
            if rs.watch.kind == "polling" and mono >= rs.next_poll and not self._stop:
                self._poll(rs)
        if mono >= self._next_rescan:
            started = time.monotonic()
            for rs in self._roots.values():
                self._rescan(rs, "periodic", force=False)
            cost = time.monotonic() - started
            # The safety net, not the mechanism: at 10,000 task directories a reconciliation
            # costs ~35 ms, which every 30 s is 0.12 % of a core; stretched so that it never
            # takes more than 1/PERIODIC_COST_FACTOR of a core (SPEC 6: idle <= 0.1 %).
            interval = max(self.config.watch.rescan_interval_s, cost * PERIODIC_COST_FACTOR)
            self._next_rescan = time.monotonic() + interval
        self._retry_settled()
        self._retry_lock_busy()
        self._check_stuck()
        self._notify_status()
        if self._notifier.watchdog_interval_s is not None and time.monotonic() >= self._next_ping:
            self._notifier.notify("WATCHDOG=1")
            self._next_ping = time.monotonic() + self._notifier.watchdog_interval_s

    def _process_events(self, pending: Pending) -> None:
        """Dirty paths from events: complete files now, files still being written later."""
        by_root: dict[Path, list[str]] = {}
        mono = time.monotonic()
        settle = self.config.watch.settle_ms / 1000
        for path, root in pending.paths.items():
            rs = self._roots.get(root)
            if rs is None:
                continue
            if path in pending.writing:
                # Modified (or created) and not closed yet: the writer may still be writing.
                # Parse success alone is not completion (a closing brace can come before the
                # last byte): wait for the close, or for settle_ms of quiet.
                rs.deferred[path] = mono
                rs.throttled.pop(path, None)
                continue
            last = rs.checked.get(path)
            if last is not None and mono - last < settle:
                # Checked less than a settle window ago: at most once per window.
                rs.throttled[path] = last + settle
                rs.deferred.pop(path, None)
                continue
            by_root.setdefault(root, []).append(path)
        for root in pending.state_changed:
            self._heal(root)
            held = self._roots[root].held if root in self._roots else set()
            by_root.setdefault(root, []).extend(held)
            held.clear()
        for root, paths in by_root.items():
            state = self._roots.get(root)
            if state is None or self._stop or not paths:
                continue
            for p in paths:
                state.deferred.pop(p, None)
            self._process(state, paths, report_unparsed=False)

    def _poll(self, rs: RootState) -> None:
        """A polling root (no events): rescan it, at a cost-bounded interval."""
        started = time.monotonic()
        self._rescan(rs, "poll", force=False)
        state = _identity(str(rs.specs_dir / self.config.postflight.state_file))
        if state != rs.state_identity:
            rs.state_identity = state
            if rs.held:
                held = list(rs.held)
                rs.held.clear()
                self._process(rs, held, report_unparsed=False)
        cost = time.monotonic() - started
        # Never more than about 2 % of a core on polling, whatever the tree's size.
        rs.next_poll = time.monotonic() + max(POLL_INTERVAL_S, cost * POLL_COST_FACTOR)

    def _heal(self, root: Path) -> None:
        """state.json changed: re-apply the recent outcomes a writer that ignored the lock lost.

        Before the held and dirty files are processed, so that a postflight of the same task
        never builds on the reverted entry.
        """
        if root not in self._roots or self._journal is None or self._stop:
            return
        try:
            self.healer.check(root, self.config, self._journal)
        except Exception as exc:  # healing is an aid: it must never stop the daemon
            log.exception("heal_failed", root=str(root), error=str(exc))

    def _targets(self, root: Path | None) -> list[RootState]:
        if root is None:
            return list(self._roots.values())
        rs = self._roots.get(root)
        return [rs] if rs is not None else []

    def _status_line(self) -> str:
        in_flight = sum(1 for r in self.runs if r.in_progress)
        stuck = sum(1 for r in self.runs if r.in_progress and r.stuck)
        stuck_s = f", {stuck} stuck" if stuck else ""
        return f"watching {len(self._roots)} root(s); {in_flight} run(s) in flight{stuck_s}"

    def _notify_status(self) -> None:
        """STATUS= for `systemctl status`, sent when the run table's summary changed."""
        line = self._status_line()
        if line != self._last_status:
            self._last_status = line
            self._notifier.notify(f"STATUS={line}")

    # --- supervision --------------------------------------------------------------------------

    def _supervise(self) -> None:
        for rs in self._roots.values():
            problem = rs.watch.problem()
            if problem is None:
                continue
            if not _plain_dir(rs.specs_dir):
                if not rs.missing:
                    rs.watch.stop()
                    rs.missing = True
                    log.warning(
                        "specs_dir_missing",
                        root=str(rs.root),
                        specs_dir=str(rs.specs_dir),
                        reason=problem,
                    )
                continue
            was_missing = rs.missing
            log.warning(
                "watch_restarted",
                root=str(rs.root),
                reason="the specs directory is back" if was_missing else problem,
            )
            old_identity = rs.watch.identity
            self._start_watch(rs)
            if rs.missing:
                continue
            if rs.watch.identity != old_identity:
                rs.lock = self._relocked(rs, rs.specs_dir)
            self._rescan(rs, "watch restarted", force=True)

    def _relocked(self, rs: RootState, specs_dir: Path) -> InstanceLock:
        """The instance lock taken in ``specs_dir`` (a new specs directory), the old one then
        released; the old one kept, and the loss logged, when the new one cannot be taken."""
        fresh = InstanceLock(specs_dir)
        try:
            fresh.acquire(rs.root)
        except (InstanceLockError, OSError) as exc:
            log.error(  # noqa: TRY400 - expected; no traceback
                "instance_lock_lost", root=str(rs.root), error=str(exc)
            )
            return rs.lock
        rs.lock.release()
        return fresh

    # --- scanning and processing -----------------------------------------------------------

    def _rescan(self, rs: RootState, reason: str, *, force: bool) -> None:
        """Events are hints, the directory is the truth: process whatever changed unseen.

        A file found changed is processed at once only if it has been quiet for settle_ms
        (its writer may still have it open: a rescan sees no close); otherwise it waits.
        """
        if force and self._journal is not None:
            # At start and after a restart of the watch, first what a killed run left behind
            # (an interrupted deletion may put a metadata file back).
            project = self._project(rs)
            for note in clean_litter(project, self.config, self._journal):
                log.warning("crash_leftover", root=str(rs.root), note=note)
        found: set[str] = set()
        dirty: list[str] = []
        wall = time.time()
        settle = self.config.watch.settle_ms / 1000
        identities, task_dirs = _metadata_identities(rs.specs_dir)
        for path, identity in identities:
            found.add(path)
            if force or path not in rs.identities or rs.identities[path] != identity:
                if wall - identity.mtime_ns / 1e9 < settle:
                    rs.deferred.setdefault(path, time.monotonic())
                elif path not in rs.deferred:
                    dirty.append(path)
        for key in self.runs.keys_for(str(rs.root)):
            path = str(rs.specs_dir / key[1] / META_NAME)
            if path not in found:
                dirty.append(path)
        for path in list(rs.identities):
            if path not in found:
                del rs.identities[path]
        if force:
            rs.state_problem = None
        added = rs.watch.ensure(task_dirs)
        quiet = reason in ("periodic", "poll") and not dirty and not added
        level = log.debug if quiet else log.info
        level(
            "rescan",
            root=str(rs.root),
            reason=reason,
            files=len(found),
            changed=len(dirty),
            watches_added=added or None,
        )
        if dirty:
            self._process(rs, dirty, report_unparsed=False)

    def _process(self, rs: RootState, paths: Iterable[str], *, report_unparsed: bool) -> None:
        refs: list[MetaFileRef] = []
        mono = time.monotonic()
        for path in dict.fromkeys(paths):
            meta = Path(path)
            task_dir = meta.parent
            if task_dir.parent != rs.specs_dir:
                continue  # a file of that name deeper down (in an artifact directory)
            rs.throttled.pop(path, None)
            if not os.path.lexists(path):
                # Deleted (by our own clean-up, or by another postflight): no need to read
                # state.json to know that.
                self._gone(rs, path)
                continue
            rs.checked[path] = mono
            # No symlink check here: the file is read (later) relative to its task directory,
            # opened then without following links, so a link is refused whenever it appears.
            refs.append(MetaFileRef(meta, task_dir.name))
        for n, chunk in enumerate(_chunks(refs, BATCH_MAX)):
            if self._stop:
                return  # the files stay on disk; the next start picks them up
            now = datetime.now(UTC)
            with self._project(rs) as project:
                if project.specs is None:
                    if project.specs_problem is not None:
                        log.error(
                            "specs_dir_refused", root=str(rs.root), problem=project.specs_problem
                        )
                    return  # kept; the supervisor follows the specs directory
                assert self._journal is not None
                try:
                    reports = postflight(
                        project,
                        chunk,
                        self.config,
                        self.policy,
                        self._journal,
                        now,
                        report_unparsed=report_unparsed,
                        lock_timeout_s=LOCK_WAIT_S,
                    )
                except LockTimeoutError as exc:
                    self._lock_busy(rs, [str(r.path) for r in refs[n * BATCH_MAX :]], exc)
                    return
                except Exception as exc:  # one bad batch must not stop the daemon
                    log.exception("postflight_failed", root=str(rs.root), error=str(exc))
                    continue
            if rs.lock_busy_since is not None and not rs.lock_busy:
                log.info(
                    "lock_free",
                    root=str(rs.root),
                    waited_s=round(time.monotonic() - rs.lock_busy_since, 1),
                )
                rs.lock_busy_since = None
            for report in reports:
                self._after(rs, report, now)

    def _lock_busy(self, rs: RootState, paths: Iterable[str], exc: LockTimeoutError) -> None:
        """Keep ``paths`` dirty until the project lock is free; say so once, not per attempt."""
        rs.lock_busy.update(paths)
        rs.lock_retry_at = time.monotonic() + LOCK_RETRY_S
        if rs.lock_busy_since is None:
            rs.lock_busy_since = time.monotonic()
            log.warning(
                "lock_busy",
                root=str(rs.root),
                error=str(exc),
                files=len(rs.lock_busy),
                retry_s=LOCK_RETRY_S,
            )

    def _retry_lock_busy(self) -> None:
        """Process the files a busy lock held back, once a probe finds the lock free."""
        for rs in self._roots.values():
            if not rs.lock_busy or self._stop or time.monotonic() < rs.lock_retry_at:
                continue
            try:
                # A probe first: validating (and journaling) every held file again each
                # second while another writer keeps the lock would only add noise.
                with self._project(rs) as project, project_lock(project.require_specs(), 0):
                    pass
            except LockTimeoutError:
                rs.lock_retry_at = time.monotonic() + LOCK_RETRY_S
                continue
            except (OSError, PostflightError):
                pass  # the lock file itself is the problem: postflight reports it
            paths = list(rs.lock_busy)
            rs.lock_busy.clear()
            self._process(rs, paths, report_unparsed=False)

    def _project(self, rs: RootState) -> Project:
        """``Project.open`` for this root: the specs directory opened for this batch only, so a
        specs directory replaced meanwhile is never written through (load_state reuses the
        parse of unchanged bytes)."""
        try:
            return Project.open(rs.root, self.config)
        except PostflightError as exc:
            # The specs directory became unreadable under the daemon (its permissions): the
            # files are kept and the daemon carries on, as for any other unusable project.
            state = StateView(
                rs.specs_dir / self.config.postflight.state_file, True, None, str(exc)
            )
            return Project(rs.root, rs.specs_dir, state, artifact_probe(rs.root), None, str(exc))

    def _gone(self, rs: RootState, path: str) -> None:
        rs.identities.pop(path, None)
        rs.deferred.pop(path, None)
        rs.checked.pop(path, None)
        rs.throttled.pop(path, None)
        rs.held.discard(path)
        key = (str(rs.root), Path(path).parent.name)
        ended = self.runs.ended(key, applied=False)
        if ended is not None:
            self._log_transition(ended)

    def _sighting(self, rs: RootState, report: FileReport) -> Sighting:
        v = report.validation
        return Sighting.from_doc(
            str(rs.root),
            report.path.parent.name,
            report.task,
            report.loaded.doc,
            operation=v.operation if v else None,
            started_at=v.started_at if v else None,
            timeout_s=v.timeout_s if v else None,
        )

    def _after(self, rs: RootState, report: FileReport, now: datetime) -> None:
        """Follow up one file's outcome: the run table, the log, retries."""
        path = str(report.path)
        outcome = report.outcome
        if outcome is Outcome.DEFERRED:
            # Maybe still being written: wait for its next event or for it to settle.
            rs.deferred.setdefault(path, time.monotonic())
            return
        rs.deferred.pop(path, None)
        if outcome is Outcome.GONE:
            self._gone(rs, path)
            return
        if outcome is Outcome.REWRITTEN:
            self.dirty.mark(rs.root, path)
            return
        if outcome is Outcome.INCOMPLETE:
            # In state.json, but TODO.md or errors.json could not be written (a full disk):
            # the file is kept, and forgetting its identity makes the next periodic rescan
            # apply it again, which completes the job.
            rs.identities.pop(path, None)
            log.error(
                "incomplete",
                **self._context(rs, report),
                problem=next((f.message for f in report.findings if f.code == "PF606"), None),
            )
            return
        if outcome is Outcome.APPLIED:
            rs.identities.pop(path, None)
            rs.checked.pop(path, None)
            rs.held.discard(path)
            for t in self.runs.finished(self._sighting(rs, report), now):
                self._log_transition(t)
            log.info(
                "applied",
                **self._context(rs, report),
                status=report.raw_status,
                warnings=[f.code for f in report.findings],
                notes=list(report.notes) or None,
            )
            return
        identity = report.loaded.identity
        new_content = rs.identities.get(path) != identity or identity is None
        rs.identities[path] = identity
        for t in self.runs.seen(self._sighting(rs, report), now):
            self._log_transition(t)
        if outcome is Outcome.STATE_UNUSABLE:
            rs.held.add(path)
            problem = next((f.message for f in report.findings if f.code == "PF604"), "PF604")
            if problem != rs.state_problem:
                rs.state_problem = problem
                log.error("state_unusable", **self._context(rs, report), problem=problem)
            return
        # PF602 (stuck) is the stuck timer's to report, once, with an errors.json record.
        errors = [f for f in report.findings if f.severity is Severity.ERROR and f.code != "PF602"]
        if new_content and (outcome is Outcome.INVALID or errors):
            log.warning(
                "invalid",
                **self._context(rs, report),
                status=report.raw_status,
                findings=[f"{f.code} {f.location}: {f.message}" for f in report.findings],
            )

    def _context(self, rs: RootState, report: FileReport) -> dict[str, Any]:
        return {
            "root": str(rs.root),
            "task": report.task,
            "session": report.session,
            "file": report.rel_path,
        }

    def _log_transition(self, t: Transition) -> None:
        s = t.run.sighting
        ctx: dict[str, Any] = {
            "root": s.root,
            "task": s.task,
            "session": s.session,
            "file": f"{self.config.specs_dir}/{s.task_dir}/{META_NAME}",
            "status": s.status,
        }
        if t.change is Change.REPLACED and t.previous is not None:
            log.warning(
                t.change.value,
                **ctx,
                code="PF603",
                replaced_session=t.previous.sighting.session,
                message=(
                    f"session {s.session} replaced the unfinished in_progress run of session "
                    f"{t.previous.sighting.session}"
                ),
            )
        elif t.change is Change.STUCK:
            elapsed = time.time() - s.started_at.timestamp() if s.started_at is not None else None
            log.error(
                t.change.value,
                **ctx,
                code="PF602",
                operation=s.operation,
                elapsed_s=round(elapsed, 1) if elapsed is not None else None,
                timeout_s=s.timeout_s,
            )
        else:
            log.info(
                t.change.value,
                **ctx,
                agent=s.agent,
                stage=s.stage,
                phases_completed=s.phases_completed,
                phases_total=s.phases_total,
            )

    def _retry_settled(self) -> None:
        """Read files once they have been quiet for ``settle_ms`` (still open, or unparsed),
        and complete files whose once-per-settle-window turn has come."""
        settle = self.config.watch.settle_ms / 1000
        mono, wall = time.monotonic(), time.time()
        for rs in self._roots.values():
            turn = [path for path, due_at in rs.throttled.items() if due_at <= mono]
            if turn and not self._stop:
                self._process(rs, turn, report_unparsed=False)
            due: list[str] = []
            for path, last in list(rs.deferred.items()):
                if mono - last < settle:
                    continue
                try:
                    age = wall - os.lstat(path).st_mtime
                except OSError:
                    age = settle
                if age < settle:
                    # Written since its last event reached us (we may lag behind a fast
                    # writer): the file is not quiet yet, whatever the event times say.
                    rs.deferred[path] = mono - max(age, 0.0)
                    continue
                del rs.deferred[path]
                due.append(path)
            if due and not self._stop:
                self._process(rs, due, report_unparsed=True)

    def _check_stuck(self) -> None:
        now = datetime.now(UTC)
        for run in self.runs.due(now):
            rs = self._roots.get(Path(run.sighting.root))
            if rs is None or self._stop:
                continue
            path = rs.specs_dir / run.sighting.task_dir / META_NAME
            # Closed when it goes out of scope (the tree closes a forgotten Directory).
            project = self._project(rs)
            report = check_file(
                project, MetaFileRef(path, run.sighting.task_dir), self.config, self.policy, now
            )
            if not report.path.exists():
                self._gone(rs, str(path))
                continue
            if not report.stuck:
                # The file changed since it was last read (a new started_at, a final status).
                for t in self.runs.seen(self._sighting(rs, report), now):
                    self._log_transition(t)
                current = self.runs.get(run.key)
                deadline = current.deadline if current is not None else None
                if deadline is not None and now.timestamp() > deadline:
                    self.runs.mark_stuck(run.key)  # never spin on a deadline in the past
                continue
            self.runs.seen(self._sighting(rs, report), now)
            flagged = self.runs.mark_stuck(run.key)
            if flagged is None:
                continue
            self._log_transition(flagged)
            assert self._journal is not None
            try:
                record_stuck(project, report, self.config, self._journal, now, LOCK_WAIT_S)
            except (OSError, PostflightError) as exc:
                log.error(  # noqa: TRY400 - expected; no traceback
                    "stuck_record_failed", **self._context(rs, report), error=str(exc)
                )

    # --- SIGHUP ---------------------------------------------------------------------------

    def _reload_config(self) -> None:
        try:
            new = self._load_config()
            policy = policy_from(new)
        except (PostflightError, ValueError) as exc:
            log.error(  # noqa: TRY400 - expected; no traceback
                "config_reload_failed", error=str(exc), kept=self.config.source or None
            )
            return
        old = self.config
        self.config, self.policy = new, policy
        if new.log != old.log:
            configure_logging(new.log.format, new.log.level)
        if new.journal != old.journal and self._journal is not None:
            self._journal.close()
            self._journal = Journal.open(journal_path(new.journal.path))
            self._start_pruner()
        # A root that fell back to polling tries inotify again (the limit may be raised).
        fell_back = any(rs.watch.fallback for rs in self._roots.values())
        if fell_back:
            self._notes.clear()
            write_daemon_notes(self._notes)
        rewatch = (
            fell_back
            or new.specs_dir != old.specs_dir
            or new.watch.observer != old.watch.observer
            or new.postflight.state_file != old.postflight.state_file
        )
        if new.watch.roots != old.watch.roots:
            log.warning("config_roots_ignored", reason="roots are fixed until the daemon restarts")
        log.info("config_reloaded", config=new.source or None, rewatch=rewatch)
        for root, rs in list(self._roots.items()):
            if rewatch:
                rs.watch.stop()
                fresh = self._root_state(root, new)
                moved = fresh.specs_dir != rs.specs_dir
                fresh.lock = self._relocked(rs, fresh.specs_dir) if moved else rs.lock
                self._roots[root] = fresh
                self._start_watch(fresh)
            # Timeouts or rules may have changed: re-read everything once.
            self._rescan(self._roots[root], "configuration reloaded", force=True)
        self._next_rescan = time.monotonic() + new.watch.rescan_interval_s


# --- journal retention ------------------------------------------------------------------------


class JournalPruner(threading.Thread):
    """Prunes the journal in the background (``[journal] keep_days``, ``max_content_mb``).

    Its own connection, chunked transactions (``Journal.prune``): the loop's commits never
    wait for more than one chunk. First run shortly after start, then every PRUNE_EVERY_S.
    """

    def __init__(self, path: Path, keep_days: float, max_content_mb: float) -> None:
        super().__init__(name="postflightd-journal-pruner", daemon=True)
        self._path = path
        self._keep_days = keep_days
        self._max_bytes = int(max_content_mb * 1024 * 1024)
        self.stopped = threading.Event()

    def run(self) -> None:
        delay = PRUNE_FIRST_S
        while not self.stopped.wait(delay):
            delay = PRUNE_EVERY_S
            journal = Journal.open(self._path)
            try:
                if not journal.enabled:
                    continue
                result = journal.prune(
                    keep_days=self._keep_days,
                    max_content_bytes=self._max_bytes,
                    stop=self.stopped,
                )
            finally:
                journal.close()
            if result.rows or result.contents:
                log.info(
                    "journal_pruned",
                    path=str(self._path),
                    rows=result.rows,
                    contents=result.contents,
                    keep_days=self._keep_days,
                )

    def stop(self) -> None:
        self.stopped.set()
        self.join(2.0)
