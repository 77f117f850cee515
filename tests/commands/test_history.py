"""`postflightd history`: one line per run with how it ended, from a journal that real
`process` and `scan --apply` runs wrote; `--events` lists the rows."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, partial_doc, researched_doc, task_entry
from helpers.paths import REPO
from helpers.project import project, write_meta
from postflightd.cli import main

OTHER = "sess_1736700999_zzz999"


def _journaled(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Task 1 applied; task 2 invalid with two errors, then fixed and applied (one run);
    task 3 interrupted (in_progress, processed); task 4 left invalid by scan --apply."""
    assert main(["process", str(write_meta(root, "1_task1", researched_doc("1_task1")))]) == 0
    broken = researched_doc("2_task2")
    broken["metadata"]["duration_seconds"] = "180"  # a string where a number belongs
    broken["artifacts"][0]["path"] = "specs/2_task2/reports/missing.md"
    meta = write_meta(root, "2_task2", broken)
    assert main(["process", str(meta)]) == 1
    assert main(["process", str(write_meta(root, "2_task2", researched_doc("2_task2")))]) == 0
    waiting = {
        "status": "in_progress",
        "started_at": datetime.now(UTC).isoformat(),
        "artifacts": [],
        "partial_progress": {"stage": "init", "details": "started"},
        "metadata": {**researched_doc("3_task3")["metadata"], "session_id": OTHER},
    }
    assert main(["process", str(write_meta(root, "3_task3", waiting))]) == 3
    left = researched_doc("4_task4")
    left["status"] = "completed"
    write_meta(root, "4_task4", left)
    assert main(["scan", "--apply", str(root)]) == 1
    capsys.readouterr()


@pytest.fixture
def root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    made = project(tmp_path / "proj", 4).resolve()
    _journaled(made, capsys)
    return made


def _text(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["history", *args]) == 0
    return capsys.readouterr().out.splitlines()


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    assert main(["history", "--format", "json", *args]) == 0
    doc: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return doc


def _column(header: str, name: str) -> int:
    return header.index(name)


def test_one_line_per_run_says_how_it_ended(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    header, *lines = _text(capsys)
    assert header.startswith("STARTED (local time)  ENDED")
    assert len(lines) == 4  # four runs, however many rows each wrote
    outcome = _column(header, "OUTCOME")
    outcomes = [ln[outcome:].split("  ")[0] for ln in lines]
    assert outcomes[0] == "applied as researched"
    # The fixed file is the same run (same session), and the errors it had are kept.
    assert re.fullmatch(r"applied as researched \(after invalid PF\d{3}, PF\d{3}\)", outcomes[1])
    assert {"PF201", "PF502"} == set(re.findall(r"PF\d{3}", outcomes[1]))
    assert outcomes[2] == "interrupted"
    assert outcomes[3].startswith("invalid PF")
    # Aligned: every column of every line starts where its header does.
    for name in ("ENDED", "DURATION", "TASK", "AGENT", "SESSION", "OUTCOME", "FILE"):
        at = _column(header, name)
        assert all(ln[at - 2 : at] == "  " and ln[at] != " " for ln in lines), name
    session = _column(header, "SESSION")
    assert [ln[session:].split()[0] for ln in lines] == [SESSION, SESSION, OTHER, SESSION]
    # Times to the second, in local time; paths from the current directory.
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ", ln) for ln in lines)
    assert "." not in lines[0][:19]
    files = [ln[_column(header, "FILE") :] for ln in lines]
    assert files == [f"specs/{n}_task{n}/.return-meta.json" for n in (1, 2, 3, 4)]
    # The interrupted run lasted until its interruption (the journal keeps no content of a
    # file never applied: it started when first seen in_progress).
    assert re.fullmatch(r"\d+s", lines[2][_column(header, "DURATION") :].split()[0])


def _documented_outcomes() -> set[str]:
    """The forms docs/postflight.md lists for the OUTCOME column, as written there."""
    page = (REPO / "docs" / "postflight.md").read_text(encoding="utf-8")
    listing = page[page.index("An outcome is one of these forms:") :].split("\n\n")[1]
    return set(re.findall(r"^\* `([^`]+)`", listing, re.MULTILINE)) | set(
        re.findall(r"\(`([^`]+)` alone", listing)
    )


def test_every_outcome_history_shows_is_a_form_the_docs_list(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    header, *lines = _text(capsys)
    at = _column(header, "OUTCOME")
    shown = [ln[at:].split("  ")[0] for ln in lines]
    forms = {
        re.sub(r"PF\d{3}(, PF\d{3})*", "CODES", re.sub(r"^applied as \w+", "applied as STATUS", o))
        for o in shown
    }
    assert forms == {
        "applied as STATUS",
        "applied as STATUS (after invalid CODES)",
        "interrupted",
        "invalid CODES",
    }
    documented = _documented_outcomes()
    assert forms <= documented, forms - documented
    # The bare words history can say of a run, as the fold names them.
    assert {"stuck", "interrupted", "running", "invalid"} <= documented


def test_json_is_one_object_per_run_in_a_fixed_shape(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root / "specs")
    runs = _json(capsys)
    assert [set(r) for r in runs] == [
        {
            "outcome",
            "status",
            "codes",
            "task",
            "agent",
            "session",
            "started",
            "ended",
            "duration_seconds",
            "root",
            "file",
            "path",
        }
    ] * 4
    assert [(r["task"], r["outcome"], r["status"]) for r in runs] == [
        (1, "applied", "researched"),
        (2, "applied", "researched"),
        (3, "interrupted", None),
        (4, "invalid", None),
    ]
    assert runs[0]["codes"] == []
    assert sorted(runs[1]["codes"]) == ["PF201", "PF502"]
    assert runs[3]["codes"] and all(c.startswith("PF") for c in runs[3]["codes"])
    assert runs[0]["agent"] == "neovim-research-agent"
    started, ended = (datetime.fromisoformat(runs[2][k]) for k in ("started", "ended"))
    assert runs[2]["duration_seconds"] == round((ended - started).total_seconds())
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["ended"]) for r in runs)
    assert runs[0]["root"] == str(root) and runs[0]["file"] == "specs/1_task1/.return-meta.json"
    assert runs[0]["path"] == "1_task1/.return-meta.json"  # shown from specs/


