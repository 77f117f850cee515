"""``postflightd watch``: the loop turning file events into postflight, and its supervision.

One thread does the project work (validation, postflight, stuck detection): the watches'
threads only hand dirty paths over (``watch.dirty.DirtySet``), so every state.json commit
happens here, in order, and a signal only ever lands between two commits; the journal pruner works
on its own connection. The loop sleeps in ``select`` on a self-pipe until the next thing that
can be due: an event, the stuck deadline of the earliest run, a deferred (half-written)
file's settle time, the supervisor's check, the periodic rescan, or the systemd watchdog
ping. There is no per-second polling of the runs.

What is done for one root's files is ``root.WatchedRoot``'s; this module keeps the loop, the
signals, the supervision of the watches, and SIGHUP's reload. Why this module stays whole at
a little over 500 lines: those four share the loop's deadlines (what ``select`` waits for is
the earliest of them all), which a split would pass back and forth.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Final

from postflightd.config import Config, policy_from
from postflightd.daemon.memtrim import TRIM_AFTER_S, trim_heap
from postflightd.daemon.notes import remove_daemon_notes, write_daemon_notes
from postflightd.daemon.pruner import JournalPruner
from postflightd.daemon.root import Clock, Shared, WatchedRoot
from postflightd.daemon.sdnotify import SystemdNotifier
from postflightd.daemon.watch.dirty import DirtySet, Pending
from postflightd.daemon.watch.observer import OverflowTrap, install_overflow_trap
from postflightd.errors import PostflightError, StateUnusableError, UsageError
from postflightd.fs.directory import RefusedError, open_specs
from postflightd.fs.locks import InstanceLock
from postflightd.journal.database import Journal, journal_path
from postflightd.logs import configure_logging, get_logger
from postflightd.rules.findings import state_unusable_text
from postflightd.runs.lifecycle import RunTable
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


def _plain_dir(path: Path) -> bool:
    """A directory, not a link to one: a specs directory swapped for a link counts as gone."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


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
        #: per-root notes for ``status`` (the polling fallback), kept in the user state dir.
        self._notes: dict[str, str] = {}
        #: set by ``open``: what the roots share, and each root's work.
        self._shared: Shared | None = None
        self._roots: dict[Path, WatchedRoot] = {}
        self._pruner: JournalPruner | None = None
        self._trap: OverflowTrap | None = None
        self._previous_hook: Callable[[threading.ExceptHookArgs], object] | None = None
        self._closed = False
        self._stop = False
        self._reload = False
        self._next_supervise = 0.0
        self._next_rescan = 0.0
        self._next_ping = 0.0
        #: when to trim the heap: a second after work (None: no work since the last trim).
        self._trim_at: float | None = None

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
        self._notes[str(root)] = f"polling: {why}"
        write_daemon_notes(self._notes)

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

        Raises, holding no lock, when a specs directory is missing or refused, or when another
        daemon holds a root; ``close`` is due either way.
        """
        config = self._start_config
        # Each root's own configuration, all read before anything is locked or watched: a bad
        # one stops the start with its message (exit 2).
        configs = {root: self._load_config(root) for root in self._root_paths}
        for root in self._root_paths:
            _check_specs(root, configs[root])
        locks: dict[Path, InstanceLock] = {}
        try:
            for root in self._root_paths:
                lock = InstanceLock(root / configs[root].specs_dir)
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
        try:
            self._start_pruner()
            # Start every observer first, then scan what is there: a file written between the
            # scan and the observer's start would otherwise be seen by neither.
            for wr in self._roots.values():
                wr.start_watch()
            for wr in self._roots.values():
                wr.rescan("start", force=True)
            now = self._clock.monotonic()
            self._next_supervise = now + SUPERVISE_S
            self._next_rescan = now + config.watch.rescan_interval_s
            self._trim_at = now + TRIM_AFTER_S  # what the imports and the start scan left
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
        try:
            for wr in self._roots.values():
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
            self._notifier.close()
            self._waker.close()
            remove_daemon_notes()
        finally:
            # The roots' current locks: a reload or a replaced specs directory may have moved
            # them since ``open``.
            for wr in self._roots.values():
                wr.lock.release()

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
        candidates = [self._next_supervise, self._next_rescan]
        deadline = self.runs.next_deadline()
        if deadline is not None:
            candidates.append(mono + (deadline - wall) + DEADLINE_SLACK_S)
        for wr in self._roots.values():
            candidates.extend(wr.next_due())
        if self._notifier.watchdog_interval_s is not None:
            candidates.append(self._next_ping)
        if self._trim_at is not None:
            candidates.append(self._trim_at)
        return min(candidates)

    def iterate(self) -> None:
        """One turn of the loop: sleep until something is due (or an event), then do it."""
        clock = self._clock
        self._waker.wait(self._next_wake() - clock.monotonic())
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
        mono = clock.monotonic()
        if pending.checks or mono >= self._next_supervise:
            self._supervise()
            missing = any(wr.missing for wr in self._roots.values())
            self._next_supervise = mono + (MISSING_RECHECK_S if missing else SUPERVISE_S)
        # Files named by events first: a rescan of a large root must not delay an agent's
        # postflight in another (or the same) root.
        self._process_events(pending)
        for target, reason in pending.rescans.items():
            for wr in self._targets(target):
                if reason == "event queue overflow":
                    log.warning("event_queue_overflow", root=str(wr.root))
                wr.rescan(reason, force=False)
        worked = bool(pending.paths or pending.rescans or pending.state_changed)
        for wr in self._roots.values():
            if wr.watch.kind == "polling" and mono >= wr.next_poll and not self._stop:
                worked = True
                wr.poll()
        if mono >= self._next_rescan:
            worked = True
            started = clock.monotonic()
            for wr in self._roots.values():
                wr.rescan("periodic", force=False)
            cost = clock.monotonic() - started
            # The safety net, not the mechanism: at 10,000 task directories a reconciliation
            # costs ~35 ms, which every 30 s is 0.12 % of a core; stretched so that it never
            # takes more than 1/PERIODIC_COST_FACTOR of a core (idle <= 0.1 %).
            interval = max(self.config.watch.rescan_interval_s, cost * PERIODIC_COST_FACTOR)
            self._next_rescan = clock.monotonic() + interval
        for wr in self._roots.values():
            wr.retry_settled()
        for wr in self._roots.values():
            wr.retry_lock_busy()
        self._check_stuck()
        self._notify_status()
        if self._notifier.watchdog_interval_s is not None and clock.monotonic() >= self._next_ping:
            self._notifier.notify("WATCHDOG=1")
            self._next_ping = clock.monotonic() + self._notifier.watchdog_interval_s
        self._trim_when_quiet(worked)

    def _trim_when_quiet(self, worked: bool) -> None:
        """Give the heap's free pages back TRIM_AFTER_S after work (memtrim), at most that often.

        Not postponed while work goes on: a polling root works every second and would never
        see a quiet one, and a trim costs 0.01-0.2 ms, nothing beside a postflight.
        """
        now = self._clock.monotonic()
        if self._trim_at is not None and now >= self._trim_at:
            self._trim_at = None
            if self._shared is not None:
                self._shared.journal.release_memory()
            if trim_heap():
                log.debug("heap_trimmed")
        if worked and self._trim_at is None:
            self._trim_at = now + TRIM_AFTER_S

    def _process_events(self, pending: Pending) -> None:
        """Hand each root the paths its events named (and whether its state file changed)."""
        by_root: dict[Path, list[str]] = {}
        for path, root in pending.paths.items():
            by_root.setdefault(root, []).append(path)
        for root, wr in self._roots.items():
            paths = by_root.get(root, [])
            state_changed = root in pending.state_changed
            if paths or state_changed:
                wr.on_events(paths, pending.writing, state_changed)

    def _check_stuck(self) -> None:
        now = self._clock.now()
        for run in self.runs.due(now):
            wr = self._roots.get(Path(run.sighting.root))
            if wr is None or self._stop:
                continue
            wr.check_stuck(run, now)

    def _targets(self, root: Path | None) -> list[WatchedRoot]:
        if root is None:
            return list(self._roots.values())
        wr = self._roots.get(root)
        return [wr] if wr is not None else []

    def _status_line(self) -> str:
        in_flight = sum(1 for r in self.runs if r.in_progress)
        stuck = sum(1 for r in self.runs if r.in_progress and r.stuck)
        stuck_s = f", {stuck} stuck" if stuck else ""
        return (
            f"watching {counted(len(self._roots), 'root')}; "
            f"{counted(in_flight, 'run')} in flight{stuck_s}"
        )

    def _notify_status(self) -> None:
        """STATUS= for `systemctl status`, sent when the run table's summary changed."""
        line = self._status_line()
        if line != self._last_status:
            self._last_status = line
            self._notifier.notify(f"STATUS={line}")

    # --- supervision --------------------------------------------------------------------------

    def _supervise(self) -> None:
        for wr in self._roots.values():
            problem = wr.watch.problem()
            if problem is None:
                continue
            if not _plain_dir(wr.specs_dir):
                if not wr.missing:
                    wr.watch.stop()
                    wr.missing = True
                    log.warning(
                        "specs_dir_missing",
                        root=str(wr.root),
                        specs_dir=str(wr.specs_dir),
                        reason=problem,
                    )
                continue
            was_missing = wr.missing
            log.warning(
                "watch_restarted",
                root=str(wr.root),
                reason="the specs directory is back" if was_missing else problem,
            )
            old_identity = wr.watch.identity
            wr.start_watch()
            if wr.missing:
                continue
            if wr.watch.identity != old_identity:
                wr.relock()
            wr.rescan("watch restarted", force=True)

    # --- SIGHUP ---------------------------------------------------------------------------

    def _reload_config(self) -> None:
        """Re-read the user's configuration, then each root's own; whatever fails to load is
        logged and its old configuration kept (the other roots carry on with their new one)."""
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
            shared.journal.close()
            shared.journal = Journal.open(journal_path(new.journal.path))
            self._start_pruner()
        # A root that fell back to polling tries inotify again (the limit may be raised).
        fell_back = any(wr.watch.fallback for wr in self._roots.values())
        if fell_back:
            self._notes.clear()
            write_daemon_notes(self._notes)
        if new.watch.roots != old.watch.roots:
            log.warning(
                "config_roots_ignored",
                reason="[watch] roots changed: restart the daemon to watch the new roots",
            )
        retry = fell_back or new.watch.observer != old.watch.observer
        for root, wr in list(self._roots.items()):
            try:
                config = self._load_config(root)
                policy = policy_from(config)
            except (PostflightError, ValueError) as exc:
                # This root keeps its old configuration; the others take their new one.
                log.error(  # noqa: TRY400 - expected; no traceback
                    "config_reload_failed",
                    root=str(root),
                    error=str(exc),
                    kept=wr.config.source or None,
                )
                config, policy = wr.config, wr.policy
                rewatch = retry
            else:
                rewatch = retry or self._moved(wr, config)
                log.info(
                    "config_reloaded", root=str(root), config=config.source or None, rewatch=rewatch
                )
            if rewatch:
                wr.watch.stop()
                fresh = WatchedRoot(root, config, shared, wr.lock, self._fell_back)
                if fresh.specs_dir != wr.specs_dir:
                    fresh.relock()
                self._roots[root] = fresh
                fresh.start_watch()
            else:
                wr.config, wr.policy = config, policy
            # Timeouts or rules may have changed: re-read everything once.
            self._roots[root].rescan("configuration reloaded", force=True)
        self._next_rescan = self._clock.monotonic() + new.watch.rescan_interval_s

    @staticmethod
    def _moved(wr: WatchedRoot, config: Config) -> bool:
        """Whether ``config`` watches other paths than ``wr``'s: another specs directory or
        state file."""
        return (
            config.specs_dir != wr.config.specs_dir
            or config.postflight.state_file != wr.config.postflight.state_file
        )
