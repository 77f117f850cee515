"""`postflightd verify`: outcomes the journal recorded that state.json or TODO.md no longer show.

The pure comparison first (``track``, ``judge``, ``heal_state``, ``todo_not_shown``), then the
journal's version 2 (a real version 1 database migrated), then the command in-process on real
project trees, with state.json put back the way a writer that ignores the lock puts it back.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.needs import require_tool
from helpers.paths import FIXTURES
from helpers.project import project, write_meta
from postflightd.cli import main
from postflightd.journal.changes import TaskChange
from postflightd.journal.database import Journal, default_journal_path
from postflightd.journal.rows import RecordedChange
from postflightd.journal.schema import SCHEMA_VERSION
from postflightd.pipeline.verify import (
    Tracked,
    Verdict,
    heal_state,
    judge,
    todo_not_shown,
    track,
)

JOURNALS = FIXTURES / "journal"

BEFORE = task_entry(5, "five")
AFTER = {
    **BEFORE,
    "status": "researched",
    "researched": "2026-01-09T10:00:00Z",
    "last_updated": "2026-01-09T10:00:00Z",
    "artifacts": [{"type": "research", "path": "specs/5_five/reports/r.md"}],
}


def recorded(
    id_: int, before: Any, after: Any, *, task: int = 5, todo: list[dict[str, Any]] | None = None
) -> RecordedChange:
    return RecordedChange(
        id=id_,
        ts=f"2026-01-09T10:00:{id_:02d}.000000Z",
        root="/r",
        file=f"specs/{task}_x/.return-meta.json",
        task=task,
        session=SESSION,
        status="researched",
        change=TaskChange(before, after, todo or []),
    )


def tracked_one(before: Any = BEFORE, after: Any = AFTER) -> Tracked:
    return track([recorded(1, before, after)])[5]


# --- the pure comparison ---------------------------------------------------------------------


def test_the_entry_after_the_postflight_is_shown() -> None:
    assert judge(dict(AFTER), tracked_one()).verdict is Verdict.SHOWN


def test_the_exact_pre_postflight_entry_is_a_lost_update() -> None:
    assert judge(dict(BEFORE), tracked_one()).verdict is Verdict.LOST


def test_a_value_the_outcome_set_put_back_by_hand_is_reverted_not_lost() -> None:
    """Status back to its old value, but a note added: not the old entry, so an edit."""
    entry = {**AFTER, "status": BEFORE["status"], "note": "reopened"}
    judgement = judge(entry, tracked_one())
    assert judgement.verdict is Verdict.REVERTED
    assert judgement.reverted == ("status",)


def test_newer_values_supersede_the_outcome() -> None:
    """A workflow's preflight moved the status on: the outcome was built upon, not lost."""
    entry = {**AFTER, "status": "planning", "last_updated": "2026-01-10T00:00:00Z"}
    judgement = judge(entry, tracked_one())
    assert judgement.verdict is Verdict.SUPERSEDED
    assert set(judgement.superseded) == {"status", "last_updated"}
    assert not judgement.verdict.fails


def test_an_edit_of_keys_the_outcome_did_not_set_keeps_it_shown() -> None:
    assert judge({**AFTER, "priority": "high"}, tracked_one()).verdict is Verdict.SHOWN


def test_a_task_gone_from_state_json_is_removed() -> None:
    assert judge(None, tracked_one()).verdict is Verdict.REMOVED


def test_odd_journal_values_are_judged_without_raising() -> None:
    """A row edited by hand may hold any JSON: never an exception, never a false 'lost'."""
    odd = tracked_one(before=[1, 2], after="text")
    assert judge({"project_number": 5}, odd).verdict is Verdict.REVERTED
    assert judge("text", odd).verdict is Verdict.SHOWN
    assert judge([1, 2], odd).verdict is Verdict.LOST


