"""Sample documents: a state.json task entry and a valid ``researched`` metadata file."""

from __future__ import annotations

import json
from typing import Any

#: The agent session every sample document and task entry carries unless a test says otherwise.
SESSION = "sess_1736700000_abc123"


def task_entry(number: int, name: str, **extra: Any) -> dict[str, Any]:
    """A state.json entry for task ``number`` (researching, no artifacts), ``extra`` on top."""
    entry: dict[str, Any] = {
        "project_number": number,
        "project_name": name,
        "status": "researching",
        "language": "general",
        "session_id": SESSION,
        "last_updated": "2026-01-08T14:30:00Z",
        "artifacts": [],
    }
    entry.update(extra)
    return entry


def researched_doc(task_dir: str = "259_prove_completeness") -> dict[str, Any]:
    """The format's own example of a successful research run, for task_dir."""
    return {
        "status": "researched",
        "artifacts": [
            {
                "type": "report",
                "path": f"specs/{task_dir}/reports/research-001.md",
                "summary": "Research report with 5 plugin patterns",
            }
        ],
        "next_steps": "Run /plan to create implementation plan",
        "metadata": {
            "session_id": SESSION,
            "agent_type": "neovim-research-agent",
            "duration_seconds": 180,
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "neovim-research-agent"],
            "findings_count": 5,
        },
    }


def partial_doc(task_dir: str = "259_prove_completeness") -> dict[str, Any]:
    """A partial outcome for task_dir: state.json and errors.json change (its one error
    record), TODO.md does not."""
    doc = researched_doc(task_dir)
    doc["status"] = "partial"
    doc["partial_progress"] = {
        "stage": "phase_2",
        "details": "two of four phases",
        "phases_completed": 2,
        "phases_total": 4,
    }
    doc["errors"] = [
        {
            "type": "timeout",
            "message": "ran out of time",
            "recoverable": True,
            "recommendation": "resume",
        }
    ]
    return doc


def final_text(n: int) -> str:
    """A valid ``researched`` file for task n, compact and without a trailing newline."""
    return json.dumps(researched_doc(f"{n}_task{n}"), separators=(",", ":"))


def json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document, the document's own ``()`` first."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += json_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += json_paths(v, (*prefix, i))
    return out
