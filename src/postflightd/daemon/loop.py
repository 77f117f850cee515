"""``postflightd watch``: the loop turning file events into postflight, and its supervision.

The loop thread keeps the signals, the wake-up, systemd's notifications, SIGHUP's reload and
the heap trim; every root's file work (validation, postflight, stuck detection, rescans, the
supervisor's look at its specs directory) runs on that root's worker thread (``turns``), as a
*turn* the loop hands over with what collected for it: its dirty paths, its due timers, its
supervision check. So a root whose filesystem hangs (a hard NFS mount that stopped answering)
blocks its own worker in a syscall and nothing else: the other roots' postflights go on, and
the loop reports it (``root_stalled`` after ``turns.STALL_S``, then ``root_resumed`` and a
forced rescan when it answers again). Each root's work stays in order, one turn at a time,
and a signal only ever lands between two commits. The watches' threads only hand dirty paths
over (``watch.dirty.DirtySet``); the journal pruner works on its own connection. The loop
sleeps in ``select`` on a self-pipe until the next thing that can be due: an event, a turn
coming back, the stuck deadline of an idle root's earliest run, a deferred (half-written)
file's settle time, the supervisor's check, the periodic rescan, a busy root's stall
threshold, or the systemd watchdog ping. There is no per-second polling of the runs.

What is done for one root's files is ``root.WatchedRoot``'s; this module keeps the loop, the
hand-over of turns, the signals, and SIGHUP's reload. Why this module stays whole at about 760
lines: those share the loop's deadlines (what ``select`` waits for is the earliest of
them all) and the roots' busy state, which a split would pass back and forth.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Final

from postflightd.config import Config, policy_from
from postflightd.daemon.memtrim import TRIM_AFTER_S, trim_heap
from postflightd.daemon.notes import STALLED, DaemonNotes, remove_daemon_notes
from postflightd.daemon.pruner import JournalPruner
from postflightd.daemon.root import Clock, Shared, WatchedRoot
from postflightd.daemon.sdnotify import SystemdNotifier
from postflightd.daemon.turns import TURN_GRACE_S, RootWorker, Work, stall_after_s
from postflightd.daemon.watch.dirty import DirtySet, Pending
from postflightd.daemon.watch.observer import OverflowTrap, install_overflow_trap
from postflightd.errors import ConfigError, PostflightError, StateUnusableError, UsageError
from postflightd.fs.directory import RefusedError, open_specs
from postflightd.fs.locks import InstanceLock
from postflightd.journal.database import Journal, journal_path
from postflightd.logs import configure_logging, get_logger
from postflightd.rules.findings import Policy, state_unusable_text
from postflightd.runs.table import RunTable
from postflightd.words import counted

log = get_logger()

#: How often the supervisor checks that each observer is alive and on the right directory.
SUPERVISE_S: Final = 2.0
#: How often the supervisor looks for a missing specs directory to come back.
MISSING_RECHECK_S: Final = 0.25
#: The periodic reconciliation runs every rescan_interval_s, or this many times its last
#: cost if that is longer (at most 0.05 % of a core).
PERIODIC_COST_FACTOR: Final = 2000.0
#: A stuck timer fires this long after the deadline, so ``now > deadline`` holds when it does.
DEADLINE_SLACK_S: Final = 0.005
#: On SIGTERM, how long the roots' turns in flight may take to finish their commit (each
#: starts no new batch once told to stop); a root still busy then (hung) is left to its
#: daemon thread, and the process exits all the same, within the 2 s a stop promises.
STOP_WAIT_S: Final = 1.5
#: What ``root_skipped`` tells the person to do.
SKIPPED_HINT: Final = "fix it, then send SIGHUP to watch this root"


# --- the loop's wake-up ---------------------------------------------------------------------


class Waker:
    """A self-pipe: the watchers' threads and signals both wake the loop's ``select``.

    A pipe rather than a ``threading.Event``: a signal handler that sets an Event can deadlock
    on the Event's internal lock if the signal lands while the main thread holds it.
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        for fd in (self._r, self._w):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)

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


