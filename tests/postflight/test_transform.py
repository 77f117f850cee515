"""The pure postflight transformation: a metadata file's outcome on state.json and TODO.md."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.documents import SESSION, researched_doc, task_entry
from postflightd.models.metadata import MetadataFile
from postflightd.models.todo_link import markdown_link
from postflightd.postflight.errors_json import merge_errors
from postflightd.postflight.state_text import render_state
from postflightd.postflight.transform import (
    UNREPORTED_ERROR_TYPE,
    Applied,
    TaskNotFound,
    TodoEdit,
    TodoLink,
    apply_outcome,
    find_task,
    task_index,
    task_position,
    todo_marker,
)
from postflightd.timestamps import iso_timestamp

NOW = datetime(2026, 1, 8, 14, 30, 5, 123456, tzinfo=UTC)
STAMP = "2026-01-08T14:30:05Z"
STATUS_MAP = {
    "researched": "researched",
    "planned": "planned",
    "implemented": "completed",
    "blocked": "blocked",
}
TASK_DIR = "259_prove_completeness"
FILE = f"specs/{TASK_DIR}/.return-meta.json"
NEW_SESSION = "sess_1736800000_xyz789"


def state_with(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"next_project_number": 1000, "active_projects": list(tasks), "repository_health": {}}


def base_state(
    language: str = "lean4", status: str = "implementing", **extra: Any
) -> dict[str, Any]:
    return state_with(
        task_entry(1, "other_task", status="planned"),
        task_entry(259, "prove_completeness", status=status, language=language, **extra),
    )


def meta_doc(status: str, *, language: str = "lean4", **overrides: Any) -> dict[str, Any]:
    """A valid metadata document of ``status`` for task 259 (meta task when language=meta)."""
    doc = researched_doc(TASK_DIR)
    doc["status"] = status
    doc["metadata"]["session_id"] = NEW_SESSION
    artifacts = {
        "researched": [doc["artifacts"][0]],
        "planned": [
            {
                "type": "plan",
                "path": f"specs/{TASK_DIR}/plans/implementation-001.md",
                "summary": "4-phase plan",
            }
        ],
        "implemented": [
            {"type": "implementation", "path": "src/lsp.lua", "summary": "LSP configuration"},
            {
                "type": "summary",
                "path": f"specs/{TASK_DIR}/summaries/implementation-summary-20260108.md",
                "summary": "Implementation summary",
            },
        ],
        "partial": [{"type": "implementation", "path": "src/lsp.lua", "summary": "phases 1-2"}],
        "failed": [],
        "blocked": [],
    }
    doc["artifacts"] = artifacts[status]
    if status == "implemented":
        completion: dict[str, Any] = {"completion_summary": "Configured LSP for 4 servers."}
        if language == "meta":
            completion["claudemd_suggestions"] = "Added new-agent to the mapping table"
        else:
            completion["roadmap_items"] = ["Configure LSP for Neovim"]
        doc["completion_data"] = completion
    if status == "partial":
        doc["partial_progress"] = {
            "stage": "phase_2_completed",
            "details": "Phases 1-2 done",
            "phases_completed": 2,
            "phases_total": 4,
        }
    if status in {"partial", "failed", "blocked"}:
        doc["errors"] = [
            {
                "type": "timeout",
                "message": "Implementation timed out after 1 hour",
                "recoverable": True,
                "recommendation": "Resume with /implement 259",
            }
        ]
    doc.update(overrides)
    return doc


def meta_file(status: str, **kwargs: Any) -> MetadataFile:
    return MetadataFile.model_validate(meta_doc(status, **kwargs))


def apply(state: dict[str, Any], meta: MetadataFile, now: datetime = NOW) -> Any:
    return apply_outcome(state, meta, task=259, file=FILE, now=now, status_map=STATUS_MAP)


def task_of(state: dict[str, Any], number: int = 259) -> dict[str, Any]:
    return next(t for t in state["active_projects"] if t["project_number"] == number)


FINAL_STATUSES = ["researched", "planned", "implemented", "partial", "failed", "blocked"]
#: The task's status while the run that ends with each outcome was under way.
STARTING_STATUS = {"researched": "researching", "planned": "planning"}
EXPECTED_STATUS = {
    "researched": "researched",
    "planned": "planned",
    "implemented": "completed",
    "partial": "implementing",
    "failed": "implementing",
    "blocked": "blocked",
}
EXPECTED_TIMESTAMP = {"researched": "researched", "planned": "planned", "implemented": "completed"}
EXPECTED_MARKER = {
    "researched": "RESEARCHED",
    "planned": "PLANNED",
    "implemented": "COMPLETED",
    "partial": None,
    "failed": None,
    "blocked": "BLOCKED",
}


@pytest.mark.parametrize("language", ["lean4", "meta"])
@pytest.mark.parametrize("status", FINAL_STATUSES)
def test_outcome_table(status: str, language: str) -> None:
    """Each final status sets the status, timestamp, artifacts and errors its row says."""
    state = base_state(language, STARTING_STATUS.get(status, "implementing"))
    before = copy.deepcopy(state)
    applied = apply(state, meta_file(status, language=language))
    assert state == before, "the input document is never mutated"
    task = task_of(applied.state)
    assert task["status"] == EXPECTED_STATUS[status]
    assert task["last_updated"] == STAMP
    assert task["session_id"] == NEW_SESSION
    for field in ("researched", "planned", "completed"):
        assert (field in task) == (EXPECTED_TIMESTAMP.get(status) == field)
    if field_name := EXPECTED_TIMESTAMP.get(status):
        assert task[field_name] == STAMP
    linked = [a["path"] for a in task["artifacts"]]
    assert linked == [a["path"] for a in meta_doc(status)["artifacts"]]
    assert (applied.errors != []) == (status in {"partial", "failed", "blocked"})
    assert applied.changed
    assert task_of(applied.state, 1) is task_of(state, 1), "untouched tasks are shared"
    marker = applied.todo.marker if applied.todo is not None else None
    assert marker == EXPECTED_MARKER[status]


@pytest.mark.parametrize("language", ["lean4", "meta"])
def test_implemented_copies_completion_data(language: str) -> None:
    """completion_summary, roadmap_items and claudemd_suggestions become task keys."""
    applied = apply(base_state(language), meta_file("implemented", language=language))
    task = task_of(applied.state)
    assert task["completion_summary"] == "Configured LSP for 4 servers."
    if language == "meta":
        assert task["claudemd_suggestions"] == "Added new-agent to the mapping table"
        assert "roadmap_items" not in task
    else:
        assert task["roadmap_items"] == ["Configure LSP for Neovim"]
        assert "claudemd_suggestions" not in task
    assert applied.todo == TodoEdit(
        task=259,
        marker="COMPLETED",
        links=(
            TodoLink(
                "Summary",
                f"specs/{TASK_DIR}/summaries/implementation-summary-20260108.md",
                "Implementation summary",
            ),
        ),
        completed="2026-01-08",
        task_dir=f"specs/{TASK_DIR}",
    )


def test_researched_links_report_as_research() -> None:
    """A report artifact is stored with type research and linked under Research."""
    applied = apply(base_state(status="researching"), meta_file("researched"))
    path = f"specs/{TASK_DIR}/reports/research-001.md"
    assert task_of(applied.state)["artifacts"] == [
        {"type": "research", "path": path, "summary": "Research report with 5 plugin patterns"}
    ]
    assert applied.todo is not None
    summary = "Research report with 5 plugin patterns"
    assert applied.todo.links == (TodoLink("Research", path, summary),)
    assert applied.todo.marker == "RESEARCHED"
    assert applied.todo.completed is None


def test_artifacts_merge_by_path_in_place() -> None:
    """A listed path is replaced where it stands; new paths are appended; others kept."""
    path = f"specs/{TASK_DIR}/reports/research-001.md"
    existing = [
        {"type": "research", "path": path, "summary": "old summary", "extra": 1},
        {"type": "plan", "path": "specs/259/plans/p.md", "summary": "plan"},
    ]
    meta = meta_file(
        "researched",
        artifacts=[
            {"type": "report", "path": path, "summary": "new summary"},
            {"type": "research", "path": "specs/259/reports/research-002.md"},
            {"path": "notes.txt", "summary": "untyped"},
        ],
    )
    task = task_of(apply(base_state(artifacts=existing), meta).state)
    assert task["artifacts"] == [
        {"type": "research", "path": path, "summary": "new summary"},
        existing[1],
        {"type": "research", "path": "specs/259/reports/research-002.md"},
        {"path": "notes.txt", "summary": "untyped"},
    ]


def test_artifacts_list_created_when_absent() -> None:
    """A task entry without an artifacts key gets one."""
    entry = task_entry(259, "prove_completeness")
    del entry["artifacts"]
    task = task_of(apply(state_with(entry), meta_file("planned")).state)
    assert [a["type"] for a in task["artifacts"]] == ["plan"]


@pytest.mark.parametrize("status", ["failed", "blocked"])
def test_failed_and_blocked_link_no_artifacts(status: str) -> None:
    """The table links artifacts only for success and partial outcomes."""
    meta = meta_file(status, artifacts=[{"type": "report", "path": "specs/x/r.md"}])
    applied = apply(base_state(), meta)
    assert task_of(applied.state)["artifacts"] == []
    assert applied.todo is None or applied.todo.links == ()


def test_failed_needs_no_todo_edit() -> None:
    """A failed outcome leaves TODO.md alone."""
    assert apply(base_state(), meta_file("failed")).todo is None


def test_blocked_uses_status_map_and_marks_todo() -> None:
    """blocked maps through status_map, and the TODO marker follows the mapped status."""
    applied = apply_outcome(
        base_state(status="partial"),
        meta_file("blocked"),
        task=259,
        file=FILE,
        now=NOW,
        status_map={**STATUS_MAP, "blocked": "not_started"},
    )
    assert task_of(applied.state)["status"] == "not_started"
    assert applied.todo == TodoEdit(
        task=259, marker="NOT STARTED", completed=None, task_dir=f"specs/{TASK_DIR}"
    )


def test_status_map_missing_keys_fall_back_to_defaults() -> None:
    """An empty status_map means the default mapping."""
    applied = apply_outcome(
        base_state(), meta_file("implemented"), task=259, file=FILE, now=NOW, status_map={}
    )
    assert task_of(applied.state)["status"] == "completed"


@pytest.mark.parametrize(
    ("progress", "metadata", "expected"),
    [
        ({"phases_completed": 2}, {"phases_completed": 1}, 3),
        ({}, {"phases_completed": 1}, 2),
        ({"phases_completed": 0}, {}, 1),
        ({}, {}, None),
    ],
)
def test_partial_resume_phase(
    progress: dict[str, Any], metadata: dict[str, Any], expected: int | None
) -> None:
    """resume_phase = phases completed + 1, from partial_progress first, else metadata."""
    doc = meta_doc("partial")
    doc["partial_progress"] = {"stage": "s", "details": "d", **progress}
    doc["metadata"].update(metadata)
    task = task_of(apply(base_state(), MetadataFile.model_validate(doc)).state)
    assert task.get("resume_phase") == expected
    assert task["status"] == "implementing"


def test_partial_links_artifacts_without_marker() -> None:
    """partial keeps the TODO marker but links its summary."""
    doc = meta_doc("partial")
    doc["artifacts"].append({"type": "summary", "path": "specs/259/summaries/s.md"})
    applied = apply(base_state(), MetadataFile.model_validate(doc))
    assert applied.todo == TodoEdit(
        task=259,
        marker=None,
        links=(TodoLink("Summary", "specs/259/summaries/s.md"),),
        task_dir=f"specs/{TASK_DIR}",
    )


def test_error_records_from_reported_errors() -> None:
    """Each reported error becomes one errors.json record of the documented shape."""
    doc = meta_doc("failed")
    doc["errors"].append({"type": "build_error", "message": "3 type errors", "recoverable": False})
    applied = apply(base_state(), MetadataFile.model_validate(doc))
    unix = int(NOW.timestamp())
    assert applied.errors == [
        {
            "id": f"err_{unix}_1",
            "timestamp": STAMP,
            "type": "timeout",
            "severity": "high",
            "message": "Implementation timed out after 1 hour",
            "context": {
                "session_id": NEW_SESSION,
                "task": 259,
                "agent_type": "neovim-research-agent",
                "file": FILE,
            },
            "trajectory": {
                "delegation_path": ["orchestrator", "research", "neovim-research-agent"],
                "failed_at_depth": 1,
            },
            "recovery": {
                "suggested_action": "Resume with /implement 259",
                "auto_recoverable": True,
            },
            "fix_status": "unfixed",
        },
        {
            "id": f"err_{unix}_2",
            "timestamp": STAMP,
            "type": "build_error",
            "severity": "high",
            "message": "3 type errors",
            "context": applied.errors[0]["context"],
            "trajectory": applied.errors[0]["trajectory"],
            "recovery": {
                "suggested_action": "Run /plan to create implementation plan",
                "auto_recoverable": False,
            },
            "fix_status": "unfixed",
        },
    ]


@pytest.mark.parametrize("status", ["partial", "failed", "blocked"])
def test_no_errors_gives_one_generic_record(status: str) -> None:
    """PF307: a trouble status without errors still leaves one record explaining that."""
    doc = meta_doc(status)
    del doc["errors"]
    applied = apply(base_state(), MetadataFile.model_validate(doc))
    assert len(applied.errors) == 1
    record = applied.errors[0]
    assert record["type"] == UNREPORTED_ERROR_TYPE
    assert f"'{status}'" in record["message"]
    assert "without reporting any error" in record["message"]
    assert record["severity"] == ("medium" if status == "partial" else "high")
    if status == "partial":
        assert "phase_2_completed" in record["message"]


def test_in_progress_is_not_an_outcome() -> None:
    """apply_outcome refuses an in_progress file."""
    doc = {**meta_doc("researched"), "status": "in_progress", "started_at": "2026-01-08T14:00:00Z"}
    with pytest.raises(ValueError, match="in_progress"):
        apply(base_state(), MetadataFile.model_validate(doc))


def test_unknown_task_is_a_value() -> None:
    """A task not in active_projects is TaskNotFound (PF600), not an exception."""
    result = apply(state_with(task_entry(1, "x"), {"project_number": True}), meta_file("planned"))
    assert result == TaskNotFound(259)
    assert "259" in result.message


def test_other_keys_preserved() -> None:
    """Every key postflight does not own is kept, in order."""
    state = base_state(priority="high", dependencies=[1])
    applied = apply(state, meta_file("planned"))
    task = task_of(applied.state)
    assert list(task)[: len(task_of(state))] == list(task_of(state))
    assert task["priority"] == "high"
    assert applied.state["repository_health"] == {}


def test_applying_twice_is_idempotent() -> None:
    """The same file applied twice gives the same state and reports no change the 2nd time."""
    once = apply(base_state(), meta_file("implemented"))
    twice = apply(once.state, meta_file("implemented"))
    assert twice.state == once.state
    assert not twice.changed


def test_naive_and_offset_clocks_are_utc() -> None:
    """Timestamps are UTC whatever the clock's zone; a naive clock is taken as UTC."""
    assert iso_timestamp(NOW.replace(tzinfo=None)) == STAMP
    assert iso_timestamp(NOW.astimezone(timezone(timedelta(hours=-5)))) == STAMP


