"""``postflightd status``: runs in flight read from the files, with or without a daemon."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.cli import main
from postflightd.durations import format_duration
from postflightd.fs.directory import Directory
from postflightd.fs.locks import InstanceLock, lock_holder, project_lock


def in_progress(started: datetime, **progress: Any) -> dict[str, Any]:
    doc = researched_doc()
    doc.update(
        status="in_progress",
        artifacts=[],
        started_at=started.isoformat(),
        partial_progress={"stage": "Analyzing APIs", "details": "reading", **progress},
    )
    return doc


@pytest.fixture
def root(tmp_path: Path) -> Path:
    tasks = [task_entry(259, "prove_completeness"), task_entry(260, "lsp_setup")]
    return project(tmp_path, tasks)


def test_status_json_lists_a_running_and_a_stuck_run(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC)
    write_meta(root, "259_prove_completeness", in_progress(now - timedelta(minutes=5)))
    stuck = in_progress(now - timedelta(hours=3), phases_completed=2, phases_total=5)
    write_meta(root, "260_lsp_setup", stuck)
    assert main(["status", "--format", "json", str(root)]) == 1  # a stuck run fails, like scan
    report = json.loads(capsys.readouterr().out)
    (entry,) = report["roots"]
    assert entry["daemon"] == {"running": False, "pid": None, "since": None}
    runs = {r["task"]: r for r in entry["runs"]}
    assert runs[259]["state"] == "running"
    assert runs[259]["stuck"] is False
    assert runs[259]["stage"] == "Analyzing APIs"
    assert runs[259]["session"] == SESSION
    assert runs[259]["agent"] == "neovim-research-agent"
    assert runs[259]["operation"] == "research"
    assert runs[259]["timeout_s"] == 3600
    assert 299 <= runs[259]["elapsed_s"] < runs[259]["timeout_s"]  # five minutes in, not stuck
    assert runs[260]["state"] == "stuck"
    assert (runs[260]["phases_completed"], runs[260]["phases_total"]) == (2, 5)


def test_status_text_shows_stage_phases_elapsed_and_stuck(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = datetime.now(UTC) - timedelta(hours=2, minutes=1)
    write_meta(root, "260_lsp_setup", in_progress(started, phases_completed=2, phases_total=5))
    assert main(["status", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{root}  (no daemon)" in out
    (row,) = [line for line in out.splitlines() if line.strip().startswith("260")]
    for text in ("in_progress", "neovim-research-agent", "Analyzing APIs", "2/5", "STUCK"):
        assert text in row
    assert "2h01m / 1h00m" in row
    assert out.rstrip().endswith("0 running, 1 stuck")


def test_status_shows_final_files_waiting_and_invalid_ones(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_meta(root, "259_prove_completeness", researched_doc())
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    truncated = write_meta(root, "260_lsp_setup", '{"status": "researched"')
    # Past the settle window: no longer "writing" (a writer would have finished), invalid.
    long_ago = truncated.stat().st_mtime - 60
    os.utime(truncated, (long_ago, long_ago))
    assert main(["status", "--format", "json", str(root)]) == 0
    runs = {r["task"]: r for r in json.loads(capsys.readouterr().out)["roots"][0]["runs"]}
    assert runs[259]["state"] == "waiting"
    assert runs[260]["state"] == "invalid"


def test_status_flags_an_invalid_in_progress_file_and_says_what_the_others_are(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An in_progress file that breaks the format is not shown as a normal running row; a
    finished file has no elapsed time; the last column has a header; the summary names each
    state it counts."""
    now = datetime.now(UTC)
    broken = in_progress(now - timedelta(minutes=5))
    del broken["partial_progress"]["details"]  # PF200: a required field is missing
    write_meta(root, "259_prove_completeness", broken)
    write_meta(root, "260_lsp_setup", researched_doc("260_lsp_setup"))
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    assert main(["scan", "--format", "json", str(root)]) == 1
    scanned = {f["task"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert scanned[259]["valid"] is False
    assert main(["status", "--format", "json", str(root)]) == 0
    runs = {r["task"]: r for r in json.loads(capsys.readouterr().out)["roots"][0]["runs"]}
    assert (runs[259]["status"], runs[259]["state"]) == ("in_progress", "invalid")
    assert main(["status", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.strip().startswith("TASK"))
    assert header.split()[-1] == "STATE"
    row_259 = next(line for line in lines if line.strip().startswith("259"))
    assert row_259.split()[-1] == "INVALID"
    assert "5m" in row_259  # still going: elapsed against its timeout
    row_260 = next(line for line in lines if line.strip().startswith("260"))
    assert "/" not in row_260.split("researched", 1)[1]  # a finished file: no elapsed time
    assert lines[-1] == "0 running, 0 stuck, 2 invalid"


def test_status_names_the_daemon_holding_the_root(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = InstanceLock(root / "specs")
    lock.acquire(root)
    try:
        with Directory.anchor(root / "specs") as specs:
            assert lock_holder(specs) is not None
        assert main(["status", "--format", "json", str(root)]) == 0
        entry = json.loads(capsys.readouterr().out)["roots"][0]
        assert entry["daemon"]["running"] is True
        assert entry["runs"] == []
        assert main(["status", str(root)]) == 0
        assert "daemon pid" in capsys.readouterr().out
    finally:
        lock.release()
    with Directory.anchor(root / "specs") as specs:
        assert lock_holder(specs) is None


def test_status_of_a_root_without_specs_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".postflightd.toml").write_text("")  # a project, without agents yet
    assert main(["status", str(tmp_path)]) == 0
    assert "no specs/ directory" in capsys.readouterr().out


def test_status_of_a_missing_root_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0, "0s"), (59.9, "59s"), (61, "1m01s"), (3600, "1h00m"), (-5, "0s")],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(86400, "1d00h"), (318 * 86400 + 15 * 3600 + 59, "318d15h")]
)
def test_durations_past_a_day_read_as_days_as_pf602_says(seconds: float, text: str) -> None:
    """One format everywhere: `status` no longer says 7647h07m where PF602 says 318d15h."""
    assert format_duration(seconds) == text


