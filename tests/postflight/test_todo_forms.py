"""Real task-list forms (the forms real projects' TODO.md files use): a table of postflights
per form.

Each form's TODO.md gets the same run of outcomes, through ``apply_outcome`` and
``apply_todo_edits`` as the pipeline applies them, and after each the task's section must be
exactly as written here; nothing outside the section changes.
"""

from __future__ import annotations

import copy
import difflib
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.models.metadata import MetadataFile
from postflightd.postflight.todo_edit import apply_todo_edits, section_links
from postflightd.postflight.transform import apply_outcome, task_index

NOW = datetime(2026, 2, 3, 10, 0, tzinfo=UTC)
D = "specs/014_docs"
FILE = f"{D}/.return-meta.json"
BEFORE = """\
---
next_project_number: 20
---

# TODO

## Tasks

### 15. Other task
- **Status**: [PLANNED]
- **Research**: [research-001.md](specs/015_other/reports/research-001.md)

"""
HEADING = "### 14. Docs\n- **Effort**: 2 hours\n- **Status**: [{marker}]\n- **Language**: python\n"
AFTER = """\
**Description**: Write the docs.   \n\

### 13. Last task
- **Status**: [RESEARCHED]
"""

#: form -> (its link lines before the first postflight, state.json's artifacts for them)
FORMS: dict[str, tuple[str, list[dict[str, str]]]] = {
    "label line": (
        "- **Research**: [notes.md](specs/014_docs/reports/notes.md)\n",
        [{"type": "research", "path": f"{D}/reports/notes.md"}],
    ),
    "sub-list": (
        "- **Research**:\n"
        "  - [00_teammate.md](014_docs/reports/00_teammate.md) \u2014 a teammate's findings\n",
        [{"type": "research", "path": f"{D}/reports/00_teammate.md"}],
    ),
    "bare links": (
        "- **Research Report**: [specs/014_docs/reports/notes.md]\n",
        [{"type": "research", "path": f"{D}/reports/notes.md"}],
    ),
    "artifacts list": (
        "- **Artifacts**:\n  - reports/notes.md\n",
        [{"type": "research", "path": f"{D}/reports/notes.md"}],
    ),
    "plural labels": (
        "- **Research Reports**: [notes.md](specs/014_docs/reports/notes.md)\n"
        "- **Implementation Plan**: [draft.md](specs/014_docs/plans/draft.md)\n"
        "- **Summaries**:\n",
        [
            {"type": "research", "path": f"{D}/reports/notes.md"},
            {"type": "plan", "path": f"{D}/plans/draft.md"},
        ],
    ),
    "specs-relative": (
        "- **Research**: [notes.md](014_docs/reports/notes.md)\n",
        [{"type": "research", "path": f"{D}/reports/notes.md"}],
    ),
    "mixed": (
        "- **Research**:\n"
        "  - [02_spawn.md](specs/010_spawn/reports/02_spawn.md)\n"
        "- **Plan**: [specs/014_docs/plans/draft.md]\n"
        "- **Artifacts**:\n"
        "  - src/notes.txt\n",
        [{"type": "plan", "path": f"{D}/plans/draft.md"}],
    ),
}


def art(kind: str, path: str, summary: str) -> dict[str, str]:
    return {"type": kind, "path": f"{D}/{path}", "summary": summary}


def doc(status: str, artifacts: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    return {
        "status": status,
        "artifacts": artifacts,
        "metadata": {
            "session_id": "sess_1770000000_abc123",
            "agent_type": "agent",
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "x", "agent"],
        },
        **extra,
    }


#: (step, the status the workflow's preflight sets first or None, the metadata file)
STEPS: list[tuple[str, str | None, dict[str, Any]]] = [
    (
        "first research",
        "researching",
        doc("researched", [art("report", "reports/research-001.md", "First findings")]),
    ),
    (
        "second research",
        "researching",
        doc(
            "researched",
            [
                art("research_report", "reports/research-002.md", "Second look"),
                art("report", "reports/research-001.md", "First findings"),
            ],
        ),
    ),
    (
        "plan",
        "planning",
        doc("planned", [art("implementation_plan", "plans/implementation-001.md", "3 phases")]),
    ),
    (
        "partial with a summary",
        "implementing",
        doc(
            "partial",
            [
                art("implementation", "src/docs.py", "phase 1"),
                art("summary", "summaries/partial-summary.md", "Phase 1 of 3"),
            ],
            partial_progress={"stage": "phase_1", "details": "done", "phases_completed": 1},
        ),
    ),
    (
        "follow-up research on an implementing task",
        None,
        doc("researched", [art("report", "reports/research-003.md", "Follow-up")]),
    ),
    (
        "implemented",
        None,
        doc(
            "implemented",
            [
                art("implementation", "src/docs.py", "all phases"),
                art("implementation_summary", "summaries/implementation-summary.md", "Done"),
            ],
            completion_data={"completion_summary": "Docs written."},
        ),
    ),
]

