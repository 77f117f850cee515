"""The daemon's log as a person reads it on a terminal, and as journald keeps it: the same
fields, durations and lists written for people on the console, numbers and lists in JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helpers.daemon_process import in_progress_doc
from helpers.project import project, write_meta
from helpers.waiting import wait_until


def _stuck_and_truncated(root: Path) -> None:
    project(root, 2)
    stuck = in_progress_doc(1)
    stuck["started_at"] = (datetime.now(UTC) - timedelta(days=3, hours=4)).isoformat()
    write_meta(root, "1_task1", stuck)
    truncated = write_meta(root, "2_task2", '{"status": "researched"')
    old = truncated.stat().st_mtime - 120  # long past the settle window: a dead writer's file
    os.utime(truncated, (old, old))


def _daemon_log(root: Path, tmp_path: Path, fmt: str, until: str) -> str:
    log = tmp_path / f"daemon-{fmt}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "watch", str(root), "--log-format", fmt],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_until(
            f"{until!r} in the {fmt} log",
            lambda: until in log.read_text("utf-8", errors="replace") or proc.poll() is not None,
        )
    finally:
        proc.terminate()
        proc.wait(30)
    return log.read_text("utf-8", errors="replace")


@pytest.mark.slow
def test_console_log_writes_durations_and_findings_for_people(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _stuck_and_truncated(root)
    text = _daemon_log(root, tmp_path, "console", "run_stuck")
    text = text + _daemon_log(root, tmp_path, "console", "PF102")
    stuck = next(line for line in text.splitlines() if "run_stuck" in line)
    assert "elapsed_s" not in stuck
    assert re.search(r"elapsed=3d0[34]h", stuck), stuck  # as durations read everywhere else
    assert re.search(r"timeout=1h00m", stuck), stuck
    invalid = next(line for line in text.splitlines() if "PF102" in line)
    assert re.match(r"\d\d:\d\d:\d\d 2 invalid PF102: specs/2_task2/.return-meta.json$", invalid)


def _invalid_planner_file(root: Path) -> None:
    """A file with many findings, each of which has a long message, written by planner-agent."""
    project(root, 1)
    write_meta(
        root,
        "1_task1",
        {
            "status": "planned",
            "summary": "x" * 5000,
            "metadata": {"agent_type": "planner-agent", "session_id": "sess_1_a"},
            "artifacts": [{"type": "plan", "path": "../" * 200 + "etc/passwd"}],
            "next_steps": 7,
        },
    )


@pytest.mark.slow
def test_console_log_names_an_invalid_files_codes_and_agent_on_a_short_line(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    _invalid_planner_file(root)
    text = _daemon_log(root, tmp_path, "console", " invalid ")
    invalid = next(line for line in text.splitlines() if " invalid " in line)
    assert len(invalid) < 200, invalid
    assert re.match(r"\d\d:\d\d:\d\d 1 invalid PF\d\d\d(, PF\d\d\d)+ \(planner-agent\): ", invalid)
    assert invalid.endswith(": specs/1_task1/.return-meta.json"), invalid
    assert "session" not in invalid
    assert "root=" not in invalid


@pytest.mark.slow
def test_json_log_keeps_seconds_and_lists_for_machines(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _stuck_and_truncated(root)
    text = _daemon_log(root, tmp_path, "json", '"run_stuck"')
    text += _daemon_log(root, tmp_path, "json", "PF102")
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    stuck = next(e for e in events if e["event"] == "run_stuck")
    assert stuck["elapsed_s"] > 3 * 86400
    assert stuck["timeout_s"] == 3600
    invalid = next(e for e in events if e["event"] == "invalid")
    assert isinstance(invalid["findings"], list)
    assert any(f.startswith("PF102: ") for f in invalid["findings"])


@pytest.mark.slow
def test_json_log_keeps_an_invalid_files_full_findings_and_agent(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _invalid_planner_file(root)
    text = _daemon_log(root, tmp_path, "json", '"invalid"')
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    invalid = next(e for e in events if e["event"] == "invalid")
    assert invalid["agent"] == "planner-agent"
    assert invalid["session"] == "sess_1_a"
    assert invalid["root"] == str(root)
    assert invalid["status"] == "planned"
    assert len(invalid["findings"]) > 2
    assert all(re.match(r"PF\d\d\d[ :].*: \S", f) for f in invalid["findings"])
    assert sum(len(f) for f in invalid["findings"]) > 200  # the messages, whole


@pytest.mark.slow
def test_a_restart_sums_up_the_files_unchanged_since_the_last_run_in_one_line(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    project(root, 3)
    for n in (1, 2, 3):
        meta = write_meta(root, f"{n}_task{n}", {"status": "planned", "metadata": {}})
        old = meta.stat().st_mtime - 120  # settled
        os.utime(meta, (old, old))
    first = _daemon_log(root, tmp_path, "console", "daemon_started")
    assert first.count(" invalid ") == 3, first
    rewritten = write_meta(root, "3_task3", {"status": "planned", "metadata": {"x": 1}})
    old = rewritten.stat().st_mtime - 120
    os.utime(rewritten, (old, old))
    again = _daemon_log(root, tmp_path, "console", "daemon_started")
    invalid = [line for line in again.splitlines() if " invalid " in line]
    assert len(invalid) == 1, again  # the rewritten file only
    assert invalid[0].endswith("specs/3_task3/.return-meta.json"), again
    assert "run_reported" not in again.replace("3 run_reported", ""), again
    assert re.search(r"unchanged_since_last_run root=\S+ files=2$", again, re.MULTILINE), again


@pytest.mark.slow
def test_a_restart_sums_up_a_file_that_does_not_parse_with_the_others(tmp_path: Path) -> None:
    """A dead writer's truncated file waits at start until it settles: once it has, it is
    judged against the last run's journal too, and the summary line waits for it, rather than
    its run and its PF102 being logged again at every restart."""
    root = tmp_path / "p"
    project(root, 2)
    invalid = write_meta(root, "1_task1", {"status": "planned", "metadata": {}})
    truncated = write_meta(root, "2_task2", '{"status": "researched"')
    for meta in (invalid, truncated):
        old = meta.stat().st_mtime - 120  # settled
        os.utime(meta, (old, old))
    first = _daemon_log(root, tmp_path, "console", "PF102")
    assert first.count(" invalid ") == 2, first
    again = _daemon_log(root, tmp_path, "console", "unchanged_since_last_run")
    assert re.search(r"unchanged_since_last_run root=\S+ files=2$", again, re.MULTILINE), again
    assert " invalid " not in again, again
    assert "run_reported" not in again, again