def test_only_the_latest_postflight_counts_and_a_chain_keeps_its_befores() -> None:
    """B0 -> A1 -> A2 one after the other: B0 and A1 are both 'before' the latest."""
    a2 = {**AFTER, "status": "planned"}
    chain = track([recorded(1, BEFORE, AFTER), recorded(2, AFTER, a2)])[5]
    assert chain.latest.id == 2
    assert judge(dict(BEFORE), chain).verdict is Verdict.LOST
    assert judge(dict(AFTER), chain).verdict is Verdict.LOST
    # A later postflight that read someone's edit starts a new chain.
    edited = {**AFTER, "note": "x"}
    broken = track([recorded(1, BEFORE, AFTER), recorded(2, edited, a2)])[5]
    assert broken.befores == (edited,)
    assert judge(dict(BEFORE), broken).verdict is not Verdict.LOST


def test_track_ignores_rows_it_already_has() -> None:
    into = track([recorded(1, BEFORE, AFTER), recorded(2, AFTER, {**AFTER, "status": "x"})])
    track([recorded(1, BEFORE, AFTER)], into=into)
    assert into[5].latest.id == 2


def state_doc(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"next_project_number": 9, "active_projects": list(entries)}


def test_heal_state_restores_only_lost_entries_and_is_idempotent() -> None:
    other_before, other_after = task_entry(6, "six"), {**task_entry(6, "six"), "status": "planned"}
    edited = {**other_after, "status": "researching", "note": "by hand"}
    tracked = track([recorded(1, BEFORE, AFTER), recorded(2, other_before, other_after, task=6)])
    doc = state_doc(dict(BEFORE), edited, task_entry(7, "seven"))
    new, healed = heal_state(doc, tracked.values())
    assert [t.task for t, _ in healed] == [5]
    assert new["active_projects"] == [AFTER, edited, task_entry(7, "seven")]
    assert doc["active_projects"][0] == BEFORE  # the input is not mutated
    again, healed_again = heal_state(new, tracked.values())
    assert again is new and healed_again == []


TODO_TEXT = (
    "# TODO\n\n### 5. Five\n- **Status**: [RESEARCHED]\n"
    "- **Research**: [r.md](specs/5_five/reports/r.md)\n\n### 6. Six\n- **Status**: [PLANNED]\n"
)
EDIT = {"marker": "RESEARCHED", "links": {"Research": "[r.md](specs/5_five/reports/r.md)"}}


def test_todo_shows_an_outcome_when_reapplying_its_edit_changes_nothing() -> None:
    t = track([recorded(1, BEFORE, AFTER, todo=[{**EDIT, "completed": None}])])[5]
    assert todo_not_shown(TODO_TEXT, [t]) == set()
    reverted = TODO_TEXT.replace("[RESEARCHED]", "[RESEARCHING]")
    assert todo_not_shown(reverted, [t]) == {5}
    unlinked = TODO_TEXT.replace("- **Research**: [r.md](specs/5_five/reports/r.md)\n", "")
    assert todo_not_shown(unlinked, [t]) == {5}
    # No section for the task: postflight only warned about it, so it is not counted.
    assert todo_not_shown("# TODO\n", [t]) == set()


def test_todo_edits_of_odd_shape_are_read_without_raising() -> None:
    odd = [{"marker": 3, "links": "nope", "completed": ["x"]}, {}]
    t = track([recorded(1, BEFORE, AFTER, todo=odd)])[5]
    assert todo_not_shown(TODO_TEXT, [t]) == set()


