"""`postflightd hook <runtime>` for every runtime: its documented input, its exact answer.

Each runtime's fixtures (tests/hooks/fixtures/<runtime>/) are its stop hook's input as its
documentation or source gives it; each case runs the real CLI (``main``, with the input on
descriptor 0, or in a subprocess where it says so) and checks the whole answer: stdout,
stderr and the exit code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.hooks import (
    BROKEN,
    IDS,
    MINUTE_AGO,
    OTHER,
    OWN,
    REPAIR_HEAD,
    REPAIR_TAIL,
    RUNTIMES,
    STALE,
    TASKS,
    Answer,
    Hook,
    Runtime,
    by_name,
    hook_process,
    payload,
    person_told,
    reason_of,
    written,
)
from helpers.project import project, write_meta


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


@pytest.fixture(params=RUNTIMES, ids=IDS)
def runtime(request: pytest.FixtureRequest) -> Runtime:
    rt = request.param
    assert isinstance(rt, Runtime)
    return rt


def test_nothing_to_do_lets_the_agent_stop(runtime: Runtime, hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    answer = hook(runtime, payload(runtime, root))
    assert answer == Answer({}, "", 0)


def test_a_valid_file_is_applied_and_the_agent_stops(
    runtime: Runtime, hook: Hook, tmp_path: Path
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    meta = written(write_meta(root, OWN, researched_doc()), MINUTE_AGO)
    answer = hook(runtime, payload(runtime, root))
    assert answer == Answer({}, "", 0)
    assert not meta.exists()
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    assert state["active_projects"][0]["status"] == "researched"


def test_the_agents_own_invalid_file_sends_it_back(
    runtime: Runtime, hook: Hook, tmp_path: Path
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    meta = written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    answer = hook(runtime, payload(runtime, root))
    assert answer.code == 0
    assert answer.stderr == ""
    reason = reason_of(answer.doc)
    assert answer.doc == runtime.block(reason)
    assert reason.startswith(REPAIR_HEAD + f"specs/{OWN}/.return-meta.json:\n  - PF102")
    assert reason.endswith(REPAIR_TAIL)
    assert meta.exists()


def test_another_agents_invalid_file_is_told_to_the_person_once(
    runtime: Runtime, hook: Hook, tmp_path: Path
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OTHER, BROKEN), STALE)
    first = hook(runtime, payload(runtime, root))
    assert first.code == 0
    assert "decision" not in first.doc and "followup_message" not in first.doc
    message = person_told(runtime, first)
    assert message.startswith(
        "postflightd: 1 invalid metadata file not written by this agent, so not blocked on"
    )
    assert f"specs/{OTHER}/.return-meta.json (PF102" in message
    assert hook(runtime, payload(runtime, root)) == Answer({}, "", 0)  # said once


def test_the_loop_guard_is_obeyed_and_the_person_told(
    runtime: Runtime, hook: Hook, tmp_path: Path
) -> None:
    """The runtime's guard lets the agent stop with its file invalid: never a block, and the
    person is told which file and why, in the runtime's channel for the person."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    meta = written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    answer = hook(runtime, payload(runtime, root, **runtime.guard))
    assert answer.code == 0
    assert "decision" not in answer.doc and "followup_message" not in answer.doc
    assert person_told(runtime, answer).startswith(
        f"postflightd: specs/{OWN}/.return-meta.json is invalid (PF102: "
    )
    assert meta.exists()


