"""A final file applied long after the agent wrote it (a leftover) keeps its own date.

Through the real CLI (``process``, ``scan``, ``scan --apply``, ``report``) on real files
whose modification time is set with ``os.utime``: the outcome's time is when the agent wrote
its final file, clamped between its ``started_at`` and now; a leftover is PF607 and is left
out of the report's durations. The daemon's side is in tests/daemon/test_leftover.py.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc
from helpers.project import meta_path, project, write_artifact, write_meta
from postflightd.cli import main
from postflightd.timestamps import parse_timestamp

#: when the agent wrote the leftover: months before the test runs
LEFT_DAYS = 261


def implemented_doc(n: int, started: datetime | None) -> dict[str, Any]:
    """A valid ``implemented`` file for task n (directory ``{n}_task{n}``)."""
    doc = researched_doc(f"{n}_task{n}")
    doc["status"] = "implemented"
    doc["artifacts"] = [
        {"type": "summary", "path": f"specs/{n}_task{n}/summaries/s.md", "summary": "Summary"}
    ]
    doc["completion_data"] = {"completion_summary": "Done."}
    meta = doc["metadata"]
    meta["agent_type"] = "general-implementation-agent"
    meta["delegation_path"] = ["orchestrator", "implement", "general-implementation-agent"]
    if started is not None:
        doc["started_at"] = started.isoformat().replace("+00:00", "Z")
    return doc


def set_mtime(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


def entry(root: Path, n: int) -> dict[str, Any]:
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    return next(t for t in state["active_projects"] if t["project_number"] == n)


def stamp(value: str) -> datetime:
    parsed = parse_timestamp(value)
    assert parsed is not None, value
    return parsed


def leftover_project(tmp_path: Path) -> tuple[Path, Path, datetime]:
    """Task 1 with an implemented file the agent wrote LEFT_DAYS ago, an hour into its run."""
    root = project(tmp_path / "proj", 2)
    written = (datetime.now(UTC) - timedelta(days=LEFT_DAYS)).replace(microsecond=0)
    write_artifact(root, "specs/1_task1/summaries/s.md")
    meta = write_meta(root, "1_task1", implemented_doc(1, written - timedelta(hours=1)))
    set_mtime(meta, written)
    return root, meta, written


def test_process_applies_a_leftover_with_the_date_it_was_written_and_pf607(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, meta, written = leftover_project(tmp_path)

    assert main(["process", str(meta), "--format", "json"]) == 0

    out = json.loads(capsys.readouterr().out)
    codes = [f["code"] for f in out["findings"]]
    assert codes == ["PF607"], out
    (pf607,) = out["findings"]
    assert pf607["severity"] == "warning"
    assert f"left {LEFT_DAYS} days ago" in pf607["message"]
    assert written.date().isoformat() in pf607["message"]
    task = entry(root, 1)
    assert task["status"] == "completed"
    assert stamp(task["completed"]) == written
    assert stamp(task["last_updated"]) == written
    todo = (root / "specs" / "TODO.md").read_text("utf-8")
    assert f"- **Completed**: {written.date().isoformat()}" in todo
    assert datetime.now(UTC).date().isoformat() not in todo
    assert not meta.exists()


def test_report_leaves_an_applied_leftover_out_of_the_durations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its first sight is today, its start months ago: no 261-day run in the figures."""
    root, meta, written = leftover_project(tmp_path)
    assert main(["process", str(meta)]) == 0
    capsys.readouterr()

    assert main(["report", str(root), "--since", "all", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (operation,) = report["operations"]
    assert operation["runs"] == 1
    assert operation["timed_runs"] == 0
    assert operation["median_s"] is None
    assert main(["history", "--root", str(root), "--since", "all", "--format", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["duration_seconds"] is None
    # It ended when its agent wrote it, the date its task entry got, not today.
    assert stamp(run["ended"]) == written
    assert stamp(run["started"]) == written - timedelta(hours=1)


def test_scan_warns_of_a_leftover_without_failing_and_scan_apply_keeps_its_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, meta, written = leftover_project(tmp_path)

    assert main(["scan", str(root)]) == 0  # a warning does not fail a scan...
    assert "PF607" in capsys.readouterr().out
    assert main(["scan", "--strict", str(root)]) == 1  # ...but does under --strict
    capsys.readouterr()

    assert main(["scan", "--apply", str(root)]) == 0
    assert "PF607" in capsys.readouterr().out
    assert stamp(entry(root, 1)["completed"]) == written
    assert not meta.exists()


def test_a_fresh_final_file_gets_its_own_modification_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "proj", 1)
    meta = write_meta(root, "1_task1", researched_doc("1_task1"))
    written = datetime.fromtimestamp(meta.stat().st_mtime_ns / 1e9, UTC)

    assert main(["process", str(meta), "--format", "json"]) == 0

    assert json.loads(capsys.readouterr().out)["findings"] == []
    task = entry(root, 1)
    # Stamped to the second: the file's time, not the (later) moment it was applied.
    assert stamp(task["researched"]) == written.replace(microsecond=0)
    assert stamp(task["last_updated"]) == written.replace(microsecond=0)


def test_a_modification_time_before_started_at_gives_started_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "proj", 1)
    started = (datetime.now(UTC) - timedelta(minutes=10)).replace(microsecond=0)
    doc = researched_doc("1_task1")
    doc["started_at"] = started.isoformat()
    meta = write_meta(root, "1_task1", doc)
    set_mtime(meta, started - timedelta(hours=3))  # a clock that was wrong, a copied file

    assert main(["process", str(meta)]) == 0

    assert stamp(entry(root, 1)["researched"]) == started


def test_a_modification_time_in_the_future_gives_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "proj", 1)
    meta = write_meta(root, "1_task1", researched_doc("1_task1"))
    set_mtime(meta, datetime.now(UTC) + timedelta(days=30))
    before = datetime.now(UTC).replace(microsecond=0)

    assert main(["process", str(meta)]) == 0

    after = datetime.now(UTC)
    assert before <= stamp(entry(root, 1)["researched"]) <= after
    assert not meta_path(root, 1).exists()