def test_a_task_directory_without_a_number_keeps_the_table_narrow(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long_name = "an_unnumbered_task_directory_" + "x" * 200
    write_meta(root, long_name, in_progress(datetime.now(UTC) - timedelta(minutes=5)))
    main(["status", str(root)])
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if "in_progress" in line]
    assert row.strip().startswith("? an_unnumbered_task_dir")
    assert long_name not in out
    assert ".return-meta.json" not in row
    assert len(row) < 120


def _final(root: Path, task_dir: str, doc: dict[str, Any], age: timedelta) -> Path:
    path = write_meta(root, task_dir, doc)
    then = (datetime.now(UTC) - age).timestamp()
    os.utime(path, (then, then))
    return path


def _waiting(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[int, dict[str, Any]]:
    assert main(["status", "--format", "json", str(root)]) == 0
    runs = json.loads(capsys.readouterr().out)["roots"][0]["runs"]
    return {r["task"]: r for r in runs if r["state"] == "waiting"}


def test_a_leftover_final_file_shows_its_age_and_why_it_waits_in_text_and_json(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A final file left 262 days ago, no daemon: its age (not a run's duration) and how to
    get it applied, in both formats."""
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    path = _final(root, "259_prove_completeness", researched_doc(), timedelta(days=262))
    run = _waiting(root, capsys)[259]
    assert "no daemon watches this root" in run["waiting"]
    assert f"postflightd watch {root}" in run["waiting"]
    since = datetime.fromisoformat(run["waiting_since"])
    assert abs(since.timestamp() - path.stat().st_mtime) < 0.01
    assert main(["status", str(root)]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.strip().startswith("259  ")]
    assert "final 262d00h ago" in row and "WAITING" in row
    start = f"start one with `postflightd watch {root}`"
    assert f"259 waits: no daemon watches this root: {start}" in out


def test_a_file_written_just_now_is_settling(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_meta(root, "259_prove_completeness", researched_doc())
    assert _waiting(root, capsys)[259]["waiting"].startswith("still settling")


def test_a_failed_file_waits_for_an_unusable_errors_json(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = researched_doc()
    failed.update(
        status="failed",
        artifacts=[],
        errors=[{"type": "timeout", "message": "ran out", "recoverable": True,
                 "recommendation": "retry"}],
    )  # fmt: skip
    _final(root, "259_prove_completeness", failed, timedelta(hours=1))
    write_artifact(root, "specs/260_lsp_setup/reports/research-001.md")
    _final(root, "260_lsp_setup", researched_doc("260_lsp_setup"), timedelta(hours=1))
    (root / "specs" / "errors.json").write_text('{"not": "an array"}')
    waiting = _waiting(root, capsys)
    assert "errors.json is unusable (not a JSON array)" in waiting[259]["waiting"]
    # A researched file writes no errors.json record: errors.json keeps nothing from it.
    assert "no daemon" in waiting[260]["waiting"]


def test_a_final_file_waits_for_a_busy_project_lock(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    _final(root, "259_prove_completeness", researched_doc(), timedelta(minutes=3))
    with Directory.anchor(root / "specs") as specs, project_lock(specs):
        run = _waiting(root, capsys)[259]
    assert run["waiting"].startswith("the project lock is busy")
    assert "no daemon" in _waiting(root, capsys)[259]["waiting"]  # free again


def test_a_final_file_waits_for_an_unusable_state_json_instead_of_being_invalid(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    _final(root, "259_prove_completeness", researched_doc(), timedelta(minutes=3))
    (root / "specs" / "state.json").write_text("{torn")
    run = _waiting(root, capsys)[259]
    assert run["waiting"].startswith("state.json is unusable")


def test_beside_a_daemon_a_final_file_is_queued_then_said_not_applied_with_where_to_look(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_artifact(root, "specs/260_lsp_setup/reports/research-001.md")
    _final(root, "259_prove_completeness", researched_doc(), timedelta(seconds=5))
    _final(root, "260_lsp_setup", researched_doc("260_lsp_setup"), timedelta(days=3))
    lock = InstanceLock(root / "specs")
    lock.acquire(root)
    try:
        assert main(["status", "--format", "json", str(root)]) == 0
        entry = json.loads(capsys.readouterr().out)["roots"][0]
        waiting = _waiting(root, capsys)
    finally:
        lock.release()
    started = datetime.fromisoformat(entry["daemon"]["since"])
    assert abs(started.timestamp() - (root / "specs" / ".postflightd.pid").stat().st_mtime) < 1
    assert waiting[259]["waiting"].startswith("queued: the daemon (pid ")
    assert waiting[260]["waiting"].startswith("the daemon (pid ")
    assert "its log says why" in waiting[260]["waiting"]
