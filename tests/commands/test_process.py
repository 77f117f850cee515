"""`postflightd process`, `scan --apply` and `history`, end to end on real files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.cli import main

TODO = """---
title: tasks
---

# TODO

### 259. Prove completeness
- **Effort**: 4 hours
- **Status**: [RESEARCHING]
- **Language**: lean4

### 260. Other task
- **Status**: [PLANNING]
"""

#: Task 259 ready for a researched file (its report exists); task 260 without a report.
TASKS = [task_entry(259, "prove_completeness"), task_entry(260, "other_task")]


def state(root: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    return doc


def task(root: Path, number: int) -> dict[str, Any]:
    return next(t for t in state(root)["active_projects"] if t["project_number"] == number)


def errors_json(root: Path) -> list[dict[str, Any]]:
    path = root / "specs" / "errors.json"
    return json.loads(path.read_text("utf-8")) if path.exists() else []


def test_process_applies_researched_outcome_and_deletes_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """state.json, TODO.md and the journal all get the outcome; the file is gone."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    other_before = task(root, 260)

    assert main(["process", str(meta)]) == 0

    entry = task(root, 259)
    assert entry["status"] == "researched"
    assert entry["session_id"] == SESSION
    assert [a["path"] for a in entry["artifacts"]] == [
        "specs/259_prove_completeness/reports/research-001.md"
    ]
    assert entry["artifacts"][0]["type"] == "research"
    assert task(root, 260) == other_before
    todo = (root / "specs" / "TODO.md").read_text("utf-8")
    assert "- **Status**: [RESEARCHED]" in todo
    assert "research-001.md](specs/259_prove_completeness/reports/research-001.md)" in todo
    assert "### 260. Other task\n- **Status**: [PLANNING]\n" in todo
    assert not meta.exists()
    assert "applied" in capsys.readouterr().out

    assert main(["history", "--events", "--task", "259", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    kinds = [r["kind"] for r in rows]
    assert "postflighted" in kinds and "deleted" in kinds
    content = next(r["content"] for r in rows if r["kind"] == "postflighted")
    assert json.loads(content) == researched_doc()


def test_process_twice_is_idempotent(tmp_path: Path) -> None:
    """The same file applied twice gives the same state.json (no duplicate artifacts)."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    assert main(["process", str(meta)]) == 0
    first = task(root, 259)
    write_meta(root, "259_prove_completeness", researched_doc())
    assert main(["process", str(meta)]) == 0
    second = task(root, 259)
    assert len(second["artifacts"]) == 1
    assert {k: v for k, v in second.items() if k not in {"last_updated", "researched"}} == {
        k: v for k, v in first.items() if k not in {"last_updated", "researched"}
    }


def test_process_in_progress_exits_3_and_records_interruption_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An in_progress file: exit 3, one delegation_interrupted record, task status untouched;
    the second run says the record was there already, not that it recorded it."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    doc = {
        "status": "in_progress",
        "started_at": datetime.now(UTC).isoformat(),
        "artifacts": [],
        "partial_progress": {"stage": "init", "details": "started"},
        "metadata": researched_doc()["metadata"],
    }
    meta = write_meta(root, "259_prove_completeness", doc)
    assert main(["process", str(meta)]) == 3
    assert "interrupted; recorded in errors.json, task status" in capsys.readouterr().out
    assert main(["process", str(meta)]) == 3
    assert "interrupted; already recorded in errors.json, task" in capsys.readouterr().out
    records = [r for r in errors_json(root) if r["type"] == "delegation_interrupted"]
    assert len(records) == 1
    assert records[0]["context"]["session_id"] == SESSION
    assert records[0]["fix_status"] == "unfixed"
    assert task(root, 259)["status"] == "researching"
    assert meta.exists()


def test_process_invalid_file_is_kept_and_logged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file with errors: exit 1, left in place, one validation_failed record."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    doc = researched_doc()
    doc["status"] = "completed"
    meta = write_meta(root, "259_prove_completeness", doc)
    before = (root / "specs" / "state.json").read_bytes()
    assert main(["process", str(meta)]) == 1
    assert main(["process", str(meta)]) == 1
    out = capsys.readouterr().out
    assert "PF203" in out
    assert meta.exists()
    assert (root / "specs" / "state.json").read_bytes() == before
    assert [r["type"] for r in errors_json(root)] == ["validation_failed"]


def test_task_missing_at_commit_is_pf600_and_the_file_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ignore PF600 lets a file for a task state.json lacks validate; the commit finds the
    task missing (a value, not an exception), drops the file with PF600 and keeps it."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    write_artifact(root, "specs/999_gone/reports/research-001.md")
    doc = researched_doc()
    doc["artifacts"][0]["path"] = "specs/999_gone/reports/research-001.md"
    meta = write_meta(root, "999_gone", doc)
    before = (root / "specs" / "state.json").read_bytes()
    assert main(["process", "--dry-run", str(meta), "--ignore", "PF600"]) == 0
    assert "+++" not in capsys.readouterr().out
    assert main(["process", str(meta), "--ignore", "PF600"]) == 1
    out = capsys.readouterr().out
    assert "PF600" in out
    assert "task 999 is not in state.json" in out
    assert meta.exists()
    assert (root / "specs" / "state.json").read_bytes() == before


@pytest.mark.parametrize("command", ["process", "scan"])
def test_ignored_pf104_file_without_a_task_number_is_invalid_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """--ignore PF104 lets a file in `notes/` validate, but it cannot be applied: exit 1."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    meta = write_meta(root, "notes", researched_doc())
    before = (root / "specs" / "state.json").read_bytes()
    argv = ["process", str(meta)] if command == "process" else ["scan", "--apply", str(root)]
    assert main([*argv, "--ignore", "PF104"]) == 1
    out = capsys.readouterr().out
    assert "PF104" in out
    assert "postflight needs the task number" in out
    assert meta.exists()
    assert (root / "specs" / "state.json").read_bytes() == before
    assert [r["type"] for r in errors_json(root)] == ["validation_failed"]


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"active_projects": 5}', ""],
    ids=["truncated", "array", "wrong-shape", "empty"],
)
def test_process_with_unusable_state_exits_4_and_touches_nothing(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """PF604: state.json is never overwritten, the metadata file is kept."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    state_path = root / "specs" / "state.json"
    state_path.write_text(content, encoding="utf-8")
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    assert main(["process", str(meta), "--format", "json"]) == 4
    report = json.loads(capsys.readouterr().out)
    assert report["outcome"] == "state_unusable"
    assert any(f["code"] == "PF604" for f in report["findings"])
    assert state_path.read_text(encoding="utf-8") == content
    assert meta.exists()
    assert not (root / "specs" / "errors.json").exists()


def test_process_with_missing_state_exits_4_and_creates_nothing(tmp_path: Path) -> None:
    """A missing state.json is not created."""
    root = project(tmp_path / "proj", None)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    assert main(["process", str(meta)]) == 4
    assert not (root / "specs" / "state.json").exists()
    assert meta.exists()


def test_process_outside_a_project_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path that is not ROOT/specs/N_slug/file, or does not exist: exit 2, one line."""
    loose = tmp_path / "loose" / ".return-meta.json"
    loose.parent.mkdir()
    loose.write_text("{}", encoding="utf-8")
    assert main(["process", str(loose)]) == 2
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    missing = root / "specs" / "259_prove_completeness" / ".return-meta.json"
    assert main(["process", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "not inside a project" in err and "no such file" in err
    assert "Traceback" not in err


def test_process_removes_marker_and_loop_guard_of_the_same_session(tmp_path: Path) -> None:
    """Markers naming the same session go with the file; another task's markers stay."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    task_dir = meta.parent
    (task_dir / ".postflight-pending").write_text(
        json.dumps({"session_id": SESSION, "operation": "research"}), encoding="utf-8"
    )
    (task_dir / ".postflight-loop-guard").write_text("1", encoding="utf-8")
    other = root / "specs" / "260_other_task"
    other.mkdir()
    (other / ".postflight-pending").write_text("{}", encoding="utf-8")
    assert main(["process", str(meta)]) == 0
    assert not (task_dir / ".postflight-pending").exists()
    assert not (task_dir / ".postflight-loop-guard").exists()
    assert (other / ".postflight-pending").exists()


def test_scan_apply_group_commits_many_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scan --apply applies every valid final file and leaves invalid and in_progress ones."""
    tasks = [task_entry(n, f"task_{n}") for n in range(1, 41)]
    root = project(tmp_path / "proj", tasks)
    for n in range(1, 41):
        write_artifact(root, f"specs/{n}_task_{n}/reports/research-001.md")
        doc = researched_doc(f"{n}_task_{n}")
        if n == 40:
            doc["status"] = "success"
        write_meta(root, f"{n}_task_{n}", doc)
    assert main(["scan", "--apply", "--format", "json", str(root)]) == 1
    report = json.loads(capsys.readouterr().out)
    outcomes = [f["outcome"] for f in report["files"]]
    assert outcomes.count("applied") == 39
    assert outcomes.count("invalid") == 1
    assert sum(1 for t in state(root)["active_projects"] if t["status"] == "researched") == 39
    assert len(list((root / "specs").glob("*/.return-meta.json"))) == 1


def test_scan_apply_with_corrupt_state_exits_4(tmp_path: Path) -> None:
    """scan --apply never overwrites a corrupt state.json."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    (root / "specs" / "state.json").write_text('{"active_projects": [', encoding="utf-8")
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    assert main(["scan", "--apply", str(root)]) in {1, 4}
    assert (root / "specs" / "state.json").read_text("utf-8") == '{"active_projects": ['
    assert meta.exists()


@pytest.mark.parametrize(
    ("agent_json", "recorded"),
    [('"planner-agent"', "planner-agent"), ('"\\ud800agent"', "?agent"), ("42", None)],
)
def test_an_invalid_files_journal_rows_keep_its_agent_type(
    tmp_path: Path, agent_json: str, recorded: str | None
) -> None:
    """Journal version 3: a file never applied still names its agent (for `report`); a lone
    surrogate is stored as ``?`` rather than losing the row; a non-string is no agent."""
    import contextlib
    import sqlite3

    from postflightd.journal.database import default_journal_path

    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    doc = researched_doc()
    doc["status"] = "completed"
    doc["metadata"]["agent_type"] = "AGENT"
    text = json.dumps(doc).replace('"AGENT"', agent_json)
    meta = write_meta(root, "259_prove_completeness", text)
    assert main(["process", str(meta)]) == 1
    with contextlib.closing(sqlite3.connect(default_journal_path())) as conn:
        rows = conn.execute("SELECT kind, agent FROM observations ORDER BY id").fetchall()
    assert rows == [("validated", recorded)]


def test_process_json_gives_a_workflow_what_its_next_stage_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The status, the task's number and name, the artifacts with their summaries, and the
    task's state.json entry as the run left it: no jq over the (deleted) file needed."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    assert main(["process", str(meta), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["outcome"] == "applied"
    assert doc["status"] == "researched"
    assert (doc["task"], doc["task_name"]) == (259, "prove_completeness")
    assert doc["artifacts"] == [
        {k: v for k, v in a.items() if v is not None} for a in researched_doc()["artifacts"]
    ]
    assert all(a["summary"] for a in doc["artifacts"])
    assert doc["state_entry"] == task(root, 259)
    assert doc["state_entry"]["status"] == "researched"


def test_process_json_of_a_file_another_run_applied_is_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file is gone because another run applied it: still one JSON document (with when,
    and the task's entry), never a line of text, whatever happens."""
    root = project(tmp_path / "proj", TASKS, todo=TODO, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    assert main(["process", str(meta), "--format", "json"]) == 0
    applied = json.loads(capsys.readouterr().out)
    assert not meta.exists()
    assert main(["process", str(meta), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # The keys of every other outcome, so that a workflow reads `.path` or `.status` alike.
    assert set(applied) <= set(doc)
    assert (doc["path"], doc["root"]) == (applied["path"], applied["root"])
    assert (doc["status"], doc["findings"]) == ("researched", [])
    assert doc["outcome"] == "already_postflighted"
    assert doc["already_postflighted"].startswith("recorded ")
    assert (doc["task"], doc["task_name"]) == (259, "prove_completeness")
    assert doc["state_entry"]["status"] == "researched"


def _failed_doc() -> dict[str, Any]:
    doc = researched_doc()
    doc["status"] = "failed"
    doc["artifacts"] = []
    doc["errors"] = [
        {
            "type": "timeout",
            "message": "Research timed out after 1 hour",
            "recoverable": True,
            "recommendation": "Resume with /research 259",
        }
    ]
    return doc


def test_a_first_failed_outcome_sets_last_updated_even_when_nothing_else_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The workflow set the session and a time when it delegated; the agent failed. A failed
    run changes nothing but ``last_updated``: it is the first application of this file, so it
    is written (a re-run of the same bytes is what the journal decides, not the entry)."""
    before = "2026-01-01T00:00:00Z"
    entry = task_entry(259, "prove_completeness", session_id=SESSION, last_updated=before)
    root = project(tmp_path, [entry])
    path = write_meta(root, "259_prove_completeness", _failed_doc())
    assert main(["process", str(path)]) == 0, capsys.readouterr()
    after = task(root, 259)
    assert after["last_updated"] != before
    assert after["last_updated"].startswith(str(datetime.now(UTC).year))
    assert after["status"] == entry["status"]  # a failed run changes nothing else


def test_processing_the_same_bytes_again_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A re-run of a file already applied (its deletion failed, or a crash came before it)
    leaves state.json byte for byte as it is: the journal holds those bytes as applied."""
    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    doc = researched_doc()
    path = write_meta(root, "259_prove_completeness", doc)
    assert main(["process", str(path)]) == 0, capsys.readouterr()
    written = (root / "specs" / "state.json").read_bytes()
    write_meta(root, "259_prove_completeness", doc)  # the same bytes, back again
    assert main(["process", str(path)]) == 0, capsys.readouterr()
    assert (root / "specs" / "state.json").read_bytes() == written


@pytest.mark.parametrize("file", ["state.json", "errors.json", ".postflight-pending"])
def test_a_number_too_long_to_read_is_named_plainly_in_every_project_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    """json refuses an integer of more than 4,300 digits with Python's own advice (a call to
    raise the limit); the reader says what is wrong with the file instead."""
    root = project(tmp_path / "p", 1)
    doc = researched_doc("1_task1")
    if file == "errors.json":  # read only when a run's errors are logged
        doc.update(status="failed", artifacts=[])
        doc["errors"] = [{"type": "x", "message": "m", "recoverable": True, "recommendation": "r"}]
    meta = write_meta(root, "1_task1", doc)
    path = root / "specs" / (f"1_task1/{file}" if file.startswith(".") else file)
    big = '{"session_id": "s", "x": ' + "9" * 4301 + "}"
    if file == "state.json":
        big = path.read_text("utf-8").replace(
            '"next_project_number"', '"x": ' + "9" * 4301 + ', "next_project_number"'
        )
    elif file == "errors.json":
        big = "[" + big + "]"
    path.write_text(big, "utf-8")
    code = main(["process", str(meta)])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code != 70, out
    assert "holds a number too long to read (over 4,300 digits)" in out, out
    assert "set_int_max_str_digits" not in out