#: form -> after each step: (the Status marker, the lines after the Language line)
EXPECTED: dict[str, list[tuple[str, str]]] = {
    "label line": [
        (
            "RESEARCHED",
            "- **Research**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md)\n"
            "\n",
        ),
        (
            "RESEARCHED",
            "- **Research**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md)\n"
            "\n",
        ),
        (
            "PLANNED",
            "- **Research**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md)\n"
            "- **Plan**: [implementation-001.md](specs/014_docs/plans/implementation-001.md)\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md)\n"
            "- **Plan**: [implementation-001.md](specs/014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](specs/014_docs/summaries/partial-summary.md)\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md), "
            "[research-003.md](specs/014_docs/reports/research-003.md)\n"
            "- **Plan**: [implementation-001.md](specs/014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](specs/014_docs/summaries/partial-summary.md)\n"
            "\n",
        ),
        (
            "COMPLETED",
            "- **Research**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md), "
            "[research-003.md](specs/014_docs/reports/research-003.md)\n"
            "- **Plan**: [implementation-001.md](specs/014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](specs/014_docs/summaries/partial-summary.md), "
            "[implementation-summary.md](specs/014_docs/summaries/implementation-summary.md)\n"
            "- **Completed**: 2026-02-03\n"
            "\n",
        ),
    ],
    "sub-list": [
        (
            "RESEARCHED",
            "- **Research**:\n"
            "  - [00_teammate.md](014_docs/reports/00_teammate.md) — a teammate's findings\n"
            "  - [research-001.md](014_docs/reports/research-001.md) — First findings\n"
            "\n",
        ),
        (
            "RESEARCHED",
            "- **Research**:\n"
            "  - [00_teammate.md](014_docs/reports/00_teammate.md) — a teammate's findings\n"
            "  - [research-001.md](014_docs/reports/research-001.md) — First findings\n"
            "  - [research-002.md](014_docs/reports/research-002.md) — Second look\n"
            "\n",
        ),
        (
            "PLANNED",
            "- **Research**:\n"
            "  - [00_teammate.md](014_docs/reports/00_teammate.md) — a teammate's findings\n"
            "  - [research-001.md](014_docs/reports/research-001.md) — First findings\n"
            "  - [research-002.md](014_docs/reports/research-002.md) — Second look\n"
            "- **Plan**: [implementation-001.md](014_docs/plans/implementation-001.md)\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research**:\n"
            "  - [00_teammate.md](014_docs/reports/00_teammate.md) — a teammate's findings\n"
            "  - [research-001.md](014_docs/reports/research-001.md) — First findings\n"
            "  - [research-002.md](014_docs/reports/research-002.md) — Second look\n"
            "- **Plan**: [implementation-001.md](014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](014_docs/summaries/partial-summary.md)\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research**:\n"
            "  - [00_teammate.md](014_docs/reports/00_teammate.md) — a teammate's findings\n"
            "  - [research-001.md](014_docs/reports/research-001.md) — First findings\n"
            "  - [research-002.md](014_docs/reports/research-002.md) — Second look\n"
            "  - [research-003.md](014_docs/reports/research-003.md) — Follow-up\n"
            "- **Plan**: [implementation-001.md](014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](014_docs/summaries/partial-summary.md)\n"
            "\n",
        ),
        (
            "COMPLETED",
            "- **Research**:\n"
            "  - [00_teammate.md](014_docs/reports/00_teammate.md) — a teammate's findings\n"
            "  - [research-001.md](014_docs/reports/research-001.md) — First findings\n"
            "  - [research-002.md](014_docs/reports/research-002.md) — Second look\n"
            "  - [research-003.md](014_docs/reports/research-003.md) — Follow-up\n"
            "- **Plan**: [implementation-001.md](014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](014_docs/summaries/partial-summary.md), "
            "[implementation-summary.md](014_docs/summaries/implementation-summary.md)\n"
            "- **Completed**: 2026-02-03\n"
            "\n",
        ),
    ],
    "bare links": [
        (
            "RESEARCHED",
            "- **Research Report**: [specs/014_docs/reports/notes.md], "
            "[specs/014_docs/reports/research-001.md]\n"
            "\n",
        ),
        (
            "RESEARCHED",
            "- **Research Report**: [specs/014_docs/reports/notes.md], "
            "[specs/014_docs/reports/research-001.md], "
            "[specs/014_docs/reports/research-002.md]\n"
            "\n",
        ),
        (
            "PLANNED",
            "- **Research Report**: [specs/014_docs/reports/notes.md], "
            "[specs/014_docs/reports/research-001.md], "
            "[specs/014_docs/reports/research-002.md]\n"
            "- **Plan**: [specs/014_docs/plans/implementation-001.md]\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research Report**: [specs/014_docs/reports/notes.md], "
            "[specs/014_docs/reports/research-001.md], "
            "[specs/014_docs/reports/research-002.md]\n"
            "- **Plan**: [specs/014_docs/plans/implementation-001.md]\n"
            "- **Summary**: [specs/014_docs/summaries/partial-summary.md]\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research Report**: [specs/014_docs/reports/notes.md], "
            "[specs/014_docs/reports/research-001.md], "
            "[specs/014_docs/reports/research-002.md], "
            "[specs/014_docs/reports/research-003.md]\n"
            "- **Plan**: [specs/014_docs/plans/implementation-001.md]\n"
            "- **Summary**: [specs/014_docs/summaries/partial-summary.md]\n"
            "\n",
        ),
        (
            "COMPLETED",
            "- **Research Report**: [specs/014_docs/reports/notes.md], "
            "[specs/014_docs/reports/research-001.md], "
            "[specs/014_docs/reports/research-002.md], "
            "[specs/014_docs/reports/research-003.md]\n"
            "- **Plan**: [specs/014_docs/plans/implementation-001.md]\n"
            "- **Summary**: [specs/014_docs/summaries/partial-summary.md], "
            "[specs/014_docs/summaries/implementation-summary.md]\n"
            "- **Completed**: 2026-02-03\n"
            "\n",
        ),
    ],
    "artifacts list": [
        ("RESEARCHED", "- **Artifacts**:\n  - reports/notes.md\n  - reports/research-001.md\n\n"),
        (
            "RESEARCHED",
            "- **Artifacts**:\n"
            "  - reports/notes.md\n"
            "  - reports/research-001.md\n"
            "  - reports/research-002.md\n"
            "\n",
        ),
        (
            "PLANNED",
            "- **Artifacts**:\n"
            "  - reports/notes.md\n"
            "  - reports/research-001.md\n"
            "  - reports/research-002.md\n"
            "  - plans/implementation-001.md\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Artifacts**:\n"
            "  - reports/notes.md\n"
            "  - reports/research-001.md\n"
            "  - reports/research-002.md\n"
            "  - plans/implementation-001.md\n"
            "  - summaries/partial-summary.md\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Artifacts**:\n"
            "  - reports/notes.md\n"
            "  - reports/research-001.md\n"
            "  - reports/research-002.md\n"
            "  - plans/implementation-001.md\n"
            "  - summaries/partial-summary.md\n"
            "  - reports/research-003.md\n"
            "\n",
        ),
        (
            "COMPLETED",
            "- **Artifacts**:\n"
            "  - reports/notes.md\n"
            "  - reports/research-001.md\n"
            "  - reports/research-002.md\n"
            "  - plans/implementation-001.md\n"
            "  - summaries/partial-summary.md\n"
            "  - reports/research-003.md\n"
            "  - summaries/implementation-summary.md\n"
            "- **Completed**: 2026-02-03\n"
            "\n",
        ),
    ],
    "plural labels": [
        (
            "RESEARCHED",
            "- **Research Reports**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md)\n"
            "- **Implementation Plan**: [draft.md](specs/014_docs/plans/draft.md)\n"
            "- **Summaries**:\n"
            "\n",
        ),
        (
            "RESEARCHED",
            "- **Research Reports**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md)\n"
            "- **Implementation Plan**: [draft.md](specs/014_docs/plans/draft.md)\n"
            "- **Summaries**:\n"
            "\n",
        ),
        (
            "PLANNED",
            "- **Research Reports**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md)\n"
            "- **Implementation Plan**: [draft.md](specs/014_docs/plans/draft.md), "
            "[implementation-001.md](specs/014_docs/plans/implementation-001.md)\n"
            "- **Summaries**:\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research Reports**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md)\n"
            "- **Implementation Plan**: [draft.md](specs/014_docs/plans/draft.md), "
            "[implementation-001.md](specs/014_docs/plans/implementation-001.md)\n"
            "- **Summaries**: [partial-summary.md](specs/014_docs/summaries/partial-summary.md)\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research Reports**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md), "
            "[research-003.md](specs/014_docs/reports/research-003.md)\n"
            "- **Implementation Plan**: [draft.md](specs/014_docs/plans/draft.md), "
            "[implementation-001.md](specs/014_docs/plans/implementation-001.md)\n"
            "- **Summaries**: [partial-summary.md](specs/014_docs/summaries/partial-summary.md)\n"
            "\n",
        ),
        (
            "COMPLETED",
            "- **Research Reports**: [notes.md](specs/014_docs/reports/notes.md), "
            "[research-001.md](specs/014_docs/reports/research-001.md), "
            "[research-002.md](specs/014_docs/reports/research-002.md), "
            "[research-003.md](specs/014_docs/reports/research-003.md)\n"
            "- **Implementation Plan**: [draft.md](specs/014_docs/plans/draft.md), "
            "[implementation-001.md](specs/014_docs/plans/implementation-001.md)\n"
            "- **Summaries**: [partial-summary.md](specs/014_docs/summaries/partial-summary.md), "
            "[implementation-summary.md](specs/014_docs/summaries/implementation-summary.md)\n"
            "- **Completed**: 2026-02-03\n"
            "\n",
        ),
    ],
    "specs-relative": [
        (
            "RESEARCHED",
            "- **Research**: [notes.md](014_docs/reports/notes.md), "
            "[research-001.md](014_docs/reports/research-001.md)\n"
            "\n",
        ),
        (
            "RESEARCHED",
            "- **Research**: [notes.md](014_docs/reports/notes.md), "
            "[research-001.md](014_docs/reports/research-001.md), "
            "[research-002.md](014_docs/reports/research-002.md)\n"
            "\n",
        ),
        (
            "PLANNED",
            "- **Research**: [notes.md](014_docs/reports/notes.md), "
            "[research-001.md](014_docs/reports/research-001.md), "
            "[research-002.md](014_docs/reports/research-002.md)\n"
            "- **Plan**: [implementation-001.md](014_docs/plans/implementation-001.md)\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research**: [notes.md](014_docs/reports/notes.md), "
            "[research-001.md](014_docs/reports/research-001.md), "
            "[research-002.md](014_docs/reports/research-002.md)\n"
            "- **Plan**: [implementation-001.md](014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](014_docs/summaries/partial-summary.md)\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research**: [notes.md](014_docs/reports/notes.md), "
            "[research-001.md](014_docs/reports/research-001.md), "
            "[research-002.md](014_docs/reports/research-002.md), "
            "[research-003.md](014_docs/reports/research-003.md)\n"
            "- **Plan**: [implementation-001.md](014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](014_docs/summaries/partial-summary.md)\n"
            "\n",
        ),
        (
            "COMPLETED",
            "- **Research**: [notes.md](014_docs/reports/notes.md), "
            "[research-001.md](014_docs/reports/research-001.md), "
            "[research-002.md](014_docs/reports/research-002.md), "
            "[research-003.md](014_docs/reports/research-003.md)\n"
            "- **Plan**: [implementation-001.md](014_docs/plans/implementation-001.md)\n"
            "- **Summary**: [partial-summary.md](014_docs/summaries/partial-summary.md), "
            "[implementation-summary.md](014_docs/summaries/implementation-summary.md)\n"
            "- **Completed**: 2026-02-03\n"
            "\n",
        ),
    ],
    "mixed": [
        (
            "RESEARCHED",
            "- **Research**:\n"
            "  - [02_spawn.md](specs/010_spawn/reports/02_spawn.md)\n"
            "  - [research-001.md](specs/014_docs/reports/research-001.md)\n"
            "- **Plan**: [specs/014_docs/plans/draft.md]\n"
            "- **Artifacts**:\n"
            "  - src/notes.txt\n"
            "\n",
        ),
        (
            "RESEARCHED",
            "- **Research**:\n"
            "  - [02_spawn.md](specs/010_spawn/reports/02_spawn.md)\n"
            "  - [research-001.md](specs/014_docs/reports/research-001.md)\n"
            "  - [research-002.md](specs/014_docs/reports/research-002.md)\n"
            "- **Plan**: [specs/014_docs/plans/draft.md]\n"
            "- **Artifacts**:\n"
            "  - src/notes.txt\n"
            "\n",
        ),
        (
            "PLANNED",
            "- **Research**:\n"
            "  - [02_spawn.md](specs/010_spawn/reports/02_spawn.md)\n"
            "  - [research-001.md](specs/014_docs/reports/research-001.md)\n"
            "  - [research-002.md](specs/014_docs/reports/research-002.md)\n"
            "- **Plan**: [specs/014_docs/plans/draft.md], "
            "[specs/014_docs/plans/implementation-001.md]\n"
            "- **Artifacts**:\n"
            "  - src/notes.txt\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research**:\n"
            "  - [02_spawn.md](specs/010_spawn/reports/02_spawn.md)\n"
            "  - [research-001.md](specs/014_docs/reports/research-001.md)\n"
            "  - [research-002.md](specs/014_docs/reports/research-002.md)\n"
            "- **Plan**: [specs/014_docs/plans/draft.md], "
            "[specs/014_docs/plans/implementation-001.md]\n"
            "- **Artifacts**:\n"
            "  - src/notes.txt\n"
            "  - summaries/partial-summary.md\n"
            "\n",
        ),
        (
            "IMPLEMENTING",
            "- **Research**:\n"
            "  - [02_spawn.md](specs/010_spawn/reports/02_spawn.md)\n"
            "  - [research-001.md](specs/014_docs/reports/research-001.md)\n"
            "  - [research-002.md](specs/014_docs/reports/research-002.md)\n"
            "  - [research-003.md](specs/014_docs/reports/research-003.md)\n"
            "- **Plan**: [specs/014_docs/plans/draft.md], "
            "[specs/014_docs/plans/implementation-001.md]\n"
            "- **Artifacts**:\n"
            "  - src/notes.txt\n"
            "  - summaries/partial-summary.md\n"
            "\n",
        ),
        (
            "COMPLETED",
            "- **Research**:\n"
            "  - [02_spawn.md](specs/010_spawn/reports/02_spawn.md)\n"
            "  - [research-001.md](specs/014_docs/reports/research-001.md)\n"
            "  - [research-002.md](specs/014_docs/reports/research-002.md)\n"
            "  - [research-003.md](specs/014_docs/reports/research-003.md)\n"
            "- **Plan**: [specs/014_docs/plans/draft.md], "
            "[specs/014_docs/plans/implementation-001.md]\n"
            "- **Artifacts**:\n"
            "  - src/notes.txt\n"
            "  - summaries/partial-summary.md\n"
            "  - summaries/implementation-summary.md\n"
            "- **Completed**: 2026-02-03\n"
            "\n",
        ),
    ],
}