def test_todo_marker_spellings() -> None:
    """Lower-case state.json statuses map one-to-one to the TODO markers."""
    assert todo_marker("not_started") == "NOT STARTED"
    assert todo_marker("completed") == "COMPLETED"


def test_markdown_link_shapes() -> None:
    """Link text is the file name; awkward targets are wrapped in angle brackets."""
    assert markdown_link("specs/1_x/plans/p-001.md") == "[p-001.md](specs/1_x/plans/p-001.md)"
    assert markdown_link("specs/1 x/a (b).md") == "[a (b).md](<specs/1 x/a (b).md>)"


def test_outcomes_fold_over_one_document_and_number_errors() -> None:
    """A group commit applies every file to one document and keeps error ids distinct."""
    other = MetadataFile.model_validate(
        {
            **meta_doc("failed"),
            "metadata": {**meta_doc("failed")["metadata"], "session_id": SESSION},
        }
    )
    items = [
        (meta_file("researched"), 259, FILE),
        (other, 1, "specs/1_other_task/.return-meta.json"),
        (meta_file("blocked"), 259, FILE),
    ]
    state = base_state(status="researching")
    new: dict[str, Any] = state
    edits: list[TodoEdit] = []
    errors: list[dict[str, Any]] = []
    index = task_index(state)
    for meta, task, file in items:
        applied = apply_outcome(
            new,
            meta,
            task=task,
            file=file,
            now=NOW,
            status_map=STATUS_MAP,
            first_n=len(errors) + 1,
            index=index,
        )
        assert isinstance(applied, Applied)
        new = applied.state
        edits += [applied.todo] if applied.todo is not None else []
        errors += applied.errors
    assert task_of(new)["status"] == "blocked"
    assert "researched" in task_of(new)
    assert task_of(new, 1)["status"] == "planned"
    assert [e.marker for e in edits] == ["RESEARCHED", "BLOCKED"]
    assert len({e["id"] for e in errors}) == len(errors) == 2
    assert state == base_state(status="researching")