@dataclass(slots=True)
class Timers:
    """When the loop's own chores are next due (monotonic): the supervisor's check, the
    systemd watchdog's ping, and the heap trim, a second after work (None: no work since the
    last trim)."""

    supervise: float = 0.0
    ping: float = 0.0
    trim: float | None = None


@dataclass(slots=True)
class Reconciliation:
    """The periodic reconciliation: when it is next due (monotonic), what each root's last one
    cost, and the roots whose turn in flight carries one (its cost is known when it comes
    back)."""

    next_at: float = 0.0
    costs: dict[Path, float] = field(default_factory=dict)
    out: set[Path] = field(default_factory=set)

    def cost(self) -> float:
        """What the last reconciliation of every root cost, in all."""
        return sum(self.costs.values())


def _check_specs(root: Path, config: Config) -> None:
    """Refuse to start on a root whose specs directory is missing, or is not a plain one."""
    try:
        open_specs(root, config.specs_dir).close()
    except RefusedError as exc:
        raise StateUnusableError(
            state_unusable_text(f"{root / config.specs_dir}: the specs directory {exc.strerror}")
            + "; nothing is watched through it: make it a plain directory inside the root"
        ) from None
    except OSError:
        raise UsageError(
            f"{root}: no {config.specs_dir}/ directory to watch "
            "(give a project root holding one, or set specs_dir)"
        ) from None


