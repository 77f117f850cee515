"""`postflightd hook cursor`: its status, its workspace roots, its input's shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers.hooks import (
    BROKEN,
    MINUTE_AGO,
    OWN,
    TASKS,
    Hook,
    by_name,
    payload,
    reason_of,
    written,
)
from helpers.project import project, write_meta

CURSOR = by_name("cursor", "stop.json")


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


@pytest.mark.parametrize("status", ["aborted", "error"])
def test_cursor_never_sends_back_an_agent_that_was_aborted_or_failed(
    hook: Hook, tmp_path: Path, status: str
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    answer = hook(CURSOR, payload(CURSOR, root, status=status))
    assert (answer.doc, answer.code) == ({}, 0)
    # The person hears of the file the agent stopped with (on stderr: Cursor's channel).
    assert f"specs/{OWN}/.return-meta.json is invalid (PF102" in answer.stderr


def test_cursor_finds_the_project_among_its_workspace_roots(hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    elsewhere = tmp_path / "docs-folder"
    elsewhere.mkdir()
    answer = hook(CURSOR, payload(CURSOR, root, workspace_roots=[str(elsewhere), str(root)]))
    assert f"specs/{OWN}/.return-meta.json" in reason_of(answer.doc)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"workspace_roots": None}, 'no "workspace_roots" list of folders'),
        ({"workspace_roots": []}, 'no "workspace_roots" list of folders'),
        ({"loop_count": "1"}, '"loop_count" must be a whole number from 0 up'),
    ],
)
def test_cursor_input_of_the_wrong_shape_is_exit_1_and_one_stderr_line(
    hook: Hook, tmp_path: Path, changes: dict[str, Any], problem: str
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    answer = hook(CURSOR, payload(CURSOR, root, **changes))
    assert (answer.doc, answer.code) == ({}, 1)
    assert problem in answer.stderr
    assert answer.stderr.count("\n") == 1
