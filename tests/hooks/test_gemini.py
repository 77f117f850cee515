"""`postflightd hook gemini`: the project from $GEMINI_PROJECT_DIR."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.hooks import (
    BROKEN,
    MINUTE_AGO,
    OWN,
    TASKS,
    Hook,
    by_name,
    payload,
    written,
)
from helpers.project import project, write_meta

GEMINI = by_name("gemini", "after_agent.json")


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


def test_gemini_finds_the_project_from_gemini_project_dir(
    hook: Hook, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent ran `cd /elsewhere`: the project comes from $GEMINI_PROJECT_DIR."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("GEMINI_PROJECT_DIR", str(root))
    answer = hook(GEMINI, payload(GEMINI, root, cwd=str(elsewhere)))
    assert answer.doc["decision"] == "deny"