def test_the_bound_holds_whatever_the_runtimes_flag_says(
    runtime: Runtime, hook: Hook, tmp_path: Path
) -> None:
    """The agent rewrites its file, still invalid, at every try, and the runtime's flag never
    says it is a retry (as Gemini CLI after a tool call): sent back 3 times, then let stop,
    and the person told which file is still invalid and why."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    answers = []
    for attempt in range(5):
        written(write_meta(root, OWN, BROKEN + " " * attempt), MINUTE_AGO)
        stdin = payload(runtime, root)
        if "timestamp" in stdin:  # each try its own stop (Copilot CLI names a stop by its time)
            stdin["timestamp"] = 1_796_000_000_000 + attempt
        answers.append(hook(runtime, stdin))
    for answer in answers[:3]:
        assert answer.doc == runtime.block(reason_of(answer.doc))
    for answer in answers[3:]:
        assert answer.code == 0
        assert "decision" not in answer.doc and "followup_message" not in answer.doc
        told = person_told(runtime, answer)
        assert told.startswith(
            f"postflightd: specs/{OWN}/.return-meta.json is still invalid after the agent was "
            "sent back 3 times to repair it (PF102: "
        )
        assert told.endswith(f"run `postflightd process specs/{OWN}/.return-meta.json`")


def test_a_bad_configuration_is_told_to_the_person_never_blocks(
    runtime: Runtime, hook: Hook, tmp_path: Path
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    meta = written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    (root / ".postflightd.toml").write_text("specs_dir = [unclosed\n", encoding="utf-8")
    answer = hook(runtime, payload(runtime, root))
    assert answer.code == 0
    assert set(answer.doc) <= {"systemMessage"}
    message = person_told(runtime, answer)
    assert message.startswith("postflightd: ")
    assert ".postflightd.toml" in message
    assert meta.exists()


#: JSON whose integer has more digits than Python converts (4,300): json.loads raises a
#: ValueError that is neither a JSONDecodeError nor a UnicodeDecodeError.
TOO_LONG_NUMBER = b'{"cwd": "/", "x": ' + b"9" * 4301 + b"}"


@pytest.mark.parametrize(
    "stdin", [b"", b"{truncated", b"[1, 2]", b"\xff\xfe", TOO_LONG_NUMBER, b"[" * 100_000]
)
def test_malformed_stdin_is_a_non_blocking_error(
    runtime: Runtime, hook: Hook, stdin: bytes
) -> None:
    answer = hook(runtime, stdin)
    assert answer.code == runtime.malformed_exit
    assert answer.doc == {}
    assert answer.stderr.startswith("postflightd: ")
    assert answer.stderr.count("\n") == 1
    assert "Traceback" not in answer.stderr


def test_the_real_cli_sends_the_agent_back_in_the_runtimes_protocol(
    runtime: Runtime, tmp_path: Path
) -> None:
    """The command as the runtime starts it: a subprocess, the input on its stdin."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    answer = hook_process(runtime, payload(runtime, root))
    reason = reason_of(answer.doc)
    assert answer == Answer(runtime.block(reason), "", 0)
    assert reason.startswith(REPAIR_HEAD)
    malformed = hook_process(runtime, b"{truncated")
    assert malformed.doc == {}
    assert malformed.code == runtime.malformed_exit


def test_a_number_too_long_to_read_is_malformed_input_for_the_real_cli(runtime: Runtime) -> None:
    """As the runtime starts it: OpenCode's plugin is answered with exit 0, the others with
    their unreadable-input exit, one line on stderr and no crash log."""
    answer = hook_process(runtime, TOO_LONG_NUMBER)
    assert answer.code == runtime.malformed_exit
    assert answer.doc == {}
    assert answer.stderr == (
        "postflightd: hook input on stdin holds a number too long to read (over 4,300 "
        "digits); expected the hook's JSON object\n"
    )


def test_a_stop_hook_active_that_is_not_a_boolean_is_malformed(hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    for runtime in (
        by_name("gemini", "after_agent.json"),
        by_name("codex", "stop.json"),
        by_name("copilot", "agent_stop.json"),
    ):
        guard = next(iter(runtime.guard))
        answer = hook(runtime, payload(runtime, root, **{guard: "yes"}))
        assert (answer.doc, answer.code) == ({}, 1)
        assert f'"{guard}" must be true or false' in answer.stderr
