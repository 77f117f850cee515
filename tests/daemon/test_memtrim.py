"""The daemon hands freed heap back to the kernel a second after work (memtrim.py): the real
glibc call on real memory, and the in-process daemon on a fake clock."""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from helpers.documents import final_text
from helpers.inprocess_daemon import FakeClock, events, open_daemon
from helpers.needs import require
from helpers.project import meta_path, project, task_status
from postflightd.daemon.memtrim import TRIM_AFTER_S, trim_heap


@pytest.fixture
def glibc() -> None:
    require(sys.platform == "linux" and platform.libc_ver()[0] == "glibc", "malloc_trim is glibc's")


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.usefixtures("glibc")
def test_trimming_returns_freed_heap_pages_to_the_kernel() -> None:
    # 50 MB of malloc'd blocks (1,000 bytes: below pymalloc's and mmap's thresholds), all but
    # the last freed: the last keeps the heap's top in use, so free() alone gives nothing back.
    blocks = [bytes(1000) for _ in range(50_000)]
    last = blocks[-1]
    del blocks
    before = rss_mb()
    assert trim_heap()
    assert before - rss_mb() > 20, "malloc_trim gave back less than half of the freed 50 MB"
    assert len(last) == 1000


@pytest.mark.usefixtures("glibc")
def test_the_daemon_trims_a_second_after_work_and_not_while_idle(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 2)
    clock = FakeClock()
    # inotify, not the helper's polling observer: a polling root works every second.
    with capture_logs() as logs, open_daemon(root, clock=clock, polling=False) as daemon:
        assert daemon.roots[0].watch.kind == "inotify"
        daemon.iterate()  # the start's reconciliation was work: trimmed a second later
        assert events(logs, "heap_trimmed") == []
        clock.advance(TRIM_AFTER_S)
        daemon.iterate()
        assert len(events(logs, "heap_trimmed")) == 1
        clock.advance(5)  # the supervisor's check is due, nothing else: no trim
        daemon.iterate()
        assert len(events(logs, "heap_trimmed")) == 1

        meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
        deadline = time.monotonic() + 30
        while task_status(root, 1) != "researched" and time.monotonic() < deadline:
            daemon.iterate()  # sleeps (for real) until the event arrives
        assert task_status(root, 1) == "researched"
        assert len(events(logs, "heap_trimmed")) == 1, "trimmed before the second had passed"
        clock.advance(TRIM_AFTER_S)
        daemon.iterate()
        assert len(events(logs, "heap_trimmed")) == 2