@pytest.mark.parametrize(
    "text", ["", "h", "-1h", "1.5.2h", "10y", "ten minutes", "1e3s", "99999999999999999w"]
)
def test_malformed_since_is_a_usage_error(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --since takes what history --since takes (durations.parse_since); anything else
    is exit 2 with the reason, never a traceback."""
    root = tmp_path / "root"
    (root / "specs").mkdir(parents=True)
    assert main(["verify", str(root), f"--since={text}"]) == 2
    assert "--since" in capsys.readouterr().err


# --- the journal, version 2 ------------------------------------------------------------------


def columns(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return [row[1] for row in conn.execute("PRAGMA table_info(observations)")]


def test_a_version_1_journal_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    """tests/fixtures/journal/v1.sqlite3 was written by the version 1 code (main ee97183)."""
    path = tmp_path / "journal.sqlite3"
    shutil.copyfile(JOURNALS / "v1.sqlite3", path)
    assert columns(path)[-1] == "content"
    with Journal.open(path) as j:
        assert j.enabled, j.error
        old = j.history()
        assert [r.kind for r in old] == ["seen", "validated", "postflighted", "deleted"]
        assert old[2].content == '{"status": "researched"}'
        # A version 1 postflighted row recorded no change: nothing to check, nothing invented.
        assert j.changes(roots=["/proj"], since="2000-01-01") == []
        assert j.record(
            "postflighted",
            root="/proj",
            file="specs/259_x/.return-meta.json",
            task=259,
            change=TaskChange({"a": "é"}, {"a": 2}, [{"marker": "PLANNED"}]),
        )
        (change,) = j.changes(roots=["/proj"], since="2000-01-01")
        assert change.change == TaskChange({"a": "é"}, {"a": 2}, [{"marker": "PLANNED"}])
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"entry_before", "entry_after", "todo_edits", "ref", "agent"} <= set(columns(path))
    assert "observations_kind_ts" in indexes
    # Opening it again does not migrate twice.
    with Journal.open(path) as j:
        assert j.enabled, j.error
        assert len(j.history()) == 5


def test_a_fresh_journal_is_created_at_version_2(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal.open(path) as j:
        assert j.enabled
    assert "entry_after" in columns(path)


def test_rows_with_unreadable_changes_are_skipped_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal.open(path) as j:
        for n in (1, 2):
            j.record("postflighted", root="/r", file="f", task=n, change=TaskChange({}, {"n": n}))
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE observations SET entry_after = '{not json' WHERE task = 1")
        conn.commit()
    with Journal.open(path) as j:
        assert [c.task for c in j.changes(roots=["/r"], since="2000")] == [2]


def test_counts_and_refs(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.sqlite3") as j:
        j.record("reapplied", root="/r", file="f", task=1, ref=7)
        j.record("overwritten", root="/r", file="f", task=2, ref=8)
        j.record("overwritten", root="/other", file="f", task=2, ref=9)
        assert j.count_kinds(root="/r", kinds=("reapplied", "overwritten"), since="2000") == {
            "reapplied": 1,
            "overwritten": 1,
        }
        assert j.refs(kind="overwritten", root="/r", since="2000") == {8}
        assert j.count_kinds(root="/r", kinds=(), since="2000") == {}
        assert j.changes(roots=[], since="2000") == []


# --- the command -----------------------------------------------------------------------------

TASKS = (1, 2, 3)


def todo_text(marker: str = "RESEARCHING") -> str:
    return "# TODO\n\n" + "".join(f"### {n}. Task {n}\n- **Status**: [{marker}]\n\n" for n in TASKS)


@pytest.fixture
def applied(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    """A project whose three outcomes were applied: (root, state.json before, after)."""
    root = project(tmp_path / "proj", len(TASKS))  # tasks 1..3, each with its TODO.md section
    for n in TASKS:
        write_meta(root, f"{n}_task{n}", researched_doc(f"{n}_task{n}"))
    before = state_path(root).read_bytes()
    assert main(["scan", "--apply", str(root)]) == 0
    after = state_path(root).read_bytes()
    assert after != before
    return root, before, after


def state_path(root: Path) -> Path:
    return root / "specs" / "state.json"


def put_back(root: Path, data: bytes) -> None:
    """What a writer that ignored the lock does: write a temporary file, rename it over."""
    tmp = root / "specs" / ".jq.tmp"
    tmp.write_bytes(data)
    tmp.replace(state_path(root))


def entries(root: Path) -> dict[int, dict[str, Any]]:
    doc = json.loads(state_path(root).read_text(encoding="utf-8"))
    return {t["project_number"]: t for t in doc["active_projects"]}


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["verify", *argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_everything_shown_exits_0(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    root, _, _ = applied
    assert main(["verify", str(root), "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        report = json.loads(out)
        assert report["outcomes"] == []
        assert report["summary"]["checked"] == 3
        assert report["summary"]["shown"] == 3
    else:
        assert "3 outcomes applied since" in out
        assert "all 3 still in state.json and TODO.md" in out


def test_lost_outcomes_exit_1_and_repair_restores_the_exact_bytes(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root, before, after = applied
    put_back(root, before)
    code, report = run_json(capsys, str(root))
    assert code == 1
    assert [(o["task"], o["verdict"], o["repaired"]) for o in report["outcomes"]] == [
        (1, "lost", False),
        (2, "lost", False),
        (3, "lost", False),
    ]
    assert state_path(root).read_bytes() == before  # verify alone writes nothing
    code, report = run_json(capsys, str(root), "--repair")
    assert code == 0
    assert report["summary"]["repaired"] == 3
    # Re-applied through render_state: byte for byte what the postflight wrote.
    assert state_path(root).read_bytes() == after
    # Idempotent: nothing more to do, nothing written, no second "reapplied" row.
    code, report = run_json(capsys, str(root), "--repair")
    assert code == 0 and report["outcomes"] == []
    assert state_path(root).read_bytes() == after
    with Journal.open(default_journal_path()) as j:
        assert j.count_kinds(root=str(root), kinds=("reapplied",), since="2000") == {"reapplied": 3}


def test_text_output_names_the_lost_outcome_and_the_fix(
    applied: tuple[Path, bytes, bytes],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    root, before, _ = applied
    put_back(root, before)
    monkeypatch.chdir(root)
    assert main(["verify", str(root)]) == 1
    out = capsys.readouterr().out
    # Times to the second.
    assert re.search(r"researched \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\): lost", out), out
    assert re.search(r"applied since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: ", out), out
    # Paths from the current directory, as scan shows them.
    assert out.startswith("specs/1_task1/.return-meta.json: task 1 researched")
    assert "lost: state.json is an older version than the journal's record of it" in out
    assert "`postflightd verify --repair` re-applies it" in out
    assert re.search(r"\n3 outcomes applied since \S+: 3 lost\n$", out), out
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # outside the project: absolute
    assert main(["verify", str(root)]) == 1
    resolved = root.resolve()
    assert capsys.readouterr().out.startswith(f"{resolved}/specs/1_task1/.return-meta.json: ")
    assert main(["verify", str(root), "--repair"]) == 0
    assert "; re-applied" in capsys.readouterr().out


def test_state_json_checked_out_from_git_is_called_older_not_a_writer_that_ignored_the_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_path = require_tool("git", "the test puts state.json back with git checkout")
    root = project(tmp_path / "proj", 1)
    monkeypatch.chdir(root)

    def git(*args: str) -> None:
        subprocess.run(
            [git_path, "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    git("add", "specs")
    git("commit", "-q", "-m", "tasks")
    write_meta(root, "1_task1", researched_doc("1_task1"))
    assert main(["scan", "--apply"]) == 0
    git("checkout", "specs/state.json")
    capsys.readouterr()
    assert main(["verify"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("specs/1_task1/.return-meta.json: task 1 researched ("), out
    assert (
        ": lost: state.json is an older version than the journal's record of it: the task's "
        "entry is the one from before this outcome, which the journal holds as applied; "
        "`postflightd verify --repair` re-applies it\n"
    ) in out
    assert "ignored the lock" not in out


def test_a_deliberate_edit_is_reported_and_never_repaired(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _, _ = applied
    doc = json.loads(state_path(root).read_text(encoding="utf-8"))
    doc["active_projects"][0]["status"] = "researching"  # put back by hand...
    doc["active_projects"][0]["note"] = "reopened"  # ...with a note: not the old entry
    doc["active_projects"][1]["status"] = "abandoned"  # moved on
    del doc["active_projects"][2]  # archived
    put_back(root, (json.dumps(doc, indent=2) + "\n").encode())
    edited = state_path(root).read_bytes()
    for argv in ([str(root)], [str(root), "--repair"]):
        code, report = run_json(capsys, *argv)
        assert code == 1  # the reverted status is something the outcome wrote, gone
        verdicts = {o["task"]: (o["verdict"], o["repaired"]) for o in report["outcomes"]}
        assert verdicts == {
            1: ("reverted", False),
            2: ("superseded", False),
            3: ("removed", False),
        }
        assert report["outcomes"][0]["reverted"] == ["status"]
        assert state_path(root).read_bytes() == edited


def test_superseded_and_removed_alone_exit_0(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _, _ = applied
    doc = json.loads(state_path(root).read_text(encoding="utf-8"))
    doc["active_projects"][1]["status"] = "planning"
    del doc["active_projects"][2]
    put_back(root, json.dumps(doc).encode())
    code, report = run_json(capsys, str(root))
    assert code == 0
    assert {o["verdict"] for o in report["outcomes"]} == {"superseded", "removed"}


def test_todo_md_reverted_is_reported_and_left_to_the_user(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _, _ = applied
    todo = root / "specs" / "TODO.md"
    assert "[RESEARCHED]" in todo.read_text(encoding="utf-8")
    todo.write_text(todo_text(), encoding="utf-8")  # an editor saving its stale buffer
    for argv in ([str(root)], [str(root), "--repair"]):
        code, report = run_json(capsys, *argv)
        assert code == 1
        assert {o["verdict"] for o in report["outcomes"]} == {"todo"}
        assert todo.read_text(encoding="utf-8") == todo_text()


def test_repair_reapplies_the_todo_edit_of_a_healed_task(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root, before, after = applied
    todo = root / "specs" / "TODO.md"
    shown = todo.read_text(encoding="utf-8")
    put_back(root, before)
    todo.write_text(todo_text(), encoding="utf-8")
    code, _ = run_json(capsys, str(root), "--repair")
    assert code == 0
    assert state_path(root).read_bytes() == after
    assert todo.read_text(encoding="utf-8") == shown


def test_since_leaves_older_outcomes_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "p", [task_entry(1, "one")])
    with Journal.open(default_journal_path()) as j:
        j.record(
            "postflighted",
            root=str(root.resolve()),
            file="specs/1_one/.return-meta.json",
            task=1,
            change=TaskChange(task_entry(1, "one"), {**task_entry(1, "one"), "status": "planned"}),
            ts=datetime.now(UTC) - timedelta(hours=2),
        )
    code, report = run_json(capsys, str(root), "--since", "1h")
    assert code == 0 and report["summary"]["checked"] == 0
    code, report = run_json(capsys, str(root), "--since", "all")
    assert code == 1
    assert report["outcomes"][0]["verdict"] == "lost"
    assert report["since"] == "1970-01-01T00:00:00.000000Z"


def test_a_bad_since_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(tmp_path), "--since", "soon"]) == 2
    assert "neither a duration" in capsys.readouterr().err


def test_an_unusable_state_json_is_exit_4(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _, _ = applied
    state_path(root).write_text("{not json", encoding="utf-8")
    for argv in ([str(root)], [str(root), "--repair"]):
        code, report = run_json(capsys, *argv)
        assert code == 4
        assert "PF604" in report["problems"][0]["problem"]
        assert state_path(root).read_text(encoding="utf-8") == "{not json"


def test_an_unavailable_journal_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "p", [task_entry(1, "one")])
    # The journal path is the user's to set (a project's own configuration may not).
    config = tmp_path / "config.toml"
    config.write_text(f'[journal]\npath = "{tmp_path}"\n', encoding="utf-8")
    assert main(["verify", "--config", str(config), str(root)]) == 2
    assert "journal cannot be opened" in capsys.readouterr().err


def test_a_root_that_is_not_a_directory_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_control_characters_from_the_journal_are_escaped_in_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "p", [task_entry(1, "one")])
    with Journal.open(default_journal_path()) as j:
        j.record(
            "postflighted",
            root=str(root.resolve()),
            file="specs/1_\x1b[31mred/.return-meta.json",
            task=1,
            status="researched\r",
            change=TaskChange(task_entry(1, "one"), {**task_entry(1, "one"), "status": "x"}),
        )
    assert main(["verify", str(root)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert "1_\\x1b[31mred" in out


def test_status_counts_reapplied_outcomes(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root, before, _ = applied
    put_back(root, before)
    assert main(["verify", str(root), "--repair"]) == 0
    capsys.readouterr()
    assert main(["status", str(root), "--format", "json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["roots"]
    assert entry["healing"]["reapplied"] == 3
    assert entry["healing"]["overwritten"] == 0
    assert main(["status", str(root)]) == 0
    assert "healed: 3 outcomes re-applied" in capsys.readouterr().out


def test_postflight_journals_each_task_entry_before_and_after(
    applied: tuple[Path, bytes, bytes],
) -> None:
    root, before, _ = applied
    old = {t["project_number"]: t for t in json.loads(before)["active_projects"]}
    with Journal.open(default_journal_path()) as j:
        changes = j.changes(roots=[str(root)], since="2000")
    assert sorted(c.task for c in changes) == list(TASKS)
    for c in changes:
        assert c.change.before == old[c.task]
        assert c.change.after == entries(root)[c.task]
        task_dir = f"specs/{c.task}_task{c.task}"
        assert c.change.todo == [
            {
                "marker": "RESEARCHED",
                "links": [
                    {
                        "label": "Research",
                        "path": f"{task_dir}/reports/research-001.md",
                        "summary": "Research report with 5 plugin patterns",
                    }
                ],
                "completed": None,
                "task_dir": task_dir,
            }
        ]


def test_a_todo_md_that_is_not_utf8_is_noted_not_raised(
    applied: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _, _ = applied
    (root / "specs" / "TODO.md").write_bytes(b"# TODO\n\xff\xfe\n")
    code, report = run_json(capsys, str(root))
    assert code == 0
    assert "not UTF-8" in report["notes"][0]["note"]


@pytest.mark.parametrize("value", ["-1", '"600"', "true"])
def test_a_bad_heal_window_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    root = project(tmp_path / "p", [task_entry(1, "one")])
    (root / ".postflightd.toml").write_text(f"[watch]\nheal_window_s = {value}\n", "utf-8")
    assert main(["verify", str(root)]) == 2
    assert "watch.heal_window_s" in capsys.readouterr().err


# --- the healer, in-process (the daemon tests run it for real) --------------------------------


def test_the_healer_reapplies_lost_outcomes_and_logs_an_edit_once(
    applied: tuple[Path, bytes, bytes],
) -> None:
    from structlog.testing import capture_logs

    from postflightd.config import Config
    from postflightd.daemon.healer import Healer

    root, before, after = applied
    healer = Healer()
    with Journal.open(default_journal_path()) as j:
        stats = healer.check(root, Config(), j)
        assert stats is not None and (stats.checked, stats.candidates) == (3, 0)
        put_back(root, before)
        with capture_logs() as logs:
            stats = healer.check(root, Config(), j)
        assert stats is not None and stats.reapplied == 3
        assert state_path(root).read_bytes() == after
        assert [e["task"] for e in logs if e["event"] == "reapplied"] == [1, 2, 3]
        doc = json.loads(after)
        doc["active_projects"][0]["status"] = "abandoned"
        put_back(root, json.dumps(doc).encode())
        with capture_logs() as logs:
            healer.check(root, Config(), j)
            put_back(root, json.dumps({**doc, "other": 1}).encode())
            healer.check(root, Config(), j)
        overwritten = [e for e in logs if e["event"] == "outcome_overwritten"]
        assert [(e["task"], e["verdict"]) for e in overwritten] == [(1, "superseded")]
        assert entries(root)[1]["status"] == "abandoned"
        # A new daemon (a new healer) remembers from the journal that it was reported.
        with capture_logs() as logs:
            Healer().check(root, Config(), j)
        assert not [e for e in logs if e["event"] == "outcome_overwritten"]


def test_the_healer_does_not_wait_on_a_busy_lock_and_heals_on_the_next_check(
    applied: tuple[Path, bytes, bytes],
) -> None:
    from structlog.testing import capture_logs

    from postflightd.config import Config
    from postflightd.daemon.healer import HEAL_LOCK_TIMEOUT_S, Healer
    from postflightd.fs.directory import Directory
    from postflightd.fs.locks import project_lock

    root, before, after = applied
    put_back(root, before)
    healer = Healer()
    with Journal.open(default_journal_path()) as j:
        with project_lock(Directory.anchor(root / "specs")), capture_logs() as logs:
            stats = healer.check(root, Config(), j)
        assert stats is not None and stats.reapplied == 0
        assert stats.seconds < HEAL_LOCK_TIMEOUT_S * 5
        assert [e["event"] for e in logs] == ["heal_deferred"]
        assert state_path(root).read_bytes() == before
        stats = healer.check(root, Config(), j)
        assert stats is not None and stats.reapplied == 3
    assert state_path(root).read_bytes() == after
