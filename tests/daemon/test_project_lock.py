"""The daemon and a project lock held by another process (a script under ``flock``).

The daemon waits for the lock only briefly: the files stay dirty and are retried, the loop
keeps serving, SIGTERM is not delayed, and the file is applied once the lock is released.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, user_config, write_meta
from helpers.waiting import wait_until

#: Real daemons and console-script runs in bulk: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow


def events(log: Path, name: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == name:
            out.append(event)
    return out


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started by a test; every one is killed at the end, whatever happens."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.stdin is not None:
                proc.stdin.close()  # a lock holder's script ends on EOF, releasing the lock
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def hold_lock(lock: Path, procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A real ``flock`` holder, as a shell script joining the lock would be.

    The script (which inherits the locked descriptor) holds the lock until its stdin closes.
    """
    holder = subprocess.Popen(
        ["flock", str(lock), "sh", "-c", "echo locked; read -r _"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    procs.append(holder)
    assert holder.stdout is not None
    assert holder.stdout.readline() == b"locked\n"
    return holder


def start_daemon(
    root: Path, log: Path, procs: list[subprocess.Popen[bytes]], *more_roots: Path
) -> Any:
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "postflightd", "watch", str(root)),
                *map(str, more_roots),
                *("--log-format", "json", "--log-level", "debug"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            env=dict(os.environ),
        )
    procs.append(proc)
    wait_until(
        "the daemon to start", lambda: events(log, "daemon_started") or proc.poll() is not None
    )
    assert proc.poll() is None, log.read_text()
    return proc


def status_of(root: Path) -> str:
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    return str(state["active_projects"][0]["status"])


def test_busy_lock_keeps_the_file_and_applies_it_once_released(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Held lock: the file waits (one log line); released: applied without a new event."""
    root = project(
        tmp_path / "proj",
        [task_entry(259, "prove_completeness")],
        artifacts=True,
    )
    user_config("[watch]\nrescan_interval_s = 0.5\n")
    holder = hold_lock(root / "specs" / ".state.lock", procs)
    other = project(tmp_path / "other", 1)  # a second project, its lock free
    log = tmp_path / "daemon.log"
    daemon = start_daemon(root, log, procs, other)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    wait_until("the lock_busy log line", lambda: events(log, "lock_busy"))
    # The next periodic rescan meets the file, and the lock, again. A file of the other
    # project written after that is handled on a later turn of the loop: once it is
    # applied, the retry is over.
    wait_until(
        "a periodic rescan retrying the file",
        lambda: any(
            e["root"] == str(root) and e["reason"] == "periodic" and e["changed"]
            for e in events(log, "rescan")
        ),
    )
    write_meta(other, "1_task1", researched_doc("1_task1"))
    wait_until("the other project's file applied", lambda: events(log, "applied"))
    assert [e["root"] for e in events(log, "applied")] == [str(other)]
    assert meta.exists()
    assert status_of(root) == "researching"
    assert len(events(log, "lock_busy")) == 1
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(10)
    wait_until("the file to be applied", lambda: not meta.exists(), timeout=30)
    assert status_of(root) == "researched"
    # Logged once the batch returns, a moment after the file is gone.
    wait_until("the lock_free log line", lambda: events(log, "lock_free"))
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(20) == 0


def test_sigterm_is_not_delayed_by_a_lock_held_by_another_process(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """A daemon facing a held lock still stops on SIGTERM, without first sitting out a lock
    wait of its own (the store's default wait is 30 s: longer than the deadline here)."""
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")], artifacts=True)
    hold_lock(root / "specs" / ".state.lock", procs)
    log = tmp_path / "daemon.log"
    daemon = start_daemon(root, log, procs)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    wait_until("the daemon to find the lock busy", lambda: events(log, "lock_busy"))
    # Keep it busy: a fresh event per rewrite, each one a new attempt at the lock.
    for n in range(5):
        doc = researched_doc()
        doc["next_steps"] = f"rewrite {n}"
        write_meta(root, "259_prove_completeness", doc)
        time.sleep(0.1)
    daemon.send_signal(signal.SIGTERM)
    # A deadline only: a daemon inside a 30 s lock wait would not exit before it.
    assert daemon.wait(25) == 0
    assert meta.exists()
    assert status_of(root) == "researching"
