"""``postflightd watch`` as a real process, driven the way agents write their files.

Every test starts the daemon with ``python -m postflightd watch`` on a temp project, writes
metadata files with the patterns real agents use, and waits (with a deadline) for state.json
to change and the file to go. Logs are JSON lines on the daemon's stderr (a file here).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from helpers.daemon_process import DaemonFactory, applied, in_progress_doc
from helpers.documents import SESSION, final_text
from helpers.needs import unavailable
from helpers.project import META, error_records, meta_path, project, user_config, write_artifact
from helpers.waiting import wait_until
from postflightd.daemon.root import BATCH_MAX

#: Real daemons and console-script runs in bulk: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

OTHER_SESSION = "sess_1736700999_zzz999"


# --- the write patterns ---------------------------------------------------------------------


def write_in_two_gulps(path: Path, text: str) -> None:
    """A heredoc / editor buffer: created empty, then written, then closed."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write(text[: len(text) // 2])
        fh.flush()
        time.sleep(0.05)  # the daemon sees the half-written file in between
        fh.write(text[len(text) // 2 :])


def test_every_agent_write_pattern_is_applied_and_none_reports_pf102(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 7)
    daemon = start_daemon(root)
    shm = Path("/dev/shm")

    # 1. `cat > file <<EOF` in a shell: created, modified, closed.
    subprocess.run(
        ["bash", "-c", f"cat > '{meta_path(root, 1)}' <<'EOF'\n{final_text(1)}\nEOF"], check=True
    )
    # 2. The same, written in two gulps so a read in between sees half a document.
    write_in_two_gulps(meta_path(root, 2), final_text(2))
    # 3. Write a temp file in the task directory, then rename it over the metadata file.
    tmp = meta_path(root, 3).with_name(".return-meta.json.tmp")
    tmp.write_text(final_text(3), encoding="utf-8")
    tmp.rename(meta_path(root, 3))
    # 4. `jq ... > /tmp/x && mv /tmp/x file`: from outside the watch, a created event only.
    outside = tmp_path / "jq-out.json"
    outside.write_text(final_text(4), encoding="utf-8")
    subprocess.run(["mv", str(outside), str(meta_path(root, 4))], check=True)
    # 5. `mv` across filesystems: a copy that can be read half-written.
    if shm.is_dir() and os.stat(shm).st_dev != os.stat(tmp_path).st_dev:
        foreign = shm / f"postflightd-test-{os.getpid()}.json"
        foreign.write_text(final_text(5) + " " * 200_000, encoding="utf-8")  # a slower copy
        subprocess.run(["mv", str(foreign), str(meta_path(root, 5))], check=True)
    else:
        write_in_two_gulps(meta_path(root, 5), final_text(5))
    # 6. An editor's save: backup by rename, write a new file, drop the backup.
    path6 = meta_path(root, 6)
    path6.write_text(json.dumps(in_progress_doc(6)), encoding="utf-8")
    path6.rename(path6.with_name(META + "~"))
    write_in_two_gulps(path6, final_text(6))
    path6.with_name(META + "~").unlink()
    # 7. Rewritten many times in a second: progress updates, then the final status.
    path7 = meta_path(root, 7)
    for i in range(30):
        path7.write_text(json.dumps(in_progress_doc(7, stage=f"step {i}")), encoding="utf-8")
    path7.write_text(final_text(7), encoding="utf-8")

    for n in range(1, 8):
        wait_until(f"task {n} applied", lambda n=n: applied(root, n))
    daemon.wait_event("applied", count=7)
    assert error_records(root, "validation_failed") == []
    assert not [e for e in daemon.events("invalid") if "PF102" in json.dumps(e)]
    assert sorted(e["task"] for e in daemon.events("applied")) == list(range(1, 8))
    assert daemon.stop() == 0


def test_a_task_directory_moved_in_whole_is_applied(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 1)
    start_daemon(root)
    staging = tmp_path / "staging" / "1_task1"
    staging.mkdir(parents=True)
    (staging / META).write_text(final_text(1), encoding="utf-8")
    shutil.rmtree(root / "specs" / "1_task1")
    write_artifact(tmp_path / "staging", "1_task1/reports/research-001.md")
    staging.rename(root / "specs" / "1_task1")
    wait_until("the moved-in file applied", lambda: applied(root, 1))


def test_byte_at_a_time_writers_never_get_pf102_and_each_file_is_applied_once(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    count = 200
    # A wide settle window: 200 writer threads share one interpreter lock, and on a loaded
    # machine one can wait far longer than its pause for its next byte; the file is then
    # quiet, not finished, and reading it after settle_ms is right.
    root = project(tmp_path / "proj", count, config="[watch]\nsettle_ms = 3000\n")
    daemon = start_daemon(root)
    rng = random.Random(4)
    pauses = [[rng.random() for _ in range(len(final_text(n)))] for n in range(1, count + 1)]

    def writer(n: int) -> None:
        data = final_text(n).encode()
        fd = os.open(meta_path(root, n), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for i, byte in enumerate(data):
                os.write(fd, bytes([byte]))
                r = pauses[n - 1][i]
                # Mostly tiny pauses, now and then a longer one (still under settle_ms).
                time.sleep(0.04 if r > 0.995 else r * 0.002)
        finally:
            os.close(fd)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(1, count + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until("all files applied", lambda: all(applied(root, n) for n in range(1, count + 1)), 30)
    daemon.wait_event("applied", count=count)
    assert error_records(root, "validation_failed") == []
    assert not [e for e in daemon.events("invalid") if "PF102" in json.dumps(e)]
    tasks = [e["task"] for e in daemon.events("applied")]
    assert sorted(tasks) == list(range(1, count + 1)), "each file applied exactly once"
    assert daemon.stop() == 0


def test_a_truncated_file_that_stays_truncated_is_pf102_after_settling(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 1)
    daemon = start_daemon(root)
    # That a file completed within the settle window is never reported is the write-pattern
    # test's (the file written in two gulps); this one stays truncated.
    meta_path(root, 1).write_text(final_text(1)[:40], encoding="utf-8")
    (event,) = daemon.wait_event("invalid")
    assert "PF102" in " ".join(event["findings"])
    assert meta_path(root, 1).exists(), "an invalid file is left in place"
    # The agent repairs it: applied at once.
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("the repaired file applied", lambda: applied(root, 1))


def test_a_final_file_written_while_the_daemon_was_down_is_applied_at_start(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 2)
    first = start_daemon(root)
    assert first.stop() == 0
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    meta_path(root, 2).write_text(json.dumps(in_progress_doc(2)), encoding="utf-8")
    second = start_daemon(root)
    wait_until("the file written while down applied", lambda: applied(root, 1))
    (run,) = second.wait_event("run_started")
    assert (run["task"], run["session"], run["stage"]) == (2, SESSION, "reading")
    assert meta_path(root, 2).exists(), "in_progress files are never deleted"


def test_specs_dir_removed_recreated_and_renamed_away_is_followed(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 2)
    backup = tmp_path / "specs-backup"
    shutil.copytree(root / "specs", backup)
    daemon = start_daemon(root)

    # Removed, then recreated (e.g. a `git checkout` of the directory).
    shutil.rmtree(root / "specs")
    daemon.wait_event("specs_dir_missing")
    shutil.copytree(backup, root / "specs")
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("applied in the recreated directory", lambda: applied(root, 1), 30)

    # Renamed away with a new one made in its place: inotify would go on watching the old
    # inode (and report its events under the new path) without the identity check.
    (root / "specs").rename(root / "specs-old")
    shutil.copytree(backup, root / "specs")
    meta_path(root, 2).write_text(final_text(2), encoding="utf-8")
    wait_until("applied in the replacing directory", lambda: applied(root, 2), 30)
    # IN_MOVE_SELF makes the daemon look at once: it may find the directory gone (and then
    # back) before the replacement exists, or already replaced.
    assert any(
        e["reason"] in ("the specs directory was replaced", "the specs directory is back")
        for e in daemon.events("watch_restarted")
    )
    # A file written into the renamed-away directory is not the project's business any more.
    stray = root / "specs-old" / "1_task1" / META
    stray.write_text(final_text(1), encoding="utf-8")
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("task 1 applied in the new directory", lambda: applied(root, 1))
    assert stray.exists()
    assert daemon.stop() == 0


def test_an_event_queue_overflow_triggers_a_rescan(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    limit_file = Path("/proc/sys/fs/inotify/max_queued_events")
    if not limit_file.exists():
        unavailable("no inotify on this system: no kernel event queue to overflow")
    limit = int(limit_file.read_text())
    if limit > 200_000:
        unavailable(f"max_queued_events is {limit}: too large to overflow quickly")
    root = project(tmp_path / "proj", 1)
    user_config("[watch]\nrescan_interval_s = 3600\n")
    daemon = start_daemon(root)
    # Freeze the daemon so the kernel queue fills: each new file is created+opened+closed.
    daemon.signal(signal.SIGSTOP)
    try:
        # Directly in the watched directory: a new subdirectory would not be watched yet.
        for i in range(limit // 2 + 500):
            (root / "specs" / f"flood{i}").touch()
        # Written once the queue is full: its events are lost, only a rescan can find it.
        meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    finally:
        daemon.signal(signal.SIGCONT)
    daemon.wait_event("event_queue_overflow", timeout=30)
    wait_until("the file applied by the overflow rescan", lambda: applied(root, 1), 30)
    assert any(e["reason"] == "event queue overflow" for e in daemon.events("rescan"))
    assert daemon.stop() == 0


FAULTY_DAEMON = """
import sys
from postflightd.daemon.watch import inotify_tree

original = inotify_tree.SpecsTree.dispatch

def dispatch(self, wd, mask, cookie, name):
    if name.endswith(b"boom"):
        raise RuntimeError("injected handler fault")
    return original(self, wd, mask, cookie, name)

inotify_tree.SpecsTree.dispatch = dispatch
from postflightd.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_a_handler_exception_restarts_the_observer_and_a_rescan_finds_the_file(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 2)
    user_config("[watch]\nrescan_interval_s = 3600\n")
    daemon = start_daemon(root, argv_prefix=[sys.executable, "-c", FAULTY_DAEMON])
    daemon.signal(signal.SIGSTOP)
    try:
        (root / "specs" / "boom").touch()  # kills watchdog's dispatcher thread
        # Queued behind the fatal event: never dispatched by the dead thread.
        meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    finally:
        daemon.signal(signal.SIGCONT)
    daemon.wait_event("watcher_thread_died")
    daemon.wait_event("watch_restarted")
    wait_until("the file found by the rescan", lambda: applied(root, 1))
    # ...and the restarted observer delivers events again.
    meta_path(root, 2).write_text(final_text(2), encoding="utf-8")
    wait_until("a later file applied", lambda: applied(root, 2))
    assert daemon.proc.poll() is None
    assert daemon.stop() == 0


def test_a_stuck_run_is_flagged_on_time_once_and_still_applied_when_it_finishes(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 1, config="[timeouts]\nresearch = 1\n")
    daemon = start_daemon(root)
    doc = in_progress_doc(1)
    started = datetime.fromisoformat(doc["started_at"]).timestamp()
    meta_path(root, 1).write_text(json.dumps(doc), encoding="utf-8")
    daemon.wait_event("run_started")
    # No file event from here on: only the timer can notice.
    wait_until("a timeout record", lambda: error_records(root, "timeout"))
    (stuck,) = daemon.events("run_stuck")
    # On time by the daemon's own clock: not before the 1 s deadline, and from the stuck timer
    # or the supervisor's tick, not from a rescan (every 30 s) or another file event. The
    # bound is loose because the machines running the suite are shared.
    flagged = datetime.fromisoformat(stuck["timestamp"]).timestamp()
    assert started + 1 <= flagged < started + 15
    assert (stuck["task"], stuck["session"], stuck["code"]) == (1, SESSION, "PF602")

    # The same session writes progress: re-read, but not flagged (or recorded) again.
    doc["partial_progress"]["stage"] = "still alive"
    meta_path(root, 1).write_text(json.dumps(doc), encoding="utf-8")
    wait_until(
        "the progress update",
        lambda: any(e["stage"] == "still alive" for e in daemon.events("run_progress")),
    )
    # ...and then finishes: post-flighted normally.
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("the late final file applied", lambda: applied(root, 1))
    daemon.wait_event("run_finished")
    assert len(daemon.events("run_stuck")) == 1
    assert len(error_records(root, "timeout")) == 1
    (finished,) = daemon.events("run_finished")
    assert finished["task"] == 1
    assert daemon.stop() == 0


def test_a_new_session_replacing_an_unfinished_run_is_pf603(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 1)
    daemon = start_daemon(root)
    meta_path(root, 1).write_text(json.dumps(in_progress_doc(1)), encoding="utf-8")
    daemon.wait_event("run_started")
    replacement = in_progress_doc(1, session=OTHER_SESSION)
    meta_path(root, 1).write_text(json.dumps(replacement), encoding="utf-8")
    (event,) = daemon.wait_event("run_replaced")
    assert (event["code"], event["session"], event["replaced_session"]) == (
        "PF603",
        OTHER_SESSION,
        SESSION,
    )
    assert event["level"] == "warning"


def test_sigterm_during_a_burst_exits_0_quickly_and_loses_no_file(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    count = 400
    root = project(tmp_path / "proj", count)
    daemon = start_daemon(root)
    for n in range(1, count + 1):
        tmp = meta_path(root, n).with_name(".tmp")
        tmp.write_text(final_text(n), encoding="utf-8")
        tmp.rename(meta_path(root, n))
        if n == count // 2:
            daemon.wait_event("applied")  # a commit is under way
            daemon.signal(signal.SIGTERM)
            applied_before = len(daemon.events("applied"))
    assert daemon.proc.wait(30) == 0  # a deadline only
    # The daemon finishes the batch in flight (at most BATCH_MAX files) and leaves the rest
    # of the burst for the next start.
    assert len(daemon.events("applied")) - applied_before <= BATCH_MAX
    state = json.loads((root / "specs" / "state.json").read_text(encoding="utf-8"))
    assert len(state["active_projects"]) == count
    for n in range(1, count + 1):
        assert applied(root, n) or meta_path(root, n).exists(), f"task {n} lost"
    # What was left is applied by the next daemon.
    start_daemon(root)
    wait_until("the rest applied", lambda: all(applied(root, n) for n in range(1, count + 1)))


def test_sighup_with_a_bad_configuration_keeps_the_old_one(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    config = tmp_path / "proj" / ".postflightd.toml"
    root = project(tmp_path / "proj", 2, config="[timeouts]\nresearch = 3600\n")
    daemon = start_daemon(root)
    config.write_text("[timeouts]\nresearh = 1\n", encoding="utf-8")  # a typo: an unknown key
    daemon.signal(signal.SIGHUP)
    (failed,) = daemon.wait_event("config_reload_failed")
    assert "researh" in failed["error"]
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("still applying with the old configuration", lambda: applied(root, 1))

    # A good one is taken: a 1 s research timeout makes a fresh run stuck at once.
    config.write_text("[timeouts]\nresearch = 1\n", encoding="utf-8")
    daemon.signal(signal.SIGHUP)
    daemon.wait_event("config_reloaded")
    meta_path(root, 2).write_text(json.dumps(in_progress_doc(2)), encoding="utf-8")
    daemon.wait_event("run_stuck")
    assert daemon.stop() == 0


def test_a_second_daemon_on_the_same_root_exits_2_naming_the_first(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 1)
    first = start_daemon(root)
    second = start_daemon(root, wait_ready=False)
    assert second.proc.wait(30) == 2
    message = second.log_path.read_text(encoding="utf-8")
    assert f"pid {first.proc.pid}" in message
    assert "already watching" in message
    assert first.proc.poll() is None
    assert first.stop() == 0


def test_one_daemon_watches_several_roots(tmp_path: Path, start_daemon: DaemonFactory) -> None:
    a = project(tmp_path / "a", 1)
    b = project(tmp_path / "b", 1)
    daemon = start_daemon(a, b)
    meta_path(a, 1).write_text(final_text(1), encoding="utf-8")
    meta_path(b, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("both roots applied", lambda: applied(a, 1) and applied(b, 1))
    daemon.wait_event("applied", count=2)
    roots = {e["root"] for e in daemon.events("applied")}
    assert roots == {str(a.resolve()), str(b.resolve())}


def test_polling_observer_applies_files(tmp_path: Path, start_daemon: DaemonFactory) -> None:
    root = project(tmp_path / "proj", 1)
    user_config('[watch]\nobserver = "polling"\n')
    daemon = start_daemon(root)
    (watching,) = daemon.events("watching")
    assert watching["observer"] == "polling"
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("applied by polling", lambda: applied(root, 1))


def test_sd_notify_ready_watchdog_and_stopping(tmp_path: Path, start_daemon: DaemonFactory) -> None:
    root = project(tmp_path / "proj", 1)
    address = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(30)  # a deadline for each message, not a measure
        daemon = start_daemon(
            root, env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "200000"}, wait_ready=False
        )
        seen: list[str] = []

        def receive_until(line: str) -> None:
            while line not in seen:
                seen.extend(sock.recv(4096).decode().splitlines())

        receive_until("READY=1")
        receive_until("WATCHDOG=1")
        daemon.signal(signal.SIGTERM)
        receive_until("STOPPING=1")
        assert daemon.proc.wait(30) == 0
    assert seen.index("READY=1") < seen.index("STOPPING=1")


def test_every_log_event_carries_root_task_session_and_file(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 1)
    daemon = start_daemon(root)
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("applied", lambda: applied(root, 1))
    daemon.wait_event("applied")
    assert daemon.stop() == 0
    events = daemon.events()
    assert events
    for event in events:
        assert {"root", "task", "session", "file", "event", "level", "timestamp"} <= set(event)
    (done,) = daemon.events("applied")
    assert done["file"] == f"specs/1_task1/{META}"
    assert (done["task"], done["session"]) == (1, SESSION)


def test_a_symlinked_task_directory_is_refused_not_followed(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "proj", 1)
    outside = tmp_path / "outside" / "2_task2"
    outside.mkdir(parents=True)
    (outside / META).write_text(final_text(1), encoding="utf-8")
    daemon = start_daemon(root)
    (root / "specs" / "2_task2").symlink_to(outside, target_is_directory=True)
    (event,) = daemon.wait_event("invalid")
    assert event["findings"][0].startswith("PF100")
    assert (outside / META).exists()