def preflight(todo: str, state: dict[str, Any], status: str) -> tuple[str, dict[str, Any]]:
    """What a workflow does before delegating: the task's status, in both files."""
    state = copy.deepcopy(state)
    state["active_projects"][0]["status"] = status
    marker = status.upper().replace("_", " ")
    todo = todo.replace(HEADING.format(marker=_marker(todo)), HEADING.format(marker=marker), 1)
    return todo, state


def _marker(todo: str) -> str:
    return todo.split("### 14. Docs\n- **Effort**: 2 hours\n- **Status**: [", 1)[1].split(
        "]", maxsplit=1
    )[0]


def linked_state_paths(state: dict[str, Any]) -> list[str]:
    linked = {"research", "plan", "summary", "research_report", "implementation_plan"}
    linked.add("implementation_summary")
    return [a["path"] for a in state["active_projects"][0]["artifacts"] if a["type"] in linked]


@pytest.mark.parametrize("crlf", [False, True])
@pytest.mark.parametrize("form", list(FORMS))
def test_postflights_in_each_real_form(form: str, crlf: bool) -> None:
    """After every postflight the section is exactly as expected, links only ever added, and
    every byte outside the section unchanged (LF and CRLF files alike)."""
    eol = "\r\n" if crlf else "\n"
    lines, artifacts = FORMS[form]
    todo = BEFORE + HEADING.format(marker="NOT STARTED") + lines + "\n" + AFTER
    state: dict[str, Any] = {
        "active_projects": [
            task_entry(14, "docs", status="not_started", artifacts=copy.deepcopy(artifacts))
        ]
    }
    assert len(EXPECTED[form]) == len(STEPS)
    for (step, before_run, meta), (marker, expected) in zip(STEPS, EXPECTED[form], strict=True):
        if before_run is not None:
            todo, state = preflight(todo, state, before_run)
        old_links = section_links(todo, 14, D)
        applied = apply_outcome(
            state,
            MetadataFile.model_validate(meta),
            task=14,
            file=FILE,
            now=NOW,
            status_map={},
            index=task_index(state),
        )
        state = applied.state
        edits = [] if applied.todo is None else [applied.todo]
        new, missing = apply_todo_edits(todo.replace("\n", eol), edits)
        assert missing == []
        assert "\n" not in new.replace("\r\n", "") if crlf else "\r" not in new, step
        new = new.replace("\r\n", "\n")
        section = HEADING.format(marker=marker) + expected
        assert new == BEFORE + section + AFTER, step
        # Links accumulate: every link there before is still there, none twice, and they are
        # the task's linked artifacts in state.json.
        now_links = section_links(new, 14, D)
        assert old_links is not None
        assert now_links is not None
        assert now_links[: len(old_links)] == old_links or all(
            link in now_links for link in old_links
        ), step
        paths = linked_state_paths(state)
        assert len(set(paths)) == len(paths)
        for path in paths:
            assert sum(path in link for link in now_links) == 1, (step, path)
        todo = new
    assert state["active_projects"][0]["status"] == "completed"


