"""rules.fixes: what a file probably meant, and each finding's fix built from the file's own
values (never an example from another task), beside a message that is not changed by it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from postflightd.rules.context import TaskContext
from postflightd.rules.fixes import guess_status, status_word
from postflightd.rules.metadata import RuleOptions, validate

STATUSES = ("complete", "partial", "error")
NOW = datetime(2026, 1, 8, 15, 0, tzinfo=UTC)
OTHER = "sess_1736700999_zzz999"


def doc_949(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "status": "researched",
        "artifacts": [
            {"type": "report", "path": "specs/949_lean/reports/research-001.md", "summary": "r"}
        ],
        "next_steps": "Plan the proof",
        "metadata": {
            "session_id": "sess_1736700000_abc123",
            "agent_type": "general-research-agent",
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "general-research-agent"],
        },
    }
    doc.update(changes)
    return doc


def fixes_of(doc: dict[str, Any], ctx: TaskContext) -> dict[tuple[str, str], str | None]:
    found = validate(
        doc, ctx, NOW, RuleOptions({"default": 3600.0}, check_artifacts=False), None
    ).findings
    return {(f.code, f.location): f.fix for f in found}


CTX = TaskContext(
    "949_lean",
    949,
    "lean",
    True,
    {"project_number": 949, "project_name": "lean", "session_id": OTHER},
)


def test_each_fix_is_built_from_this_file_and_this_task() -> None:
    fixes = fixes_of(
        doc_949(status="plan_done", next_step="Plan the proof", reviewer_notes="x"), CTX
    )
    elsewhere = doc_949()
    elsewhere["artifacts"][0]["path"] = "/home/me/notes/research.md"
    fixes.update(fixes_of(elsewhere, CTX))
    # PF202: the status its message suggests.
    assert fixes[("PF202", "status")] == '"status": "planned"'
    # PF405: the session state.json holds for task 949.
    assert fixes[("PF405", "metadata.session_id")] == f'"session_id": "{OTHER}"'
    # PF501: this artifact's own name, in task 949's directory, in its type's folder.
    assert fixes[("PF501", "artifacts[0].path")] == '"path": "specs/949_lean/reports/research.md"'
    # PF205: the field a misspelling meant, with its value; a new field has nothing to write.
    assert fixes[("PF205", "next_step")] == '"next_steps": "Plan the proof"'
    assert fixes[("PF205", "reviewer_notes")] is None


def test_a_fix_is_valid_json_when_put_in_an_object() -> None:
    doc = doc_949(status="Researched!", nextsteps='say "done"\n')
    for fix in fixes_of(doc, CTX).values():
        if fix is not None:
            assert isinstance(json.loads("{" + fix + "}"), dict)


def test_completed_gets_the_success_status_of_the_run() -> None:
    assert fixes_of(doc_949(status="completed"), CTX)[("PF203", "status")] == (
        '"status": "researched"'
    )


def test_status_word_folds_case_spaces_and_dashes() -> None:
    assert status_word(" In-Progress now ") == "in_progress_now"


def test_guess_status_prefers_the_status_then_a_synonym_then_a_spelling_then_a_stem() -> None:
    synonyms = {"error": ("failed",), "partial": ("completed",)}
    stems = (("plet", "complete"),)
    assert guess_status("Complete", STATUSES, synonyms, stems) == "complete"
    # "completed" is close to "complete", but the dialect's synonym decides first.
    assert guess_status("completed", STATUSES, synonyms, stems) == "partial"
    assert guess_status("completed", STATUSES) == "complete"
    assert guess_status("eror", STATUSES, synonyms, stems) == "error"
    assert guess_status("xpletx", STATUSES, synonyms, stems) == "complete"
    assert guess_status("xpletx", STATUSES, synonyms) is None


@settings(database=None)
@given(st.text(max_size=20))
def test_guess_status_never_raises_and_names_only_a_known_status(raw: str) -> None:
    stems = (("fail", "error"),)
    guess = guess_status(raw, STATUSES, {"partial": ("timeout",)}, stems)
    assert guess is None or guess in STATUSES
