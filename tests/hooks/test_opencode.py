"""`postflightd hook opencode`: the files its plugin names, its attempts, its input's shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.hooks import (
    BROKEN,
    MINUTE_AGO,
    OTHER,
    OWN,
    TASKS,
    Hook,
    by_name,
    payload,
    reason_of,
    written,
)
from helpers.project import project, write_meta

OPENCODE = by_name("opencode", "idle.json")


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


def older_plugin(doc: dict[str, Any]) -> dict[str, Any]:
    """The input of the plugin of an older postflightd: no ``commands``."""
    doc.pop("commands", None)
    return doc


def test_an_older_plugin_owns_the_files_it_names_and_those_written_seconds_ago(
    hook: Hook, tmp_path: Path
) -> None:
    """Named by the plugin: the session's. Written a minute ago and not named: another's.
    Written a second ago and not named: the session's (a plugin that sends no commands cannot
    see a shell command's writes)."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    own = written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    written(write_meta(root, OTHER, BROKEN), MINUTE_AGO)
    answer = hook(OPENCODE, older_plugin(payload(OPENCODE, root, files=[str(own)])))
    assert f"specs/{OWN}/.return-meta.json" in reason_of(answer.doc)
    assert OTHER not in reason_of(answer.doc)
    assert f"specs/{OTHER}/.return-meta.json (PF102" in answer.doc["systemMessage"]
    written(own, 1.0)
    lagging = hook(OPENCODE, older_plugin(payload(OPENCODE, root, files=[])))
    assert f"specs/{OWN}/.return-meta.json" in reason_of(lagging.doc)


def test_with_its_commands_the_plugins_lists_are_whole_and_no_recent_file_is_guessed(
    hook: Hook, tmp_path: Path
) -> None:
    """A plugin that sends its shell commands sees every write: a file one of them names is
    the session's; a file written a second ago that neither list names is another's."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    own = written(write_meta(root, OWN, BROKEN), 1.0)
    written(write_meta(root, OTHER, BROKEN), 1.0)
    command = f"cat > specs/{OWN}/.return-meta.json <<'EOF'\n...\nEOF"
    answer = hook(OPENCODE, payload(OPENCODE, root, files=[], commands=[command]))
    assert f"specs/{OWN}/.return-meta.json" in reason_of(answer.doc)
    assert OTHER not in reason_of(answer.doc)
    assert f"specs/{OTHER}/.return-meta.json (PF102" in answer.doc["systemMessage"]
    assert own.exists()
    alone = hook(OPENCODE, payload(OPENCODE, root, files=[], commands=[]))
    assert "decision" not in alone.doc


@pytest.mark.parametrize("attempt", [0, 2])
def test_opencode_sends_the_agent_back_until_the_third_attempt(
    hook: Hook, tmp_path: Path, attempt: int
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    answer = hook(OPENCODE, payload(OPENCODE, root, attempt=attempt))
    assert answer.doc["decision"] == "block"


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"files": "specs/259/.return-meta.json"}, '"files" must be a list of paths'),
        ({"files": [3]}, '"files" must be a list of paths'),
        ({"attempt": -1}, '"attempt" must be a whole number from 0 up'),
        ({"attempt": True}, '"attempt" must be a whole number from 0 up'),
        ({"cwd": None}, 'no "cwd" string'),
        ({"commands": "ls"}, '"commands" must be a list of shell commands'),
        ({"commands": [["ls"]]}, '"commands" must be a list of shell commands'),
    ],
)
def test_opencode_input_of_the_wrong_shape_is_exit_0_and_one_stderr_line(
    hook: Hook, tmp_path: Path, changes: dict[str, Any], problem: str
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    answer = hook(OPENCODE, payload(OPENCODE, root, **changes))
    assert (answer.doc, answer.code) == ({}, 0)
    assert problem in answer.stderr
    assert answer.stderr.count("\n") == 1


@pytest.mark.slow
def test_an_answer_nobody_reads_any_more_is_still_exit_0(tmp_path: Path) -> None:
    """The plugin's OpenCode may be gone when the answer comes (`opencode run` used to end
    first): the hook, the real CLI, writes into a pipe whose reader has closed, and exits 0
    with nothing on stderr, the session's invalid file left for the next stop."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    own = write_meta(root, OWN, BROKEN)
    read_end, write_end = os.pipe()
    os.close(read_end)
    stdin = json.dumps({"session_id": "ses_1", "cwd": str(root), "files": [str(own)], "attempt": 0})
    try:
        out = subprocess.run(
            [str(Path(sys.executable).with_name("postflightd")), "hook", "opencode"],
            input=stdin.encode(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (out.returncode, out.stderr.decode()) == (0, "")
    assert own.read_text(encoding="utf-8") == BROKEN