def test_task_index_matches_find_task() -> None:
    """First entry wins, bools and non-dicts are not tasks; a stale index is not trusted."""
    state = state_with(
        task_entry(5, "a"),
        {"project_number": True},
        "junk",
        task_entry(1, "b"),
        task_entry(5, "again"),
    )
    index = task_index(state)
    assert index == {5: 0, 1: 3}
    for task in (5, 1):
        assert find_task(state, task, index) == find_task(state, task) == index[task]
    assert find_task(state, 1, {1: 0}) == 3  # points at task 5: searched instead
    assert find_task(state, 1, {1: 99}) == 3  # out of range
    assert find_task(state, 1, {}) == 3  # not in the index: searched
    assert task_position(state, 7, index) is None
    assert task_position({"active_projects": "x"}, 1, index) is None
    with pytest.raises(KeyError):
        find_task(state, 7, index)
    with pytest.raises(KeyError):
        find_task({"active_projects": "x"}, 1, index)


def test_apply_outcome_with_index_is_the_same_fold() -> None:
    """A fold given one prebuilt index gives what the plain fold gives, input untouched."""
    state = base_state()
    before = copy.deepcopy(state)
    index = task_index(state)
    plain = with_index = state
    for status in ("researched", "planned", "implemented", "partial", "failed"):
        meta = meta_file(status)
        plain = apply(plain, meta).state
        applied = apply_outcome(
            with_index, meta, task=259, file=FILE, now=NOW, status_map=STATUS_MAP, index=index
        )
        with_index = applied.state
    assert with_index == plain
    assert with_index["active_projects"][0] is state["active_projects"][0]
    assert state == before
    missing = apply_outcome(
        state, meta_file("planned"), task=7, file=FILE, now=NOW, status_map=STATUS_MAP, index=index
    )
    assert missing == TaskNotFound(7)