class Daemon:
    """Watch roots and post-flight their metadata files until told to stop.

    ``run`` is the command: signals, ``open``, the loop, ``close``. Tests drive the same
    steps in-process (``open``, ``request_reload``, ``iterate``, ``close``) with a fake
    ``clock``.
    """

    def __init__(
        self,
        roots: Sequence[Path],
        config: Config,
        load_config: Callable[[Path | None], Config],
        *,
        notifier: SystemdNotifier | None = None,
        clock: Clock | None = None,
        stall_s: float | None = None,
    ) -> None:
        self._root_paths = list(dict.fromkeys(roots))
        #: the user's configuration (None: ``load_config(None)``), whose process-wide settings
        #: (journal, log, observer, rescan interval) the daemon uses; each root's own
        #: configuration is ``load_config(root)``, read in ``open`` and on SIGHUP.
        self._start_config = config
        self._load_config = load_config
        self._clock = clock if clock is not None else Clock()
        self.runs = RunTable()
        self._last_status = ""
        self._waker = Waker()
        self.dirty = DirtySet(self._waker.set)
        self._notifier = notifier if notifier is not None else SystemdNotifier()
        #: per-root notes for ``status`` (the polling fallback; a stalled root), kept in the
        #: user state dir.
        self._notes = DaemonNotes()
        #: each root's worker and the work collected for it since its last turn (set by open).
        #: A skipped root's worker, while it is tried again, returns None when it is still
        #: skipped.
        self._workers: dict[Path, RootWorker[WatchedRoot | None]] = {}
        self._work: dict[Path, Work] = {}
        self._periodic = Reconciliation()
        #: journals replaced by a reload while a root's turn could still be writing to them.
        self._retired: list[Journal] = []
        #: how long a turn may go on before its root is reported stalled.
        self._stall_s = stall_s if stall_s is not None else stall_after_s()
        #: set by ``open``: what the roots share, and each root's work.
        self._shared: Shared | None = None
        self._roots: dict[Path, WatchedRoot] = {}
        #: the roots not watched because their configuration did not load at the start (each
        #: tried again on SIGHUP, on a worker of its own).
        self._skipped: list[Path] = []
        self._pruner: JournalPruner | None = None
        self._trap: OverflowTrap | None = None
        self._previous_hook: Callable[[threading.ExceptHookArgs], object] | None = None
        self._closed = False
        self._stop = False
        self._reload = False
        self._timers = Timers()

    @property
    def config(self) -> Config:
        """The user's configuration in force (the one a SIGHUP loaded, once it succeeded);
        each root's own is ``roots[i].config``."""
        return self._shared.config if self._shared is not None else self._start_config

    @property
    def roots(self) -> Sequence[WatchedRoot]:
        return list(self._roots.values())

    def _running(self) -> Shared:
        if self._shared is None:
            raise RuntimeError("the daemon is not open: call Daemon.open() first")
        return self._shared

    def _fell_back(self, root: Path, why: str) -> None:
        log.warning(
            "observer_fallback",
            root=str(root),
            reason=why,
            observer="polling",
            hint="raise fs.inotify.max_user_watches (sysctl) and send SIGHUP to watch again",
        )
        self._notes.fell_back(root, why)

    # --- signals ------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """What SIGTERM and SIGINT do: stop before the next batch (safe in a signal handler)."""
        self._stop = True
        self._waker.set()

    def request_reload(self) -> None:
        """What SIGHUP does: re-read the configuration at the loop's next turn."""
        self._reload = True
        self._waker.set()

    def _on_stop(self, _signum: int, _frame: FrameType | None) -> None:
        self.request_stop()

    def _on_hup(self, _signum: int, _frame: FrameType | None) -> None:
        self.request_reload()

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
        try:
            self.open()
            while not self._stop:
                self.iterate()
            log.info("daemon_stopping", pid=os.getpid())
            self._notifier.notify("STOPPING=1")
        finally:
            self.close()
        log.info("daemon_stopped", pid=os.getpid())
        return 0

    def open(self) -> None:
        """Take each root's instance lock, open the journal, watch, reconcile; then READY=1.

        A root whose configuration does not load is skipped (``root_skipped``). Raises,
        holding no lock, when every root is skipped, when a specs directory is missing or
        refused, or when another daemon holds a root; ``close`` is due either way.
        """
        # A file that is not clean is checked with the models' stored schema (a clean one
        # needs no validator): its validator built now, not inside the first such file's check.
        from postflightd.models.metadata_core import validator

        validator()

        config = self._start_config
        # Each root's own configuration, all read before anything is locked or watched. A root
        # whose file is bad, or whose specs directory is missing or a link (its file may name
        # one it lacks; its agents may move it), is skipped with its reason (SIGHUP tries it
        # again): one project must not stop the others' postflight. With every root skipped
        # there is nothing to watch: exit 2 with the reasons.
        configs: dict[Path, Config] = {}
        problems: list[str] = []
        for root in self._root_paths:
            loaded = self._root_config(root, "root_skipped", hint=SKIPPED_HINT)
            if isinstance(loaded, str):
                self._skipped.append(root)
                problems.append(loaded)
                continue
            try:
                _check_specs(root, loaded[0])
            except PostflightError as exc:
                if len(self._root_paths) == 1:
                    raise  # the one root asked for: its own error and exit code
                log.error("root_skipped", root=str(root), error=str(exc), hint=SKIPPED_HINT)  # noqa: TRY400 - expected
                self._skipped.append(root)
                problems.append(str(exc))
                continue
            configs[root] = loaded[0]
        if not configs:
            raise ConfigError("nothing to watch: " + "; ".join(problems))
        locks: dict[Path, InstanceLock] = {}
        try:
            for root, root_config in configs.items():
                lock = InstanceLock(root / root_config.specs_dir)
                lock.acquire(root)
                locks[root] = lock
        except BaseException:
            for lock in locks.values():
                lock.release()
            raise
        self._previous_hook = threading.excepthook
        threading.excepthook = self._on_thread_death
        self._trap = install_overflow_trap(self.dirty)
        journal = Journal.open(journal_path(config.journal.path))
        shared = Shared(
            config,
            journal,
            self.runs,
            self.dirty,
            self._clock,
            stopping=lambda: self._stop,
        )
        self._shared = shared
        self._roots = {
            root: WatchedRoot(root, configs[root], shared, lock, self._fell_back)
            for root, lock in locks.items()
        }
        self._work = {root: Work() for root in self._roots}
        self._periodic.costs = dict.fromkeys(self._roots, 0.0)
        try:
            self._start_pruner()
            # Start every observer first, then scan what is there: a file written between the
            # scan and the observer's start would otherwise be seen by neither.
            for wr in self._roots.values():
                wr.start_watch()
            for wr in self._roots.values():
                wr.rescan("start", force=True)
            # The start is done in this thread (a root that hangs already holds the start, as
            # its lock and its specs directory are checked here); from now on each root's
            # work runs on its own worker.
            self._workers = {
                root: RootWorker[WatchedRoot | None](str(root), self._waker.set)
                for root in self._roots
            }
            now = self._clock.monotonic()
            self._timers.supervise = now + SUPERVISE_S
            self._periodic.next_at = now + config.watch.rescan_interval_s
            self._timers.trim = now + TRIM_AFTER_S  # what the imports and the start scan left
            self._last_status = self._status_line()
            self._notifier.notify("READY=1", f"STATUS={self._last_status}")
            log.info(
                "daemon_started",
                pid=os.getpid(),
                roots=[str(r) for r in self._roots],
                config=config.source or None,
                # Only the roots with a configuration file of their own.
                root_configs={
                    str(r): wr.config.source for r, wr in self._roots.items() if wr.config.source
                },
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop watching, close the journal, release the instance locks (once)."""
        if self._closed:
            return
        self._closed = True
        hung = self._settle_workers()
        try:
            for root, wr in self._roots.items():
                if root not in hung:
                    wr.watch.stop()
            if self._pruner is not None:
                self._pruner.stop()
                self._pruner = None
            if self._trap is not None:
                self._trap.remove()
                self._trap = None
            if self._previous_hook is not None:
                threading.excepthook = self._previous_hook
                self._previous_hook = None
            if self._shared is not None:
                self._shared.journal.close()
            for journal in self._retired:
                journal.close()
            self._notifier.close()
            self._waker.close()
            remove_daemon_notes()
        finally:
            # The roots' current locks: a reload or a replaced specs directory may have moved
            # them since ``open``. Not a hung root's: closing a file on a filesystem that does
            # not answer blocks too; the kernel drops its lock when the process exits.
            for root, wr in self._roots.items():
                if root not in hung:
                    wr.lock.release()

    def _settle_workers(self) -> set[Path]:
        """Let the turns in flight finish their commit (up to STOP_WAIT_S); the roots still
        busy after it (hung), which close leaves alone."""
        deadline = time.monotonic() + STOP_WAIT_S
        for worker in self._workers.values():
            if worker.busy and worker.stalled_at is None:
                worker.wait(max(0.0, deadline - time.monotonic()))
        for root, worker in self._workers.items():
            if worker.returned():
                with contextlib.suppress(Exception):  # stopping: its failure changes nothing
                    self._take(root, worker)
        hung = {root for root, worker in self._workers.items() if worker.busy}
        for root in hung:
            log.warning(
                "root_left_stalled", root=str(root), doing=self._workers[root].doing or None
            )
        for worker in self._workers.values():
            worker.close()
        return hung

    def _start_pruner(self) -> None:
        if self._pruner is not None:
            self._pruner.stop()
            self._pruner = None
        shared = self._running()
        journal = shared.journal
        if not journal.enabled or journal.path is None:
            return
        cfg = shared.config.journal
        self._pruner = JournalPruner(journal.path, cfg.keep_days, cfg.max_content_mb)
        self._pruner.start()

    # --- the loop -----------------------------------------------------------------------------

    def _next_wake(self) -> float:
        """The monotonic time the loop must be awake at, at the latest."""
        mono, wall = self._clock.monotonic(), self._clock.wall()
        if self.dirty.roots_waiting():
            return mono
        timers = self._timers
        candidates = [timers.supervise, self._periodic.next_at]
        for root, wr in self._roots.items():
            worker = self._workers.get(root)
            if worker is not None and worker.busy:
                # Its own timers are its turn's; only its stall threshold is the loop's.
                if worker.stalled_at is None:
                    candidates.append(worker.started_at + self._stall_s)
                continue
            if (worker is not None and worker.returned()) or self._work.get(root):
                return mono
            candidates.extend(wr.next_due())
            deadline = self.runs.next_deadline(str(root))
            if deadline is not None:
                candidates.append(mono + (deadline - wall) + DEADLINE_SLACK_S)
        if self._notifier.watchdog_interval_s is not None:
            candidates.append(timers.ping)
        if timers.trim is not None:
            candidates.append(timers.trim)
        return min(candidates)

    def iterate(self) -> None:
        """One turn of the loop: sleep until something is due (or an event), then hand each
        root its work and wait, up to TURN_GRACE_S, for those turns to come back."""
        clock = self._clock
        self._waker.wait(self._next_wake() - clock.monotonic())
        self._collect()
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
        self._gather(pending)
        mono = clock.monotonic()
        timers, periodic = self._timers, self._periodic
        if mono >= timers.supervise:
            for work in self._work.values():
                work.check = True
            timers.supervise = mono + SUPERVISE_S
        if mono >= periodic.next_at:
            for work in self._work.values():
                work.periodic = True
            # The safety net, not the mechanism: at 10,000 task directories a reconciliation
            # costs ~35 ms, which every 30 s is 0.12 % of a core; stretched so that it never
            # takes more than 1/PERIODIC_COST_FACTOR of a core (idle <= 0.1 %).
            cost = periodic.cost()
            interval = max(self.config.watch.rescan_interval_s, cost * PERIODIC_COST_FACTOR)
            periodic.next_at = mono + interval
        handed, worked = self._hand_out(mono)
        self._wait_for(handed)
        self._collect()
        if any(wr.missing for root, wr in self._roots.items() if not self._workers[root].busy):
            timers.supervise = min(timers.supervise, mono + MISSING_RECHECK_S)
        self._check_stalls()
        self._notify_status()
        if self._notifier.watchdog_interval_s is not None and clock.monotonic() >= timers.ping:
            self._notifier.notify("WATCHDOG=1")
            timers.ping = clock.monotonic() + self._notifier.watchdog_interval_s
        self._trim_when_quiet(worked)

    def _trim_when_quiet(self, worked: bool) -> None:
        """Give the heap's free pages back TRIM_AFTER_S after work (memtrim), at most that often.

        Not postponed while work goes on: a polling root works every second and would never
        see a quiet one, and a trim costs 0.01-0.2 ms, nothing beside a postflight.
        """
        now = self._clock.monotonic()
        timers = self._timers
        if timers.trim is not None and now >= timers.trim:
            timers.trim = None
            if self._shared is not None:
                self._shared.journal.release_memory()
            if trim_heap():
                log.debug("heap_trimmed")
        if worked and timers.trim is None:
            timers.trim = now + TRIM_AFTER_S

    # --- the roots' turns ---------------------------------------------------------------------

    def _gather(self, pending: Pending) -> None:
        """File what the watchers handed over under each root's work (kept while it is busy)."""
        for path, root in pending.paths.items():
            work = self._work.get(root)
            if work is not None:
                work.add_event(path, writing=path in pending.writing)
        for root in pending.state_changed:
            if root in self._work:
                self._work[root].state_changed = True
        for target, reason in pending.rescans.items():
            for root in self._targets(target):
                if self._work[root].rescan is None:
                    self._work[root].rescan = reason
        for target in pending.checks:
            for root in self._targets(target):
                self._work[root].check = True

    def _hand_out(self, mono: float) -> tuple[list[RootWorker[WatchedRoot | None]], bool]:
        """Give each idle root with something to do its turn; the workers handed one, and
        whether any of it was work (files, a rescan, a poll) for the heap trim."""
        handed: list[RootWorker[WatchedRoot | None]] = []
        worked = False
        wall = self._clock.wall()
        for root, wr in self._roots.items():
            worker = self._workers[root]
            if worker.busy or worker.returned():
                continue
            work = self._work[root]
            polling = wr.watch.kind == "polling" and mono >= wr.next_poll
            deadline = self.runs.next_deadline(str(root))
            timers = any(t <= mono for t in wr.next_due()) or (
                deadline is not None and wall > deadline
            )
            if not work and not timers:
                continue
            worked = worked or work.worked or polling
            if work.periodic:
                self._periodic.out.add(root)
            self._work[root] = Work()
            worker.hand(functools.partial(self._turn, wr, work, worker), mono)
            handed.append(worker)
        return handed, worked

    def _wait_for(self, handed: Sequence[RootWorker[WatchedRoot | None]]) -> None:
        """Wait for the turns just handed out to come back, so that one turn of the loop does
        what it started; but no longer than TURN_GRACE_S, nor once new work arrives for an
        idle root or a stop: a hung root is never waited for."""
        deadline = time.monotonic() + TURN_GRACE_S
        while not self._stop and any(worker.busy for worker in handed):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._waker.wait(left)
            for root in self.dirty.roots_waiting():
                if root is None or (root in self._workers and not self._workers[root].busy):
                    return

    def _turn(
        self, wr: WatchedRoot, work: Work, worker: RootWorker[WatchedRoot | None]
    ) -> WatchedRoot:
        """One root's turn, on its worker: its work in the order the loop always did it; the
        root as it is after (a reload may replace it)."""
        clock = self._clock
        if work.reload:
            worker.doing = "reloading its configuration"
            wr = self._reload_root(wr, retry=work.retry_watch)
        if work.check:
            worker.doing = "checking its specs directory"
            wr.supervise()
        # Files named by events first: a rescan of a large root must not delay an agent's
        # postflight.
        if work.paths or work.state_changed:
            worker.doing = f"post-flighting {counted(len(work.paths), 'file')}"
            wr.on_events(list(work.paths), work.writing, work.state_changed)
        if work.rescan is not None:
            if work.rescan == "event queue overflow":
                log.warning("event_queue_overflow", root=str(wr.root))
            worker.doing = f"rescanning ({work.rescan})"
            wr.rescan(work.rescan, force=False)
        if work.resumed:
            worker.doing = "rescanning (root resumed)"
            wr.rescan("root resumed", force=True)
        if wr.watch.kind == "polling" and clock.monotonic() >= wr.next_poll and not self._stop:
            worker.doing = "polling"
            wr.poll()
        if work.periodic:
            worker.doing = "rescanning (periodic)"
            started = clock.monotonic()
            wr.rescan("periodic", force=False)
            self._periodic.costs[wr.root] = clock.monotonic() - started
        worker.doing = "retrying files"
        wr.retry_settled()
        wr.retry_lock_busy()
        now = clock.now()
        for run in self.runs.due(now, str(wr.root)):
            if self._stop:
                break
            worker.doing = f"reading the stuck run of {run.sighting.task_dir}"
            wr.check_stuck(run, now)
        worker.doing = ""
        return wr

    def _collect(self) -> None:
        """Take back the roots whose turn came back; a stalled one resumes with a rescan."""
        mono = self._clock.monotonic()
        for root, worker in self._workers.items():
            if not worker.returned():
                continue
            stalled_at, worker.stalled_at = worker.stalled_at, None
            watched = self._take(root, worker)
            periodic = self._periodic
            if root in periodic.out:
                # A periodic reconciliation that proved costly (a big tree, a busy lock) pushes
                # the next one back, as measured once it is done. Only a turn that carried one:
                # every other turn pushing it would postpone it for as long as work goes on.
                periodic.out.discard(root)
                periodic.next_at = max(
                    periodic.next_at, mono + periodic.cost() * PERIODIC_COST_FACTOR
                )
            if stalled_at is None:
                continue
            log.info("root_resumed", root=str(root), stalled_s=round(mono - worker.started_at, 1))
            if watched:
                # Events may have been lost while it hung (an overflow nobody read): look again.
                self._work[root].resumed = True
            self._notes.resumed(root)

    def _take(self, root: Path, worker: RootWorker[WatchedRoot | None]) -> bool:
        """The root's turn that came back taken; whether the root is watched (a skipped root
        tried again is from now on, or stays skipped: None)."""
        wr = worker.take()
        if wr is None:
            return False
        if root in self._skipped:
            self._skipped.remove(root)
            self._work[root] = Work()
            self._periodic.costs[root] = 0.0
        self._roots[root] = wr
        return True

    def _check_stalls(self) -> None:
        """Report (once) each root whose turn has gone on past the stall threshold."""
        mono = self._clock.monotonic()
        for root, worker in self._workers.items():
            if not worker.busy or worker.stalled_at is not None:
                continue
            if mono - worker.started_at < self._stall_s:
                continue
            worker.stalled_at = mono
            doing = worker.doing or None
            log.warning(
                "root_stalled",
                root=str(root),
                stalled_s=round(mono - worker.started_at, 1),
                doing=doing,
                hint="its filesystem does not answer (a hard network mount?): the other "
                "roots go on; it resumes with a rescan when it answers",
            )
            since = datetime.fromtimestamp(
                self._clock.wall() - (mono - worker.started_at), UTC
            ).strftime("%H:%M:%S UTC")
            self._notes.stalled(root, f"{STALLED} since {since}" + (f" ({doing})" if doing else ""))

    @property
    def busy(self) -> list[Path]:
        """The roots whose turn is in flight."""
        return [root for root, w in self._workers.items() if w.busy]

    @property
    def stalled(self) -> list[Path]:
        """The roots whose turn is past the stall threshold."""
        return [root for root, w in self._workers.items() if w.stalled_at is not None]

    def _targets(self, root: Path | None) -> list[Path]:
        if root is None:
            return list(self._roots)
        return [root] if root in self._roots else []

    def _status_line(self) -> str:
        in_flight = sum(1 for r in self.runs if r.in_progress)
        stuck = sum(1 for r in self.runs if r.in_progress and r.stuck)
        stuck_s = f", {stuck} stuck" if stuck else ""
        stalled = len(self.stalled)
        stalled_s = f"; {counted(stalled, 'root')} stalled" if stalled else ""
        return (
            f"watching {counted(len(self._roots), 'root')}; "
            f"{counted(in_flight, 'run')} in flight{stuck_s}{stalled_s}"
        )

    def _notify_status(self) -> None:
        """STATUS= for `systemctl status`, sent when the run table's summary changed."""
        line = self._status_line()
        if line != self._last_status:
            self._last_status = line
            self._notifier.notify(f"STATUS={line}")

    # --- SIGHUP ---------------------------------------------------------------------------

    def _reload_config(self) -> None:
        """Re-read the user's configuration; each root re-reads its own at its next turn
        (its file is in the root, whose filesystem may hang). Whatever fails to load is logged
        and its old configuration kept (the other roots carry on with their new one)."""
        shared = self._running()
        try:
            new = self._load_config(None)
        except (PostflightError, ValueError) as exc:
            # Every root's configuration takes the user's process-wide settings: keep them all.
            log.error(  # noqa: TRY400 - expected; no traceback
                "config_reload_failed", error=str(exc), kept=shared.config.source or None
            )
            return
        old = shared.config
        shared.config = new
        if new.log != old.log:
            configure_logging(new.log.format, new.log.level)
        if new.journal != old.journal:
            previous = shared.journal
            shared.journal = Journal.open(journal_path(new.journal.path))
            if any(worker.busy for worker in self._workers.values()):
                # A root's turn may be writing to it: closed at the stop instead.
                self._retired.append(previous)
            else:
                previous.close()
            self._start_pruner()
        # A root that fell back to polling tries inotify again (the limit may be raised).
        fell_back = any(
            wr.watch.fallback
            for root, wr in self._roots.items()
            if not (root in self._workers and self._workers[root].busy)
        )
        if fell_back:
            self._notes.clear_fallbacks()
        if new.watch.roots != old.watch.roots:
            log.warning(
                "config_roots_ignored",
                reason="[watch] roots changed: restart the daemon to watch the new roots",
            )
        retry = fell_back or new.watch.observer != old.watch.observer
        for work in self._work.values():
            work.reload = True
            work.retry_watch = work.retry_watch or retry
        self._retry_skipped()
        self._periodic.next_at = self._clock.monotonic() + new.watch.rescan_interval_s

    def _root_config(
        self, root: Path, event: str, **context: object
    ) -> tuple[Config, Policy] | str:
        """``root``'s own configuration and policy; or, when it does not load, the problem,
        logged as ``event`` naming the root (with ``context``)."""
        try:
            config = self._load_config(root)
            return config, policy_from(config)
        except (PostflightError, ValueError) as exc:
            log.error(event, root=str(root), error=str(exc), **context)  # noqa: TRY400 - expected
            return str(exc)

    def _retry_skipped(self) -> None:
        """SIGHUP: each root skipped so far tried again, on a worker of its own (its file is in
        the root, whose filesystem may hang)."""
        for root in self._skipped:
            worker = self._workers.get(root)
            if worker is None:
                worker = RootWorker[WatchedRoot | None](str(root), self._waker.set)
                self._workers[root] = worker
            if worker.busy or worker.returned():
                continue  # the last try is not back yet
            turn = functools.partial(self._watch_skipped, root, worker)
            worker.hand(turn, self._clock.monotonic())

    def _watch_skipped(
        self, root: Path, worker: RootWorker[WatchedRoot | None]
    ) -> WatchedRoot | None:
        """A skipped root's turn: watched from now on (its instance lock taken, its watch
        started, a rescan) when its configuration loads now; else still skipped, logged."""
        worker.doing = "reading its configuration again"
        loaded = self._root_config(root, "root_skipped", hint=SKIPPED_HINT)
        if isinstance(loaded, str):
            return None
        config = loaded[0]
        try:
            _check_specs(root, config)
            lock = InstanceLock(root / config.specs_dir)
            lock.acquire(root)
        except PostflightError as exc:
            # Its file loads now, but the root cannot be watched yet: said as at the start.
            log.error("root_skipped", root=str(root), error=str(exc), hint=SKIPPED_HINT)  # noqa: TRY400
            return None
        try:
            wr = WatchedRoot(root, config, self._running(), lock, self._fell_back)
            wr.start_watch()
        except BaseException:
            lock.release()
            raise
        log.info("root_watched", root=str(root), config=config.source or None)
        worker.doing = "rescanning (configuration reloaded)"
        wr.rescan("configuration reloaded", force=True)
        return wr

    def _reload_root(self, wr: WatchedRoot, *, retry: bool) -> WatchedRoot:
        """One root's part of a reload, in its turn: its own configuration re-read (the old one
        kept if it fails to load), its watch restarted if needed, and one rescan."""
        root = wr.root
        loaded = self._root_config(root, "config_reload_failed", kept=wr.config.source or None)
        if isinstance(loaded, str):
            # This root keeps its old configuration; the others take their new one.
            config, policy = wr.config, wr.policy
            rewatch = retry
        else:
            config, policy = loaded
            rewatch = retry or self._moved(wr, config)
            log.info(
                "config_reloaded", root=str(root), config=config.source or None, rewatch=rewatch
            )
        if rewatch:
            wr.watch.stop()
            fresh = WatchedRoot(root, config, self._running(), wr.lock, self._fell_back)
            if fresh.specs_dir != wr.specs_dir:
                fresh.relock()
            fresh.start_watch()
            wr = fresh
        else:
            wr.config, wr.policy = config, policy
        # Timeouts or rules may have changed: re-read everything once.
        wr.rescan("configuration reloaded", force=True)
        return wr

    @staticmethod
    def _moved(wr: WatchedRoot, config: Config) -> bool:
        """Whether ``config`` watches other paths than ``wr``'s: another specs directory or
        state file."""
        return (
            config.specs_dir != wr.config.specs_dir
            or config.postflight.state_file != wr.config.postflight.state_file
        )
