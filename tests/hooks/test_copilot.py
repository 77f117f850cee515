"""`postflightd hook copilot` (and `hook claude` as Copilot CLI runs it): the session's
events.jsonl decides whose files are the agent's, and a stop run through both hook files is
post-flighted once. The inputs and events.jsonl are Copilot CLI 1.0.102's own, captured by
tests/runtimes/test_copilot.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers.hooks import (
    BROKEN,
    OTHER,
    OWN,
    TASKS,
    Answer,
    Hook,
    Runtime,
    by_name,
    copilot_transcript,
    payload,
    reason_of,
    written,
)
from helpers.project import project, write_meta

COPILOT = by_name("copilot", "agent_stop.json")
SUBAGENT = by_name("copilot", "subagent_stop.json")
#: `hook claude` as Copilot CLI runs it from .claude/settings.json.
VIA_CLAUDE = Runtime(
    "copilot",
    "stop_snake_case.json",
    copilot_transcript,
    {"stop_hook_active": True},
    lambda reason: {"decision": "block", "reason": reason},
    person="both",
    command="claude",
)
SECONDS_AGO = 2.0


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])


def test_a_file_written_seconds_ago_that_events_jsonl_does_not_name_is_not_the_agents(
    hook: Hook, root: Path
) -> None:
    """The agent created task 259's file (its events.jsonl says so); task 260's, written two
    seconds before the stop by another process, is not its own, however recent."""
    written(write_meta(root, OTHER, BROKEN), SECONDS_AGO)
    answer = hook(COPILOT, payload(COPILOT, root))
    assert "decision" not in answer.doc
    assert f"specs/{OTHER}/.return-meta.json (PF102" in answer.doc["systemMessage"]


def test_a_file_events_jsonl_names_is_the_agents_however_old(hook: Hook, root: Path) -> None:
    """Written 59 minutes ago, within the timeout: the record, not the time, decides."""
    own = written(write_meta(root, OWN, BROKEN), 3600 - 60)
    answer = hook(COPILOT, payload(COPILOT, root))
    assert f"specs/{OWN}/.return-meta.json:\n  - PF102" in reason_of(answer.doc)
    assert own.exists()


def test_a_subagents_stop_counts_only_the_subagents_calls(hook: Hook, root: Path) -> None:
    """The session's own agent created task 259's file (copilot_create.jsonl): a subagent
    that stops in that session is not sent back over it."""
    written(write_meta(root, OWN, BROKEN), SECONDS_AGO)
    doc = payload(SUBAGENT, root)
    doc["transcriptPath"] = str(copilot_transcript(root))
    answer = hook(SUBAGENT, doc)
    assert "decision" not in answer.doc
    assert f"specs/{OWN}/.return-meta.json (PF102" in answer.doc["systemMessage"]


def test_hook_claude_reads_copilots_events_jsonl(hook: Hook, root: Path) -> None:
    """Copilot CLI runs .claude/settings.json's Stop hook with its own snake_case input and
    its events.jsonl as transcript_path: the agent's own file blocks it there too, in
    Copilot's protocol."""
    written(write_meta(root, OWN, BROKEN), SECONDS_AGO)
    answer = hook(VIA_CLAUDE, payload(VIA_CLAUDE, root))
    assert answer.doc == VIA_CLAUDE.block(reason_of(answer.doc))
    assert f"specs/{OWN}/.return-meta.json:\n  - PF102" in reason_of(answer.doc)


def snake_of(camel: dict[str, object]) -> dict[str, object]:
    """The same stop as Copilot CLI gives it to .claude/settings.json's Stop hook."""
    when = camel["timestamp"]
    assert isinstance(when, int)
    stamp = datetime.fromtimestamp(when / 1000, UTC).isoformat(timespec="milliseconds")
    return {
        "hook_event_name": "Stop",
        "session_id": camel["sessionId"],
        "timestamp": stamp.replace("+00:00", "Z"),
        "cwd": camel["cwd"],
        "transcript_path": camel["transcriptPath"],
        "stop_reason": camel["stopReason"],
        "stop_hook_active": camel["stop_hook_active"],
    }


def test_the_second_run_of_one_stop_answers_nothing_and_does_nothing(
    hook: Hook, root: Path
) -> None:
    """Copilot CLI runs .github/hooks' `hook copilot`, then .claude/settings.json's `hook
    claude`, for the same stop: the first sends the agent back, the second says nothing and
    leaves the files alone (a valid file left for it would otherwise be its to apply)."""
    own = written(write_meta(root, OWN, BROKEN), SECONDS_AGO)
    camel = payload(COPILOT, root)
    first = hook(COPILOT, camel)
    assert "decision" in first.doc
    other = written(write_meta(root, OTHER, BROKEN), SECONDS_AGO)
    assert hook(VIA_CLAUDE, snake_of(camel)) == Answer({}, "", 0)
    assert own.exists() and other.exists()


def test_the_next_stop_of_the_session_is_post_flighted_again(hook: Hook, root: Path) -> None:
    written(write_meta(root, OWN, BROKEN), SECONDS_AGO)
    camel = payload(COPILOT, root)
    assert "decision" in hook(COPILOT, camel).doc
    later = {**camel, "timestamp": camel["timestamp"] + 2500}
    assert "decision" in hook(COPILOT, later).doc
    last = {**camel, "timestamp": camel["timestamp"] + 5000}
    assert "decision" in hook(VIA_CLAUDE, snake_of(last)).doc


def test_a_stop_without_its_time_is_post_flighted_at_every_run(hook: Hook, root: Path) -> None:
    written(write_meta(root, OWN, BROKEN), SECONDS_AGO)
    camel = payload(COPILOT, root)
    del camel["timestamp"]
    assert "decision" in hook(COPILOT, camel).doc
    assert "decision" in hook(COPILOT, camel).doc


@pytest.mark.parametrize(
    "entry",
    [
        None,
        "assistant.message",
        {"type": "assistant.message"},
        {"type": "assistant.message", "data": 3},
        {"type": "assistant.message", "data": {"toolRequests": "x"}},
        {"type": "assistant.message", "data": {"toolRequests": [None, {"name": "create"}]}},
        {"type": "tool.execution_start", "data": {"toolName": "edit", "arguments": [1]}},
        {"type": "tool.execution_start", "data": {"toolName": "bash", "arguments": {"command": 4}}},
        {"type": "tool.execution_complete", "data": {"fileEdits": [None, {"path": 3}]}},
        {"type": "tool.execution_complete", "data": {"fileEdits": "x"}},
    ],
)
def test_an_events_line_of_another_shape_names_nothing(entry: object) -> None:
    from postflightd.hooks.copilot import events_written

    assert events_written(entry) == set()
    assert events_written(entry, subagents_only=True) == set()