# --- the outcome rendered (render_state itself: test_statetext.py) ----------------------------


def test_render_hand_formatted_file_splices_only_changed_values() -> None:
    """Irregular layouts survive: unchanged tasks byte for byte, new artifacts like siblings."""
    text = (
        "{\n"
        '  "next_project_number": 260,\n'
        '  "active_projects": [\n'
        "    {\n"
        '      "project_number": 259, "project_name": "prove_completeness",\n'
        '      "status": "planning",\n'
        '      "artifacts": [\n'
        '        {"type": "research", "path": "specs/259/reports/r.md", "summary": "R"}\n'
        "      ]\n"
        "    },\n"
        '    {"project_number": 3,   "status": "planned", "artifacts": []}\n'
        "  ],\n"
        '  "notes": "kept  as  is"\n'
        "}\n"
    )
    doc = json.loads(text)
    state = apply(doc, meta_file("planned")).state
    out = render_state(text, doc, state)
    assert json.loads(out) == state
    assert '    {"project_number": 3,   "status": "planned", "artifacts": []}\n' in out
    assert '      "project_number": 259, "project_name": "prove_completeness",\n' in out
    assert '      "status": "planned",\n' in out
    plan = f"specs/{TASK_DIR}/plans/implementation-001.md"
    assert (
        f'        {{"type": "plan", "path": "{plan}", "summary": "4-phase plan"}}\n      ]' in out
    )
    assert '"last_updated": "2026-01-08T14:30:05Z"' in out
    assert out.endswith('  "notes": "kept  as  is"\n}\n')


