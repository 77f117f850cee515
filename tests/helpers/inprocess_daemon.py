"""An in-process daemon on a fake clock, for the fast tests in tests/daemon/ (reload, relock,
stuck, memtrim).

The daemon is the real one (real files in tmp_path, the real journal, the polling observer so
that no event arrives behind the test's back); only time is the test's: ``FakeClock.advance``
makes a settle window, a poll, the supervisor's check or a stuck deadline due at once, and
``Daemon.iterate`` then does what is due without sleeping.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helpers.documents import SESSION, researched_doc
from postflightd.config import Config, load_config
from postflightd.daemon.loop import Daemon
from postflightd.daemon.root import Clock
from postflightd.daemon.sdnotify import SystemdNotifier
from postflightd.fs.directory import Directory
from postflightd.fs.locks import lock_holder


class FakeClock:
    """Monotonic and wall time that move only when the test says so."""

    def __init__(self) -> None:
        self.mono = 1000.0
        # Starts at the real time: the files the test writes carry real mtimes.
        self.wall_s = datetime.now(UTC).timestamp()

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall_s += seconds

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.wall_s, UTC)

    def clock(self) -> Clock:
        return Clock(monotonic=lambda: self.mono, wall=lambda: self.wall_s)


def in_progress(n: int, started: datetime, session: str = SESSION) -> str:
    doc: dict[str, Any] = researched_doc(f"{n}_task{n}")
    doc["status"] = "in_progress"
    doc["artifacts"] = []
    doc["started_at"] = started.isoformat()
    doc["partial_progress"] = {"stage": "reading", "details": "working", "phases_completed": 1}
    doc["metadata"]["session_id"] = session
    return json.dumps(doc)


def holder(specs: Path) -> int | None:
    """The pid holding the instance lock in ``specs`` (None: nobody)."""
    with Directory.anchor(specs) as directory:
        return lock_holder(directory)


def polling_config(*, polling: bool = True) -> Config:
    """The user's configuration, with the polling observer unless ``polling`` is False: the
    test decides when the daemon looks (no event thread)."""
    config = load_config()
    if not polling:
        return config
    return replace(config, watch=replace(config.watch, observer="polling"))


def config_loader(*, polling: bool = True) -> Callable[[Path | None], Config]:
    """What ``watch`` reads at start and re-reads on SIGHUP: the user's configuration (None),
    with the polling observer, and each root's own."""

    def load(root: Path | None) -> Config:
        return polling_config(polling=polling) if root is None else load_config(None, [root])

    return load


@contextmanager
def open_daemon(
    *roots: Path, clock: FakeClock, notifier: SystemdNotifier | None = None, polling: bool = True
) -> Iterator[Daemon]:
    """A daemon opened on ``roots`` (each under its own configuration), closed at the end."""
    daemon = Daemon(
        list(roots),
        polling_config(polling=polling),
        config_loader(polling=polling),
        notifier=notifier if notifier is not None else SystemdNotifier({}),
        clock=clock.clock(),
    )
    daemon.open()
    try:
        yield daemon
    finally:
        daemon.close()


def step(daemon: Daemon, clock: FakeClock, seconds: float = 2.5) -> None:
    """Let ``seconds`` pass (enough for a poll, the supervisor and a settle window), then run
    one turn of the loop: whatever became due is done, nothing waits for real."""
    clock.advance(seconds)
    daemon.iterate()


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]
