"""The daemon heals outcomes lost to writers that ignore the lock, and never fights an edit.

Real processes throughout: ``postflightd watch``, a jq (or, without jq, Python) loop doing
read -> sleep -> write a temporary file -> rename over state.json without ``flock``, and the
CLI (``status``, ``verify``) as a user runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import DaemonFactory
from helpers.documents import final_text
from helpers.project import meta_path, project
from helpers.waiting import wait_until

pytestmark = pytest.mark.slow

PY_WRITER = """
import json, os, sys, time
specs, stop = sys.argv[1], sys.argv[2]
state, tmp = os.path.join(specs, "state.json"), os.path.join(specs, ".pywriter.tmp")
while not os.path.exists(stop):
    with open(state, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["writer_count"] = doc.get("writer_count", 0) + 1
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
    time.sleep(0.02)
    os.replace(tmp, state)
"""


def start_writer(specs: Path, stop: Path) -> subprocess.Popen[bytes]:
    """A writer that ignores the lock: it reads, sleeps 20 ms, then renames its copy over."""
    if shutil.which("jq") is not None:
        script = (
            'cd "$1" && while [ ! -e "$2" ]; do '
            "jq '.writer_count = ((.writer_count // 0) + 1)' state.json > .jq.tmp || exit 1; "
            "sleep 0.02; mv .jq.tmp state.json; done"
        )
        argv = ["bash", "-c", script, "writer", str(specs), str(stop)]
    else:
        argv = [sys.executable, "-c", PY_WRITER, str(specs), str(stop)]
    return subprocess.Popen(argv, stderr=subprocess.PIPE)


def state(root: Path) -> dict[str, Any]:
    return json.loads((root / "specs" / "state.json").read_text(encoding="utf-8"))


def entry(root: Path, n: int) -> dict[str, Any]:
    return next(t for t in state(root)["active_projects"] if t["project_number"] == n)


def researched(root: Path, n: int) -> bool:
    e = entry(root, n)
    return e["status"] == "researched" and bool(e["artifacts"])


def write_final(root: Path, n: int) -> None:
    """As an agent does: write a temporary file beside it, rename it into place."""
    path = meta_path(root, n)
    tmp = path.with_name(".meta.tmp")
    tmp.write_text(final_text(n), encoding="utf-8")
    tmp.replace(path)


def put_state(root: Path, data: bytes) -> None:
    tmp = root / "specs" / ".manual.tmp"
    tmp.write_bytes(data)
    tmp.replace(root / "specs" / "state.json")


def cli(*argv: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "postflightd", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, proc.stdout


def test_outcomes_reverted_by_a_non_locking_writer_are_all_healed(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    count = 40
    root = project(tmp_path / "p", count)
    daemon = start_daemon(root)
    specs = root / "specs"

    # One certain lost update first: a copy read before the postflight, renamed over after.
    stale = (specs / "state.json").read_bytes()
    write_final(root, 1)
    wait_until("task 1 applied", lambda: researched(root, 1) and not meta_path(root, 1).exists())
    put_state(root, stale)
    daemon.wait_event("reapplied")
    wait_until("task 1 healed", lambda: researched(root, 1))

    # Then the hammering: the writer rewrites state.json every ~20 ms while agents finish.
    stop = tmp_path / "stop-writer"
    writer = start_writer(specs, stop)
    try:
        for n in range(2, count + 1):
            write_final(root, n)
            time.sleep(0.03)
        wait_until(
            "every metadata file applied and deleted",
            lambda: not any(meta_path(root, n).exists() for n in range(2, count + 1)),
            timeout=60,
        )
        # Let the writer revert a few more after the last postflight.
        rewrites = state(root).get("writer_count", 0)
        wait_until(
            "three more rewrites by the writer",
            lambda: state(root).get("writer_count", 0) >= rewrites + 3,
        )
    finally:
        stop.touch()
        _, err = writer.communicate(timeout=10)
    assert writer.returncode == 0, err
    assert state(root).get("writer_count", 0) > 0  # it did run against the daemon
    wait_until(
        "every outcome present after the writer stopped",
        lambda: all(researched(root, n) for n in range(1, count + 1)),
        timeout=30,
    )
    reapplied = daemon.events("reapplied")
    assert len(reapplied) >= 1
    for event in reapplied:
        assert {"root", "task", "session", "file"} <= set(event)
    assert not daemon.events("outcome_overwritten")  # the writer never edited a task

    def status_count() -> int | None:
        code, out = cli("status", str(root), "--format", "json")
        assert code == 0
        healing = json.loads(out)["roots"][0]["healing"]
        return int(healing["reapplied"]) if healing else None

    # The count is the journal's: every re-application the log reported.
    wait_until(
        "status to count every re-application",
        lambda: status_count() == len(daemon.events("reapplied")),
    )
    code, out = cli("verify", str(root), "--format", "json")
    assert code == 0, out
    assert json.loads(out)["summary"]["checked"] == count
    assert daemon.stop() == 0


def test_a_deliberate_edit_is_logged_once_and_never_reverted(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "p", 3)
    daemon = start_daemon(root)
    write_final(root, 1)
    wait_until("task 1 applied", lambda: researched(root, 1) and not meta_path(root, 1).exists())
    doc = state(root)
    task = doc["active_projects"][0]
    # Neither the entry before the postflight nor the one after it.
    task["status"] = "researching"
    task["note"] = "reopened by hand"
    put_state(root, (json.dumps(doc, indent=2) + "\n").encode())
    edited = entry(root, 1)
    (event,) = daemon.wait_event("outcome_overwritten")
    assert event["task"] == 1
    assert event["reverted"] == ["status"]

    # More state.json writes, ours and someone else's: the edit stays, logged only once.
    write_final(root, 2)
    wait_until("task 2 applied", lambda: researched(root, 2) and not meta_path(root, 2).exists())
    doc = state(root)
    doc["writer_count"] = 1
    put_state(root, json.dumps(doc).encode())
    write_final(root, 3)
    wait_until("task 3 applied", lambda: researched(root, 3) and not meta_path(root, 3).exists())
    assert entry(root, 1) == edited
    assert len(daemon.events("outcome_overwritten")) == 1
    assert not daemon.events("reapplied")

    code, out = cli("verify", str(root), "--format", "json")
    assert code == 1
    (reported,) = json.loads(out)["outcomes"]
    assert (reported["task"], reported["verdict"]) == (1, "reverted")
    code, out = cli("verify", str(root), "--repair", "--format", "json")
    assert code == 1
    assert not json.loads(out)["outcomes"][0]["repaired"]
    assert entry(root, 1) == edited
    code, out = cli("status", str(root), "--format", "json")
    healing = json.loads(out)["roots"][0]["healing"]
    assert (healing["reapplied"], healing["overwritten"]) == (0, 1)
    assert daemon.stop() == 0


def test_healing_can_be_turned_off(tmp_path: Path, start_daemon: DaemonFactory) -> None:
    """``[watch] heal_window_s = 0``: a lost update stays lost (``verify`` still finds it)."""
    root = project(tmp_path / "p", 2, config="[watch]\nheal_window_s = 0\n")
    daemon = start_daemon(root)
    stale = (root / "specs" / "state.json").read_bytes()
    write_final(root, 1)
    wait_until("task 1 applied", lambda: researched(root, 1) and not meta_path(root, 1).exists())
    put_state(root, stale)
    # The daemon saw that write: a postflight of task 2 after it proves it was processed.
    write_final(root, 2)
    wait_until("task 2 applied", lambda: researched(root, 2) and not meta_path(root, 2).exists())
    assert not researched(root, 1)
    assert not daemon.events("reapplied")
    code, _ = cli("verify", str(root))
    assert code == 1
    assert daemon.stop() == 0
    assert os.path.exists(root / "specs" / "state.json")
