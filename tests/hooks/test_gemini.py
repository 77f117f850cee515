"""`postflightd hook gemini`: the project from $GEMINI_PROJECT_DIR, and whose files from the
chat records Gemini CLI wrote (tests/hooks/fixtures/gemini/, captured by
tests/runtimes/test_gemini.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers.hooks import (
    BROKEN,
    FIXTURES,
    MINUTE_AGO,
    OTHER,
    OWN,
    TASKS,
    Hook,
    by_name,
    gemini_transcript,
    payload,
    person_told,
    reason_of,
    written,
)
from helpers.project import project, write_meta
from postflightd.hooks.transcript import began_of

GEMINI = by_name("gemini", "after_agent.json")
#: Each capture, and how its agent wrote OWN's file.
CAPTURES = ["write_file.jsonl", "replace.jsonl", "run_shell_command.jsonl"]


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


@pytest.mark.parametrize("capture", CAPTURES)
def test_the_chat_record_names_the_agents_own_file(
    hook: Hook, tmp_path: Path, capture: str
) -> None:
    """Its write_file, replace or run_shell_command call names OWN's file: an invalid one
    there sends the agent back."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    transcript = gemini_transcript(root, capture)
    answer = hook(GEMINI, payload(GEMINI, root, transcript_path=str(transcript)))
    assert f"specs/{OWN}/.return-meta.json:\n  - PF102" in reason_of(answer.doc)


@pytest.mark.parametrize("capture", CAPTURES)
def test_another_sessions_file_written_a_minute_before_this_one_began_never_sends_it_back(
    hook: Hook, tmp_path: Path, capture: str
) -> None:
    """Another session's invalid file, last written a minute before this session's record
    began and well within the operation's hour: the record names only the agent's own file,
    and a readable record alone decides, so the other file is the person's to hear of."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    transcript = gemini_transcript(root, capture)
    lines = transcript.read_text(encoding="utf-8").splitlines(keepends=True)
    head = json.loads(lines[0])
    head["startTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 30))
    transcript.write_text(json.dumps(head) + "\n" + "".join(lines[1:]), encoding="utf-8")
    theirs = written(write_meta(root, OTHER, BROKEN), 90.0)
    answer = hook(GEMINI, payload(GEMINI, root, transcript_path=str(transcript)))
    assert answer.code == 0
    assert "decision" not in answer.doc
    assert f"specs/{OTHER}/.return-meta.json (PF102" in person_told(GEMINI, answer)
    assert theirs.exists()


def test_a_record_that_names_no_metadata_file_owns_none(hook: Hook, tmp_path: Path) -> None:
    """Only the first line (the session's metadata) and text: the record is readable and
    shows no write, so a file written a minute ago is not this agent's."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    transcript = root / "session.jsonl"
    first = (FIXTURES / "gemini" / "write_file.jsonl").read_text("utf-8").splitlines()[0]
    transcript.write_text(first + "\n", encoding="utf-8")
    answer = hook(GEMINI, payload(GEMINI, root, transcript_path=str(transcript)))
    assert "decision" not in answer.doc
    assert "not written by this agent" in person_told(GEMINI, answer)


def test_the_record_began_at_its_first_lines_start_time(tmp_path: Path) -> None:
    """Gemini CLI's first line has no ``timestamp``: its ``startTime`` is when it began."""
    first = json.loads((FIXTURES / "gemini" / "write_file.jsonl").read_text("utf-8").split("\n")[0])
    path = gemini_transcript(tmp_path)
    began = began_of(path)
    assert began is not None
    assert time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(began)) == first["startTime"][:19]


@pytest.mark.parametrize(
    "entry",
    [
        None,
        3,
        "write_file",
        [],
        {"$set": "x"},
        {"$set": {"messages": 3}},
        {"$set": {"messages": [None, {"toolCalls": "x"}]}},
        {"type": "gemini", "toolCalls": 7},
        {"type": "gemini", "toolCalls": [None, {"name": "write_file", "args": "x"}]},
        {"type": "gemini", "toolCalls": [{"name": "write_file", "args": {"file_path": 5}}]},
        {"type": "gemini", "toolCalls": [{"name": "run_shell_command", "args": {}}]},
    ],
)
def test_a_chat_record_line_of_another_shape_names_nothing(entry: object) -> None:
    from postflightd.hooks.chat import chat_written

    assert chat_written(entry) == set()
