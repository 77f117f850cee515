"""The daemon at the scale of real projects: what it watches, overflows, files that keep changing.

Real ``postflightd watch`` processes on temp projects (the fixtures of tests/daemon/conftest.py);
inotify watches are counted from /proc/PID/fdinfo, as bench/scale.py counts them.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from datetime import datetime
from pathlib import Path

import pytest

from helpers.daemon_process import DaemonFactory, applied, in_progress_doc
from helpers.documents import final_text, researched_doc
from helpers.needs import require, require_tool, unavailable
from helpers.project import meta_path, project, user_config
from helpers.waiting import wait_until
from postflightd.cli import main
from postflightd.daemon.notes import daemon_note, remove_daemon_notes, write_daemon_notes
from postflightd.fs.locks import InstanceLock
from postflightd.journal.database import default_journal_path

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _linux_proc() -> None:
    require(Path("/proc/self/fdinfo").is_dir(), "needs Linux /proc (inotify fdinfo)")


def inotify_watches(pid: int) -> int:
    total = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) != "anon_inode:inotify":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except OSError:
            continue
        total += sum(1 for line in info.splitlines() if line.startswith("inotify wd:"))
    return total


def make_tree(base: Path, count: int) -> None:
    """``count`` directories, 30 to a level, as an artifact tree (node_modules, .lake) holds."""
    for i in range(count):
        (base / f"d{i // 30}" / f"e{i % 30}").mkdir(parents=True, exist_ok=True)


def journal_times(kind: str, task: int) -> list[str]:
    """When the daemon recorded each ``kind`` row of ``task``, by its own clock (ISO 8601)."""
    with closing(sqlite3.connect(default_journal_path())) as conn:
        rows = conn.execute(
            "SELECT ts FROM observations WHERE kind = ? AND task = ? ORDER BY id", (kind, task)
        ).fetchall()
    return [ts for (ts,) in rows]


def journal_rows(kind: str, task: int) -> list[tuple[str | None, str | None]]:
    with closing(sqlite3.connect(default_journal_path())) as conn:
        return conn.execute(
            "SELECT content, findings FROM observations WHERE kind = ? AND task = ? ORDER BY id",
            (kind, task),
        ).fetchall()


def test_a_deep_artifact_tree_adds_no_watches(tmp_path: Path, start_daemon: DaemonFactory) -> None:
    root = project(tmp_path / "proj", 3)
    make_tree(root / "specs" / "1_task1" / "node_modules", 3000)
    (root / "specs" / "3_task3").rename(tmp_path / "3_task3")  # comes later
    daemon = start_daemon(root)
    pid = daemon.proc.pid
    # specs/ and its two task directories; nothing below them.
    wait_until("the watches in place", lambda: inotify_watches(pid) == 3)
    make_tree(root / "specs" / "2_task2" / "build", 600)
    # A new task directory gets its watch, and its file is applied.
    (tmp_path / "3_task3").rename(root / "specs" / "3_task3")
    meta_path(root, 3).write_text(final_text(3), encoding="utf-8")
    wait_until("task 3 applied", lambda: applied(root, 3))
    assert inotify_watches(pid) == 4
    assert daemon.stop() == 0


def test_an_overflow_storm_settles_after_one_rescan(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    """A forced IN_Q_OVERFLOW: one rescan, then back to events (a rebuild that overflowed
    again would rescan in a loop).

    The kernel queue is overflowed by a burst while the daemon is stopped (SIGSTOP), not by
    shrinking fs.inotify.max_queued_events: that sysctl is machine-wide and other processes
    (other test runs) share it.
    """
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 100_000:
        unavailable(f"max_queued_events is {limit}: too large to overflow quickly")
    root = project(tmp_path / "proj", 3)
    user_config("[watch]\nrescan_interval_s = 3600\n")
    make_tree(root / "specs" / "1_task1" / "node_modules", 3000)
    daemon = start_daemon(root)
    daemon.signal(signal.SIGSTOP)
    try:
        flood = root / "specs" / "1_task1"
        for i in range(limit // 2 + 2000):  # a created and a closed event each
            os.close(os.open(flood / f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644))
        meta_path(root, 2).write_text(final_text(2), encoding="utf-8")  # its events are lost
    finally:
        daemon.signal(signal.SIGCONT)
    daemon.wait_event("event_queue_overflow", timeout=30)
    wait_until("the file found by the overflow rescan", lambda: applied(root, 2), 30)
    rescans = len(daemon.events("rescan"))
    # A file written after the rescan is applied from its own events: the watch is whole again.
    meta_path(root, 3).write_text(final_text(3), encoding="utf-8")
    wait_until("a file written after the rescan applied", lambda: applied(root, 3), 30)
    assert len(daemon.events("event_queue_overflow")) == 1
    overflow_rescans = [e for e in daemon.events("rescan") if e["reason"] == "event queue overflow"]
    assert len(overflow_rescans) == 1
    assert len(daemon.events("rescan")) == rescans, "no rescan after the overflow's own"
    assert daemon.stop() == 0


def test_a_file_rewritten_nonstop_is_validated_at_most_once_per_settle_window(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    """600 versions a few ms apart, then the final one: the daemon validates some, each at
    least one settle window (200 ms) after the one before, by the times its journal records."""
    root = project(tmp_path / "proj", 1)
    daemon = start_daemon(root)
    path = meta_path(root, 1)
    versions = 600
    for i in range(versions):
        path.write_text(json.dumps(in_progress_doc(1, stage=f"step {i}")), encoding="utf-8")
        time.sleep(0.003)
    # The run's final version: once it is applied, every version before it has been handled.
    path.write_text(final_text(1), encoding="utf-8")
    wait_until("the final version applied", lambda: applied(root, 1))
    times = [datetime.fromisoformat(ts) for ts in journal_times("validated", 1)]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert 2 <= len(times) < versions / 10, f"{len(times)} validations of {versions} versions"
    # The journal's time is taken after the check, so two checks 200 ms apart may be
    # recorded a little closer together when the first one's record was the slower.
    assert all(gap > 0.15 for gap in gaps), gaps
    assert daemon.stop() == 0


def test_a_file_appended_to_nonstop_is_reported_once_when_it_settles(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    """Reported once, and not again when a later rescan finds the same bytes."""
    root = project(tmp_path / "proj", 1)
    user_config("[watch]\nrescan_interval_s = 0.5\n")
    daemon = start_daemon(root)
    path = meta_path(root, 1)
    path.write_text(final_text(1)[:-1], encoding="utf-8")  # not JSON until ... never
    started = time.monotonic()
    while time.monotonic() - started < 1.5:
        with path.open("a", encoding="utf-8") as fh:
            fh.write('"x": 1, ')
        time.sleep(0.003)
    (event,) = daemon.wait_event("invalid")
    assert "PF102" in " ".join(event["findings"])
    # Two periodic rescans after the report: each finds the file again, unchanged.
    daemon.wait_event("rescan", count=len(daemon.events("rescan")) + 2)
    assert len(daemon.events("invalid")) == 1
    assert path.exists(), "an invalid file is kept"
    assert daemon.stop() == 0


def test_slow_writers_holding_the_file_open_are_applied_once_with_every_byte(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    """Parse success at the closing brace is not completion; the close is."""
    count = 20
    root = project(tmp_path / "proj", count)
    daemon = start_daemon(root)
    texts = {n: json.dumps(researched_doc(f"{n}_task{n}")) + "\n" for n in range(1, count + 1)}

    def writer(n: int) -> None:
        data = texts[n].encode()
        fd = os.open(meta_path(root, n), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for i in range(len(data) - 1):
                os.write(fd, data[i : i + 1])
                time.sleep(0.001 if i % 50 else 0.02)
            # The document is complete here; the writer still has the file open.
            time.sleep(0.12)  # under settle_ms
            os.write(fd, data[-1:])
        finally:
            os.close(fd)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(1, count + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until("all applied", lambda: all(applied(root, n) for n in range(1, count + 1)), 30)
    daemon.wait_event("applied", count=count)
    assert sorted(e["task"] for e in daemon.events("applied")) == list(range(1, count + 1))
    for n in range(1, count + 1):
        rows = journal_rows("postflighted", n)
        assert [content for content, _ in rows] == [texts[n]], f"task {n}: every byte, once"
    assert daemon.stop() == 0


def test_status_shows_the_daemons_note_for_a_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "proj", 1)
    lock = InstanceLock(root / "specs")
    lock.acquire(root)  # this process plays the daemon holding the root
    try:
        note = "polling: the inotify watch limit is reached; polling instead"
        write_daemon_notes({str(root): note})
        assert daemon_note(root, os.getpid()) == note
        assert daemon_note(root, None) is None
        assert main(["status", str(root), "--format", "json"]) == 0
        (entry,) = json.loads(capsys.readouterr().out)["roots"]
        assert entry["note"] == note
        write_daemon_notes({})
        assert daemon_note(root, os.getpid()) is None
    finally:
        remove_daemon_notes()
        lock.release()


def test_a_damaged_note_file_is_ignored(tmp_path: Path) -> None:
    from platformdirs import user_state_path

    path = user_state_path("postflightd") / f"daemon-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in ("not json", "[]", '{"roots": 3}', '{"roots": {"/x": 5}}'):
        path.write_text(text, encoding="utf-8")
        assert daemon_note(Path("/x"), os.getpid()) is None
    path.unlink()


def _userns_limit_prefix(watches: int) -> list[str]:
    """Run the daemon in a user namespace whose inotify watch limit is ``watches``.

    Since Linux 5.11 the limit is counted per user namespace (``/proc/sys/user/
    max_inotify_watches``), writable by the namespace's owner: a real ENOSPC for this daemon
    only, without touching the machine-wide sysctl other processes share.
    """
    script = f'echo {watches} > /proc/sys/user/max_inotify_watches && exec "$0" "$@"'
    probe = subprocess.run(
        ["unshare", "-U", "-r", "sh", "-c", script, "true"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        unavailable(f"no per-user-namespace inotify limit here: {probe.stderr.decode()[:200]}")
    return ["unshare", "-U", "-r", "sh", "-c", script, sys.executable, "-m", "postflightd"]


def test_the_watch_limit_reached_falls_back_to_polling_with_a_note(
    tmp_path: Path, start_daemon: DaemonFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    require_tool("unshare", "the daemon runs in a user namespace of its own (util-linux)")
    root = project(tmp_path / "proj", 6)
    for n in (4, 5, 6):  # come later, past the limit
        (root / "specs" / f"{n}_task{n}").rename(tmp_path / f"{n}_task{n}")
    daemon = start_daemon(root, argv_prefix=_userns_limit_prefix(5))
    (watching,) = daemon.events("watching")
    assert watching["observer"] == "inotify"  # specs/ and 3 task directories: 4 of 5
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("task 1 applied (inotify)", lambda: applied(root, 1))
    for n in (4, 5, 6):
        (tmp_path / f"{n}_task{n}").rename(root / "specs" / f"{n}_task{n}")
    (fallback,) = daemon.wait_event("observer_fallback")
    assert "watch limit" in fallback["reason"]
    assert "max_user_watches" in fallback["hint"]
    wait_until(
        "the root watched by polling",
        lambda: any(e.get("observer") == "polling" for e in daemon.events("watching")),
    )
    # Polling still applies what agents write, in the new directories too.
    meta_path(root, 6).write_text(final_text(6), encoding="utf-8")
    wait_until("task 6 applied (polling)", lambda: applied(root, 6), 30)
    assert main(["status", str(root), "--format", "json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["roots"]
    assert entry["note"].startswith("polling:") and "watch limit" in entry["note"]
    assert daemon.stop() == 0


def test_one_roots_broken_state_and_hostile_file_do_not_hold_up_another_root(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    broken = project(tmp_path / "a", 2)
    healthy = project(tmp_path / "b", 1)
    state = broken / "specs" / "state.json"
    good_state = state.read_text(encoding="utf-8")
    state.write_text("{ not json", encoding="utf-8")
    daemon = start_daemon(broken, healthy)
    hostile = '{"status": "partial", "errors": [' + ",".join(["{}"] * 300_000) + "]}"
    meta_path(broken, 2).write_text(hostile, encoding="utf-8")
    meta_path(broken, 1).write_text(final_text(1), encoding="utf-8")
    meta_path(healthy, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("the healthy root's file applied", lambda: applied(healthy, 1))
    daemon.wait_event("state_unusable")
    assert meta_path(broken, 1).exists(), "kept while its state.json is unusable"
    # Repaired: the held file is applied at the state.json change.
    tmp = state.with_name(".state.json.fix")
    tmp.write_text(good_state, encoding="utf-8")
    tmp.rename(state)
    wait_until("the held file applied once state.json is fixed", lambda: applied(broken, 1))
    assert meta_path(broken, 2).exists(), "the hostile file is invalid, kept"
    assert daemon.stop() == 0
