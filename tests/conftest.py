"""Shared fixtures: isolated config/state directories and small project builders."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from postflightd.loader import STATE_CACHE

SESSION = "sess_1736700000_abc123"


@pytest.fixture(autouse=True)
def _isolated_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Tests never touch the real home: config, state, cache and logs live in a temp dir."""
    home = tmp_path_factory.mktemp("home")
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("POSTFLIGHTD_CONFIG", raising=False)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    yield


@pytest.fixture(autouse=True)
def _fresh_state_cache() -> Iterator[None]:
    """Each test starts with no parsed state.json held over from another test's tmp_path."""
    STATE_CACHE.clear()
    yield
    STATE_CACHE.clear()


def task_entry(number: int, name: str, **extra: Any) -> dict[str, Any]:
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


def make_project(root: Path, tasks: list[dict[str, Any]] | None = None) -> Path:
    """A project root with specs/state.json listing ``tasks`` (None: no state.json)."""
    specs = root / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    if tasks is not None:
        state = {"next_project_number": 1000, "active_projects": tasks}
        (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    return root


def write_meta(root: Path, task_dir: str, doc: Any) -> Path:
    """Write ``specs/<task_dir>/.return-meta.json`` (a str is written verbatim)."""
    directory = root / "specs" / task_dir
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ".return-meta.json"
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=2)
    path.write_text(text, encoding="utf-8")
    return path


def write_artifact(root: Path, rel: str, text: str = "content\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def researched_doc(task_dir: str = "259_prove_completeness") -> dict[str, Any]:
    """Seed 004's 'Research Success' example, for task_dir."""
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


def wait_until(what: str, cond: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll ``cond`` until it returns something truthy, and return that; fail naming ``what``
    at the deadline. Deadlines are generous: the machines running the suite are shared."""
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
    return value