def test_events_lists_the_rows_with_the_same_times_and_paths(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    header, *lines = _text(capsys, "--events")
    assert header.startswith("TIME (local time)")
    assert header.split() == [
        "TIME",
        "(local",
        "time)",
        "KIND",
        "TASK",
        "STATUS",
        "SESSION",
        "FILE",
    ]
    kinds = [ln.split()[2] for ln in lines]
    assert kinds.count("postflighted") == 2 and "interrupted" in kinds
    assert len(lines) > 4  # more rows than runs
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ", ln) for ln in lines)
    session = _column(header, "SESSION")
    assert {ln[session:].split()[0] for ln in lines} == {SESSION, OTHER}
    assert all(ln[_column(header, "FILE") :].startswith("specs/") for ln in lines)
    rows = _json(capsys, "--events")
    assert len(rows) == len(lines)
    assert {"id", "ts", "kind", "content"} <= set(rows[0])


def test_task_and_session_filters(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [r["task"] for r in _json(capsys, "--task", "2")] == [2]
    assert [r["task"] for r in _json(capsys, "--session", OTHER)] == [3]
    assert [r["task"] for r in _json(capsys, "--session", SESSION)] == [1, 2, 4]
    assert _text(capsys, "--task", "9") == []  # said once, on stderr
    assert [r["task"] for r in _json(capsys, "--limit", "2")] == [3, 4]  # the latest runs


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_limit_below_one_is_a_usage_error_not_an_empty_journal(
    root: Path, capsys: pytest.CaptureFixture[str], limit: str
) -> None:
    """The journal holds runs: "no runs recorded" would be untrue."""
    for events in ([], ["--events"]):
        assert main(["history", "--limit", limit, *events]) == 2
        out = capsys.readouterr()
        assert out.out == ""
        assert f"--limit {limit}: " in out.err


def test_paths_from_a_subdirectory_and_from_outside(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root / "specs" / "2_task2")
    header, *lines = _text(capsys, "--task", "2")
    assert lines[0][_column(header, "FILE") :] == ".return-meta.json"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    header, *lines = _text(capsys, "--task", "2")
    assert lines[0][_column(header, "FILE") :] == f"{root}/specs/2_task2/.return-meta.json"


def test_a_running_run_has_no_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file scan --apply leaves in_progress (not interrupted: only process says so)."""
    root = project(tmp_path / "p", 1).resolve()
    doc = {
        "status": "in_progress",
        "started_at": (datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
        "artifacts": [],
        "partial_progress": {"stage": "init", "details": "started"},
        "metadata": researched_doc("1_task1")["metadata"],
    }
    write_meta(root, "1_task1", doc)
    monkeypatch.chdir(root)
    assert main(["scan", "--apply"]) == 0
    capsys.readouterr()
    (run,) = _json(capsys)
    assert (run["outcome"], run["ended"], run["duration_seconds"]) == ("running", None, None)


def test_history_and_report_on_an_empty_journal_say_one_thing_once_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "empty", [task_entry(1, "a")])
    assert main(["scan", "--apply", str(root)]) == 0  # the journal exists, with no run
    capsys.readouterr()
    said = "The journal records a run when `postflightd watch`, the stop hook, `process` or "
    assert main(["history"]) == 0
    history = capsys.readouterr()
    assert main(["report", "--since", "all"]) == 0
    report = capsys.readouterr()
    for out, err in (history, report):
        assert out == ""
        assert err.count("no runs recorded") == 1
        assert err.count(said) == 1
    assert history.err == report.err


def test_an_incomplete_postflight_is_shown_so_until_a_rerun_completes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In state.json, but errors.json could not be written: "applied as partial" alone would
    # hide that the metadata file is kept and waits for a rerun.
    root = project(tmp_path / "proj", 1).resolve()
    errors = root / "specs" / "errors.json"
    errors.write_text("not json\n", encoding="utf-8")
    meta = write_meta(root, "1_task1", partial_doc("1_task1"))
    assert main(["process", str(meta)]) == 4
    capsys.readouterr()
    monkeypatch.chdir(root)
    header, line = _text(capsys)
    assert line[_column(header, "OUTCOME") :].split("  ")[0] == "incomplete as partial (PF606)"
    (run,) = _json(capsys)
    assert (run["outcome"], run["status"], run["codes"]) == ("incomplete", "partial", ["PF606"])

    errors.write_text("[]\n", encoding="utf-8")
    assert main(["process", str(meta)]) == 0
    capsys.readouterr()
    header, line = _text(capsys)
    assert line[_column(header, "OUTCOME") :].split("  ")[0] == "applied as partial"
    (run,) = _json(capsys)
    assert (run["outcome"], run["status"]) == ("applied", "partial")
    forms = {"incomplete as STATUS (CODES)"}
    assert forms <= _documented_outcomes()