# --- property tests -------------------------------------------------------------------------


_names = st.text("abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=10)
_sentences = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
_artifacts = st.lists(
    st.fixed_dictionaries(
        {"path": _names.map(lambda n: f"specs/259_x/{n}.md")},
        optional={
            "type": st.sampled_from(["report", "research", "plan", "summary", "implementation"]),
            "summary": _sentences,
        },
    ),
    max_size=4,
)
_errors = st.lists(
    st.fixed_dictionaries(
        {"message": _sentences},
        optional={
            "type": _names,
            "recoverable": st.booleans(),
            "recommendation": _sentences,
        },
    ),
    max_size=3,
)
_phases = st.none() | st.integers(0, 20)


@st.composite
def metadata_docs(draw: st.DrawFn) -> dict[str, Any]:
    """Random final metadata documents within the schema."""
    status = draw(st.sampled_from(FINAL_STATUSES))
    doc: dict[str, Any] = {
        "status": status,
        "artifacts": draw(_artifacts),
        "metadata": {
            "session_id": draw(st.sampled_from([SESSION, NEW_SESSION])),
            "agent_type": draw(st.none() | _names),
            "delegation_depth": 1,
            "delegation_path": draw(st.none() | st.lists(_names, max_size=4)),
            "phases_completed": draw(_phases),
        },
    }
    if draw(st.booleans()):
        doc["partial_progress"] = {
            "stage": draw(_names),
            "details": draw(_sentences),
            "phases_completed": draw(_phases),
        }
    if status == "implemented" or draw(st.booleans()):
        doc["completion_data"] = {
            "completion_summary": draw(_sentences),
            "roadmap_items": draw(st.none() | st.lists(_sentences, max_size=2)),
            "claudemd_suggestions": draw(st.none() | _sentences),
        }
    if draw(st.booleans()):
        doc["errors"] = draw(_errors)
    if draw(st.booleans()):
        doc["next_steps"] = draw(_sentences)
    return doc


_existing_artifacts = st.lists(
    st.fixed_dictionaries(
        {"path": _names.map(lambda n: f"specs/259_x/{n}.md"), "type": st.just("research")}
    ),
    max_size=3,
)


@settings(max_examples=100, deadline=None, database=None)
@given(doc=metadata_docs(), existing=_existing_artifacts, language=st.sampled_from(["a", "meta"]))
def test_random_metadata_applies_idempotently(
    doc: dict[str, Any], existing: list[dict[str, Any]], language: str
) -> None:
    """Random valid metadata never raises, and applying it twice equals applying it once."""
    meta = MetadataFile.model_validate(doc)
    state = base_state(language, artifacts=existing)
    once = apply(state, meta)
    twice = apply(once.state, meta)
    assert twice.state == once.state
    assert twice.todo == once.todo
    assert not twice.changed
    merged, _ = merge_errors([], once.errors)
    assert merge_errors(merged, twice.errors) == (merged, 0)
    text = json.dumps(state, indent=2, ensure_ascii=False) + "\n"
    rendered = render_state(text, state, once.state)
    assert json.loads(rendered) == once.state
    assert render_state(rendered, once.state, twice.state) == rendered


# --- decided from a real client's history (~1,700 real postflights replayed) ---------------


def test_every_artifact_is_linked_under_its_label() -> None:
    """All artifacts of the file are linked, in order; long type names too; others are not."""
    kinds = [
        ("report", "reports/a.md", "Research"),
        ("research", "reports/b.md", "Research"),
        ("research_report", "reports/c.md", "Research"),
        ("plan", "plans/a.md", "Plan"),
        ("implementation_plan", "plans/b.md", "Plan"),
        ("summary", "summaries/a.md", "Summary"),
        ("implementation_summary", "summaries/b.md", "Summary"),
        ("implementation", "src/x.py", None),
        ("notes", "notes/n.md", None),
    ]
    meta = meta_file(
        "partial",
        artifacts=[{"type": t, "path": f"specs/{TASK_DIR}/{p}", "summary": t} for t, p, _ in kinds],
    )
    applied = apply(base_state(), meta)
    assert applied.todo is not None
    assert applied.todo.links == tuple(
        TodoLink(label, f"specs/{TASK_DIR}/{p}", t) for t, p, label in kinds if label is not None
    )
    stored = [a["type"] for a in task_of(applied.state)["artifacts"]]
    assert stored == ["research", *[t for t, _, _ in kinds[1:]]]


@pytest.mark.parametrize(
    ("current", "outcome", "expected_status", "marker"),
    [
        ("implementing", "researched", "implementing", None),
        ("planned", "researched", "planned", None),
        ("completed", "researched", "completed", None),
        ("completed", "planned", "completed", None),
        ("implementing", "planned", "implementing", None),
        ("planning", "researched", "planning", None),
        # forwards, or the same place: the table as written
        ("researched", "researched", "researched", "RESEARCHED"),
        ("researching", "planned", "planned", "PLANNED"),
        ("completed", "implemented", "completed", "COMPLETED"),
        # from blocked, partial, not_started or an off-line status: the table as written
        ("blocked", "researched", "researched", "RESEARCHED"),
        ("partial", "researched", "researched", "RESEARCHED"),
        ("not_started", "planned", "planned", "PLANNED"),
        ("abandoned", "researched", "researched", "RESEARCHED"),
        ("on_hold", "researched", "researched", "RESEARCHED"),
        # blocked is off the line: a blocked outcome blocks even a completed task
        ("completed", "blocked", "blocked", "BLOCKED"),
        # written in another case or with a space: still on the line
        ("Implementing", "researched", "Implementing", None),
        ("not started", "researched", "researched", "RESEARCHED"),
    ],
)
def test_a_task_never_moves_backwards(
    current: str, outcome: str, expected_status: str, marker: str | None
) -> None:
    """Behind the current status: linked, stamped, status and marker left alone."""
    applied = apply(base_state(status=current), meta_file(outcome))
    task = task_of(applied.state)
    assert task["status"] == expected_status
    assert task["last_updated"] == STAMP
    assert task["session_id"] == NEW_SESSION
    if field_name := EXPECTED_TIMESTAMP.get(outcome):
        assert task[field_name] == STAMP
    assert [a["path"] for a in task["artifacts"]] == [
        a["path"] for a in meta_doc(outcome)["artifacts"]
    ]
    todo_marker_ = applied.todo.marker if applied.todo is not None else None
    assert todo_marker_ == marker


def test_status_map_to_an_earlier_status_does_not_move_back() -> None:
    """The rule holds for the mapped status, whatever status_map says."""
    applied = apply_outcome(
        base_state(status="implementing"),
        meta_file("blocked"),
        task=259,
        file=FILE,
        now=NOW,
        status_map={**STATUS_MAP, "blocked": "planning"},
    )
    assert task_of(applied.state)["status"] == "implementing"
    assert applied.todo is None


def test_todo_edit_names_the_task_directory() -> None:
    """Relative link forms are resolved against the file's task directory (None if absolute)."""
    meta = meta_file("researched")
    for file, task_dir in [
        (FILE, f"specs/{TASK_DIR}"),
        (f".claude/specs/{TASK_DIR}/.return-meta.json", f".claude/specs/{TASK_DIR}"),
        (f"/abs/specs/{TASK_DIR}/.return-meta.json", None),
        (".return-meta.json", None),
    ]:
        applied = apply_outcome(
            base_state(), meta, task=259, file=file, now=NOW, status_map=STATUS_MAP
        )
        assert applied.todo is not None
        assert applied.todo.task_dir == task_dir, file


def test_markdown_link_escapes_what_would_end_it() -> None:
    """Brackets, angle brackets and backslashes cannot end the link or start markup."""
    assert markdown_link("specs/a]b[c.md") == r"[a\]b\[c.md](specs/a]b[c.md)"
    assert markdown_link("specs/a b>c.md") == r"[a b>c.md](<specs/a b\>c.md>)"
    assert markdown_link("specs/a\\b.md") == r"[a\\b.md](specs/a\\b.md)"


def test_blank_next_steps_and_recommendation_fall_back() -> None:
    """Blank text is not copied into errors.json as advice (PF206/PF207 report it)."""
    doc = meta_doc("failed", next_steps="  ")
    doc["errors"][0]["recommendation"] = " "
    doc["errors"][0]["type"] = ""
    applied = apply(base_state(), MetadataFile.model_validate(doc))
    record = applied.errors[0]
    assert record["recovery"]["suggested_action"] == ""
    assert record["type"] == "failed"
    doc.pop("errors")
    applied = apply(base_state(), MetadataFile.model_validate(doc))
    assert applied.errors[0]["recovery"]["suggested_action"].startswith("Read the agent's")


def test_todo_edit_round_trips_through_json_and_reads_old_journal_rows() -> None:
    """The journal's form of an edit reads back; rows written before links accumulated
    (``{label: "[name](path)"}``) read as one link per label; odd values are dropped."""
    edit = TodoEdit(
        task=5,
        marker="RESEARCHED",
        links=(TodoLink("Research", "specs/5_x/reports/r.md", "R"), TodoLink("Plan", "p q.md")),
        completed="2026-01-08",
        task_dir="specs/5_x",
    )
    assert TodoEdit.from_json(5, json.loads(json.dumps(edit.to_json()))) == edit
    old = {"marker": "PLANNED", "links": {"Plan": "[p q.md](<specs/5 x/p q.md>)", "X": 3}}
    assert TodoEdit.from_json(5, old) == TodoEdit(
        task=5, marker="PLANNED", links=(TodoLink("Plan", "specs/5 x/p q.md"),)
    )
    odd = {"marker": 3, "links": [{"label": 1, "path": "x"}, "y", {"label": "Plan"}], "task_dir": 0}
    assert TodoEdit.from_json(5, odd) == TodoEdit(task=5, marker=None)
