"""One bad file never blocks the others: PF106, and the rest of the batch commits.

Each kind of file that validates but cannot be journaled, rendered or written sits in a batch
with valid files, through every entry point, as real processes: ``process``, ``scan --apply``,
``hook claude`` and the daemon.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.daemon_process import terminate
from helpers.documents import researched_doc, task_entry
from helpers.project import project, user_config, write_artifact, write_meta
from helpers.waiting import wait_until
from postflightd.journal.database import Journal, default_journal_path

#: Real daemons and console-script runs in bulk: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

GOOD = ("259_prove_completeness", "260_second_task")
KINDS = ["surrogate_session", "non_utf8_dir", "huge_phases"]
DIGITS = 4300


def run(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *argv],
        capture_output=True,
        check=False,
        input=stdin.encode() if stdin is not None else None,
        timeout=120,
    )


def text(out: bytes) -> str:
    # A name that is not UTF-8 reaches the output as its own bytes (made inert elsewhere).
    return out.decode("utf-8", "surrogateescape")


def bad_file(root: Path, kind: str) -> Path:
    """Write the bad file of ``kind`` for task 261; its path (as os.fsdecode gives it)."""
    specs = root / "specs"
    if kind == "surrogate_session":
        doc = json.dumps(researched_doc("261_bad_task"), indent=2)
        # A JSON escape for a lone surrogate: valid JSON, valid UTF-8 bytes, no UTF-8 string.
        doc = doc.replace('"sess_1736700000_abc123"', '"sess_1736700000_\\ud800"')
        write_artifact(root, "specs/261_bad_task/reports/research-001.md")
        return write_meta(root, "261_bad_task", doc)
    if kind == "non_utf8_dir":
        task_dir = os.fsdecode(os.path.join(os.fsencode(specs), b"261_bad_task\xff"))
        os.mkdir(task_dir)
        doc = researched_doc("261_bad_task")
        doc["status"] = "failed"
        doc["artifacts"] = []
        doc["errors"] = [
            {"type": "x", "message": "it broke", "recoverable": True, "recommendation": "retry"}
        ]
        path = Path(task_dir) / ".return-meta.json"
        path.write_text(json.dumps(doc, indent=2), "utf-8")
        return path
    # 4,300 nines parse (the limit is on longer numbers), but resume_phase = that + 1 has
    # 4,301 digits, past what json will print.
    nines = "9" * DIGITS
    doc = json.dumps(
        {
            **researched_doc("261_bad_task"),
            "status": "partial",
            "artifacts": [],
            "partial_progress": {"stage": "s", "details": "d", "phases_completed": 0},
            "errors": [
                {"type": "x", "message": "m", "recoverable": True, "recommendation": "resume"}
            ],
        },
        indent=2,
    ).replace('"phases_completed": 0', f'"phases_completed": {nines}, "phases_total": {nines}')
    return write_meta(root, "261_bad_task", doc)


def batch_with_a_bad_file(root: Path, kind: str) -> tuple[Path, list[Path], Path]:
    bad_entry = task_entry(261, "bad_task")
    # No session in state.json for the bad task: the lone surrogate must not be caught by
    # PF405 (a different session) before it reaches the journal.
    del bad_entry["session_id"]
    tasks = [task_entry(259, "prove_completeness"), task_entry(260, "second_task"), bad_entry]
    project(root, tasks, todo=True, artifacts=[259, 260])
    good = []
    for task_dir in GOOD:
        good.append(write_meta(root, task_dir, researched_doc(task_dir)))
    return root, good, bad_file(root, kind)


def assert_good_applied_bad_kept(root: Path, good: list[Path], bad: Path) -> None:
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    status = {t["project_number"]: t["status"] for t in state["active_projects"]}
    assert status == {259: "researched", 260: "researched", 261: "researching"}
    assert not any(p.exists() for p in good)
    assert bad.exists()
    todo = (root / "specs" / "TODO.md").read_text("utf-8")
    assert todo.count("[RESEARCHED]") == 2
    with Journal.open(default_journal_path()) as journal:
        applied = {r.task for r in journal.history(limit=1000) if r.kind == "postflighted"}
    assert applied == {259, 260}


@pytest.mark.parametrize("kind", KINDS)
def test_scan_apply_commits_the_batch_without_the_bad_file(tmp_path: Path, kind: str) -> None:
    root, good, bad = batch_with_a_bad_file(tmp_path / "p", kind)
    done = run("scan", "--apply", str(root))
    assert done.returncode == 1, text(done.stdout) + text(done.stderr)  # PF106: an error
    assert "PF106" in text(done.stdout)
    assert_good_applied_bad_kept(root, good, bad)
    # errors.json took the bad file's validation_failed record: valid JSON, escapes and all.
    errors = json.loads((root / "specs" / "errors.json").read_text("utf-8"))
    assert any("PF106" in e["message"] for e in errors)

    again = run("scan", "--apply", str(root))
    assert again.returncode == 1
    assert bad.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_process_reports_the_bad_file_and_applies_the_good_ones(tmp_path: Path, kind: str) -> None:
    root, good, bad = batch_with_a_bad_file(tmp_path / "p", kind)
    refused = run("process", os.fsdecode(bad))
    assert refused.returncode == 1, text(refused.stdout) + text(refused.stderr)
    assert "PF106" in text(refused.stdout)
    for path in good:
        done = run("process", str(path))
        assert done.returncode == 0, text(done.stdout) + text(done.stderr)
    assert_good_applied_bad_kept(root, good, bad)


@pytest.mark.parametrize("kind", KINDS)
def test_hook_applies_the_good_files_and_blocks_on_the_bad_one(tmp_path: Path, kind: str) -> None:
    root, good, bad = batch_with_a_bad_file(tmp_path / "p", kind)
    done = run("hook", "claude", stdin=json.dumps({"cwd": str(root), "stop_hook_active": False}))
    assert done.returncode == 0, text(done.stderr)
    answer = json.loads(text(done.stdout))
    assert answer["decision"] == "block" and "PF106" in answer["reason"]
    assert_good_applied_bad_kept(root, good, bad)


@pytest.mark.parametrize("kind", KINDS)
def test_daemon_applies_the_batch_around_the_bad_file(tmp_path: Path, kind: str) -> None:
    """Present at start (one batch), then rescanned: the good files go, the bad one stays."""
    root, good, bad = batch_with_a_bad_file(tmp_path / "p", kind)
    user_config("[watch]\nrescan_interval_s = 0.3\n")
    log_path = tmp_path / "daemon.log"
    with log_path.open("wb") as log_file:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "postflightd",
                "watch",
                str(root),
                "--log-format",
                "json",
                "--log-level",
                "debug",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    try:
        wait_until("the good files to go", lambda: not any(p.exists() for p in good))
        # A few periodic rescans later the bad file is still reported, never applied, and the
        # daemon is alive.
        wait_until("a later rescan", lambda: log_path.read_text().count('"rescan"') >= 3)
        assert daemon.poll() is None, log_path.read_text()
        assert_good_applied_bad_kept(root, good, bad)
        assert "PF106" in log_path.read_text()
        assert "postflight_failed" not in log_path.read_text()
    finally:
        terminate(daemon)
    assert daemon.returncode == 0, log_path.read_text()


# --- an artifact path the system cannot be asked about -----------------------------------------


def unnameable_artifact(root: Path) -> tuple[Path, Path]:
    """Task 1's file names an artifact with a lone surrogate (the JSON escape ``\\ud800``):
    no file name can hold it. Task 2's file is valid. (bad, good)"""
    project(root, 2)
    text = json.dumps(researched_doc("1_task1")).replace("research-001.md", "\\ud800x.md")
    bad = write_meta(root, "1_task1", text)
    return bad, write_meta(root, "2_task2", researched_doc("2_task2"))


