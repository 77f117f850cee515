"""The daemon's periodic reconciliation: crash litter swept while it runs, not only at start,
and stuck runs whose record a busy lock postponed recorded then.

Real ``postflightd watch`` processes; the litter is what a killed writer leaves (a temporary
file beside state.json, a metadata file renamed aside for deletion), named by the pid of a
process that has exited; the busy lock is util-linux ``flock`` held by the test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.daemon_process import DaemonFactory, applied, in_progress_doc
from helpers.documents import final_text
from helpers.needs import require_tool
from helpers.project import error_records, meta_path, project, user_config
from helpers.waiting import wait_until

pytestmark = pytest.mark.slow


def dead_pid() -> int:
    """The pid of a process that has exited (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_periodic_reconciliation_sweeps_litter_left_after_the_start(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    user_config("[watch]\nrescan_interval_s = 0.5\n")
    root = project(tmp_path / "p", 2)
    daemon = start_daemon(root)
    daemon.wait_event("rescan")  # the start's sweep is over: what follows is new litter
    pid = dead_pid()
    specs = root / "specs"
    temp = specs / f".state.json.{pid}.0badf00d.tmp"
    temp.write_text("{half a state", encoding="utf-8")
    # A deletion killed between its rename aside and its unlink, of a file the journal has
    # never seen: it is put back and applied.
    aside = meta_path(root, 1).with_name(f"..return-meta.json.{pid}.0badf00d.deleting")
    aside.write_text(final_text(1), encoding="utf-8")

    wait_until("the temporary file removed", lambda: not temp.exists())
    wait_until("the set-aside file restored and applied", lambda: applied(root, 1))
    assert not aside.exists()
    notes = [e["note"] for e in daemon.events("crash_leftover")]
    assert any(temp.name in n and n.startswith("removed") for n in notes), notes
    assert any(n.startswith("restored") for n in notes), notes
    assert daemon.stop() == 0


def test_a_stuck_record_postponed_by_a_busy_lock_is_written_at_the_next_reconciliation(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    require_tool("flock", "it holds the project lock from outside (util-linux)")
    user_config("[watch]\nrescan_interval_s = 0.5\n")
    root = project(tmp_path / "p", 1, config="[timeouts]\nresearch = 1\n")
    daemon = start_daemon(root)
    ready = tmp_path / "locked"
    holder = subprocess.Popen(
        ["flock", str(root / "specs" / ".state.lock"), "sh", "-c", f"touch {ready}; sleep 60"],
        start_new_session=True,
    )
    try:
        wait_until("the holder to take the lock", ready.exists)
        meta_path(root, 1).write_text(json.dumps(in_progress_doc(1)), encoding="utf-8")
        (failed,) = daemon.wait_event("stuck_record_failed")
        assert failed["task"] == 1
        assert error_records(root, "timeout") == []
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    wait_until("the timeout record written", lambda: error_records(root, "timeout"))
    daemon.wait_event("stuck_recorded")
    assert len(daemon.events("stuck_record_failed")) == 1  # said once, not at every retry
    assert len(daemon.events("run_stuck")) == 1
    assert daemon.stop() == 0
