"""`postflightd hook copilot`: the time window, bounded by the transcript's start."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.hooks import (
    BROKEN,
    OWN,
    TASKS,
    Hook,
    by_name,
    payload,
    written,
)
from helpers.project import project, write_meta

COPILOT = by_name("copilot", "agent_stop.json")


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


def test_a_file_written_before_the_transcript_began_is_not_the_agents(
    hook: Hook, tmp_path: Path
) -> None:
    """Copilot's transcript began 50 minutes ago (its first line's time): a file written an
    hour ago, within the timeout, is still another session's."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), 3600 - 60)
    answer = hook(COPILOT, payload(COPILOT, root))
    assert "decision" not in answer.doc
    assert f"specs/{OWN}/.return-meta.json (PF102" in answer.doc["systemMessage"]