def assert_pf501_for_that_file_alone(done: subprocess.CompletedProcess[bytes]) -> str:
    out = text(done.stdout) + text(done.stderr)
    assert "internal error" not in out and "Traceback" not in out, out
    assert "PF501" in out and "lone surrogate" in out, out
    return out


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_scan_reports_an_unnameable_artifact_path_as_pf501_in_every_format(
    tmp_path: Path, fmt: str
) -> None:
    unnameable_artifact(tmp_path / "p")
    done = run("scan", "--format", fmt, str(tmp_path / "p"))
    assert done.returncode == 1, text(done.stdout) + text(done.stderr)
    assert_pf501_for_that_file_alone(done)


def test_status_shows_the_file_with_an_unnameable_artifact_path_invalid(tmp_path: Path) -> None:
    unnameable_artifact(tmp_path / "p")
    done = run("status", str(tmp_path / "p"))
    assert done.returncode != 70, text(done.stderr)
    assert "1 invalid" in text(done.stdout)
    assert "internal error" not in text(done.stderr)


def test_process_and_the_hook_refuse_only_the_file_with_an_unnameable_artifact_path(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    bad, good = unnameable_artifact(root)
    refused = run("process", str(bad))
    assert refused.returncode == 1
    assert_pf501_for_that_file_alone(refused)
    done = run("hook", "claude", stdin=json.dumps({"cwd": str(root), "stop_hook_active": False}))
    assert done.returncode == 0, text(done.stderr)
    answer = json.loads(text(done.stdout))
    assert answer["decision"] == "block" and "PF501" in answer["reason"]
    assert bad.exists() and not good.exists()  # the valid file was applied beside it
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    assert [t["status"] for t in state["active_projects"]] == ["researching", "researched"]
