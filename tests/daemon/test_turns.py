"""The hand-over of each root's work to its worker, in-process on a fake clock: a root whose
turn blocks (here in re-reading its configuration, held on a ``threading.Event``) holds
nothing of another root's, is reported stalled once past the threshold, and resumes with a
rescan that applies what was written meanwhile. (test_hung_root.py tells the same story with
a real filesystem that hangs, in a subprocess.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from helpers.documents import researched_doc
from helpers.inprocess_daemon import FakeClock, events, polling_config, step
from helpers.project import project, task_status, write_meta
from helpers.waiting import wait_until
from postflightd.config import Config, load_config
from postflightd.daemon.loop import Daemon
from postflightd.daemon.sdnotify import SystemdNotifier
from postflightd.daemon.turns import Work

#: The stall threshold of these daemons (fake seconds).
STALL_S = 100.0


@dataclass
class TwoRoots:
    a: Path
    b: Path
    clock: FakeClock
    daemon: Daemon
    logs: list[dict[str, Any]]
    #: set: reading root A's configuration blocks until it is cleared.
    hang: threading.Event
    released: threading.Event


@pytest.fixture
def two(tmp_path: Path) -> Iterator[TwoRoots]:
    a, b = project(tmp_path / "a", 2), project(tmp_path / "b", 2)
    hang, released = threading.Event(), threading.Event()

    def load(root: Path | None) -> Config:
        if root == a and hang.is_set():
            released.wait(60)
        return polling_config() if root is None else load_config(None, [root])

    clock = FakeClock()
    daemon = Daemon(
        [a, b],
        polling_config(),
        load,
        notifier=SystemdNotifier({}),
        clock=clock.clock(),
        stall_s=STALL_S,
    )
    with capture_logs() as logs:
        daemon.open()
        try:
            yield TwoRoots(a, b, clock, daemon, logs, hang, released)
        finally:
            released.set()
            daemon.close()


def test_a_root_whose_turn_blocks_holds_nothing_of_the_others(two: TwoRoots) -> None:
    a, b, clock, daemon, logs = two.a, two.b, two.clock, two.daemon, two.logs
    two.hang.set()
    daemon.request_reload()  # A's turn re-reads its configuration: it blocks there
    step(daemon, clock)
    assert [e["root"] for e in events(logs, "config_reloaded")] == [str(b)]
    write_meta(a, "1_task1", researched_doc("1_task1"))
    write_meta(b, "1_task1", researched_doc("1_task1"))
    step(daemon, clock)
    assert task_status(b, 1) == "researched"
    assert task_status(a, 1) == "researching"
    assert events(logs, "root_stalled") == []

    step(daemon, clock, STALL_S)
    (stalled,) = events(logs, "root_stalled")
    assert stalled["root"] == str(a)
    assert stalled["stalled_s"] >= STALL_S
    assert stalled["doing"] == "reloading its configuration"
    assert daemon.stalled == [a]
    assert "1 root stalled" in daemon._status_line()
    step(daemon, clock, STALL_S)  # logged once
    assert len(events(logs, "root_stalled")) == 1
    write_meta(b, "2_task2", researched_doc("2_task2"))
    step(daemon, clock)
    assert task_status(b, 2) == "researched"

    two.hang.clear()
    two.released.set()
    # A turn once stalled is not waited for: the loop takes it back at its first look after.
    wait_until("A's turn to come back", lambda: a not in daemon.busy)
    step(daemon, clock)
    (resumed,) = events(logs, "root_resumed")
    assert resumed["root"] == str(a)
    assert resumed["stalled_s"] >= 2 * STALL_S
    assert task_status(a, 1) == "researched"
    assert any(e["reason"] == "root resumed" for e in events(logs, "rescan"))
    assert daemon.stalled == []
    assert "stalled" not in daemon._status_line()


def test_what_arrives_for_a_busy_root_waits_for_its_next_turn() -> None:
    """Events for a busy root gather in its work, the latest event of a path deciding."""
    work = Work()
    work.add_event("/r/specs/1_a/.return-meta.json", writing=True)
    work.add_event("/r/specs/2_b/.return-meta.json", writing=False)
    work.add_event("/r/specs/1_a/.return-meta.json", writing=False)
    assert list(work.paths) == ["/r/specs/2_b/.return-meta.json", "/r/specs/1_a/.return-meta.json"]
    assert work.writing == set()
    assert work and work.worked
    idle = Work(check=True)
    assert idle and not idle.worked
    assert not Work()