def test_follow_up_research_keeps_status_and_marker() -> None:
    """The backwards step of the table: artifacts linked, timestamp set, status and marker kept."""
    todo = BEFORE + HEADING.format(marker="IMPLEMENTING") + FORMS["label line"][0] + "\n" + AFTER
    entry = task_entry(14, "docs", status="implementing", artifacts=[])
    applied = apply_outcome(
        {"active_projects": [entry]},
        MetadataFile.model_validate(STEPS[4][2]),
        task=14,
        file=FILE,
        now=NOW,
        status_map={},
    )
    task = applied.state["active_projects"][0]
    assert task["status"] == "implementing"
    assert task["researched"] == task["last_updated"] == "2026-02-03T10:00:00Z"
    assert task["session_id"] == "sess_1770000000_abc123"
    assert applied.todo is not None
    assert applied.todo.marker is None
    new, _ = apply_todo_edits(todo, [applied.todo])
    diff = [
        line
        for line in difflib.unified_diff(todo.splitlines(True), new.splitlines(True), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert diff == [
        "-- **Research**: [notes.md](specs/014_docs/reports/notes.md)\n",
        "+- **Research**: [notes.md](specs/014_docs/reports/notes.md), "
        "[research-003.md](specs/014_docs/reports/research-003.md)\n",
    ]


def test_cli_process_adds_to_a_sub_list(tmp_path: Path) -> None:
    """`postflightd process` as a user runs it, on a project whose TODO.md uses a sub-list."""
    root = project(
        tmp_path / "proj",
        [task_entry(14, "docs", status="researching", artifacts=FORMS["sub-list"][1])],
    )
    todo = BEFORE + HEADING.format(marker="RESEARCHING") + FORMS["sub-list"][0] + "\n" + AFTER
    (root / "specs" / "TODO.md").write_text(todo, encoding="utf-8")
    write_artifact(root, f"{D}/reports/00_teammate.md")
    write_artifact(root, f"{D}/reports/01_team-research.md")
    meta = {
        **doc("researched", []),
        # A plain path string (PF208): read as a report from its folder, and linked.
        "artifacts": [f"{D}/reports/01_team-research.md"],
        "next_steps": "Run /plan",
    }
    meta["metadata"]["session_id"] = "sess_1736700000_abc123"
    path = write_meta(root, "014_docs", meta)
    done = subprocess.run(
        [sys.executable, "-m", "postflightd", "process", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "applied"
    assert [f["code"] for f in report["findings"]] == ["PF208"]
    assert not path.exists()
    new = (root / "specs" / "TODO.md").read_text(encoding="utf-8")
    assert (
        new
        == BEFORE
        + HEADING.format(marker="RESEARCHED")
        + (
            "- **Research**:\n"
            "  - [00_teammate.md](014_docs/reports/00_teammate.md) \u2014 a teammate's findings\n"
            "  - [01_team-research.md](014_docs/reports/01_team-research.md)\n"
        )
        + "\n"
        + AFTER
    )
    state = json.loads((root / "specs" / "state.json").read_text(encoding="utf-8"))
    assert state["active_projects"][0]["status"] == "researched"
    assert [a["path"] for a in state["active_projects"][0]["artifacts"]] == [
        f"{D}/reports/00_teammate.md",
        f"{D}/reports/01_team-research.md",
    ]
