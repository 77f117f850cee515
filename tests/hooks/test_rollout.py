"""Whose file it is under Codex: its rollout's tool calls, in Codex's own line format."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

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
    payload,
    written,
)
from helpers.project import project, write_meta
from postflightd.hooks.rollout import patch_targets, rollout_written
from postflightd.hooks.transcript import read_transcripts

CODEX_FIXTURES = FIXTURES / "codex"


def item(payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-11-20T10:00:00.000Z", "type": "response_item", "payload": payload}


def test_an_apply_patch_writes_the_files_its_headers_name_not_those_its_body_quotes() -> None:
    patch = (
        "*** Begin Patch\n"
        "*** Add File: specs/259_a/.return-meta.json\n"
        "+see specs/999_quoted/.return-meta.json\n"
        "*** Update File: /home/dev/proj/specs/260_b/.return-meta.json\n"
        "@@\n-old\n+new\n"
        "*** Update File: specs/261_c/notes.md\n"
        "*** Move to: specs/262_d/.return-meta.json\n"
        "*** Delete File: specs/263_e/.return-meta.json\n"
        "*** End Patch\n"
    )
    assert patch_targets(patch) == {"259_a", "260_b", "262_d"}


@pytest.mark.parametrize(
    ("payload", "dirs"),
    [
        (
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** Add File: specs/259_a/.return-meta.json\n+{}\n"
                "*** End Patch",
                "call_id": "call_1",
            },
            {"259_a"},
        ),
        (
            {
                "type": "function_call",
                "name": "apply_patch",
                "arguments": json.dumps(
                    {"input": "*** Begin Patch\n*** Update File: specs/259_a/.return-meta.json"}
                ),
                "call_id": "call_2",
            },
            {"259_a"},
        ),
        (
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps(
                    {"command": ["bash", "-lc", "cat > specs/259_a/.return-meta.json <<'EOF'"]}
                ),
                "call_id": "call_3",
            },
            {"259_a"},
        ),
        (
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "jq . x > specs/259_a/.return-meta.json"}),
                "call_id": "call_4",
            },
            {"259_a"},
        ),
        (
            {
                "type": "local_shell_call",
                "call_id": "call_5",
                "status": "completed",
                "action": {
                    "type": "exec",
                    "command": ["sh", "-c", "cp y specs/259_a/.return-meta.json"],
                },
            },
            {"259_a"},
        ),
        ({"type": "function_call", "name": "shell", "arguments": "{not json"}, set()),
        ({"type": "function_call", "name": "shell", "arguments": {"cmd": "x"}}, set()),
        (
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": "A specs/259_a/.return-meta.json",
            },
            set(),
        ),
        (
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "fix specs/259_a/.return-meta.json"}],
            },
            set(),
        ),
    ],
    ids=[
        "custom-apply-patch",
        "function-apply-patch",
        "shell-list",
        "exec-command",
        "local-shell",
        "arguments-not-json",
        "arguments-not-text",
        "tool-output",
        "user-message",
    ],
)
def test_a_rollout_line_names_what_its_tool_call_writes(
    payload: dict[str, Any], dirs: set[str]
) -> None:
    assert rollout_written(item(payload)) == dirs


def test_other_line_types_and_shapes_write_nothing() -> None:
    assert rollout_written({"type": "event_msg", "payload": {"type": "agent_message"}}) == set()
    assert rollout_written({"type": "response_item", "payload": "x"}) == set()
    assert rollout_written(["response_item"]) == set()


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "function_call", "name": "shell", "arguments": '{"command": ["bash", "-lc"'},
        {"type": "function_call", "name": "shell", "arguments": "[1, 2]"},
        {"type": "function_call", "name": "shell", "arguments": {"command": "cat > x"}},
        {"type": "function_call", "name": "shell", "arguments": '{"command": 42}'},
        {"type": "function_call", "name": "apply_patch", "arguments": '{"input": ["x"]}'},
        {"type": "function_call", "name": "shell", "arguments": "[" * 100_000},
        {"type": "custom_tool_call", "name": "apply_patch", "input": None},
        {"type": "local_shell_call", "action": "cat > specs/259_x/.return-meta.json"},
    ],
)
def test_a_malformed_tool_call_writes_nothing(payload: dict[str, Any]) -> None:
    """Truncated or mistyped arguments, nesting too deep to parse: read as no write."""
    assert rollout_written(item(payload)) == set()


def test_a_rollout_truncated_mid_line_keeps_what_its_whole_lines_say(tmp_path: Path) -> None:
    """A rollout still being written ends in half a line: the whole lines before it count."""
    whole = (CODEX_FIXTURES / "rollout_shell.jsonl").read_bytes()
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_bytes(whole + b'{"timestamp": "2026-11-20T10:09:00.000Z", "type": "resp')
    found = read_transcripts([rollout], written=rollout_written)
    assert found is not None and found.task_dirs == {OWN}


def test_a_rollout_read_from_its_file_says_its_writes_and_when_it_began() -> None:
    """Codex's own rollouts (captured from Codex CLI 0.171.0): an Add File patch, a shell
    command after a patch, an Update File patch after a read; one that only read."""
    patched = CODEX_FIXTURES / "rollout_apply_patch.jsonl"
    found = read_transcripts([patched], written=rollout_written)
    assert found is not None
    assert found.task_dirs == {OWN}
    # The first line's time: the session_meta's.
    first = json.loads(patched.read_text(encoding="utf-8").splitlines()[0])
    assert first["type"] == "session_meta"
    stamp = datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00"))
    assert found.began == stamp.timestamp()
    for name in ("rollout_shell.jsonl", "rollout_update.jsonl", "rollout_subagent.jsonl"):
        other = read_transcripts([CODEX_FIXTURES / name], written=rollout_written)
        assert other is not None and other.task_dirs == {OWN}, name
    nothing = read_transcripts([CODEX_FIXTURES / "rollout_nothing.jsonl"], written=rollout_written)
    assert nothing is not None and nothing.task_dirs == frozenset()


CODEX = by_name("codex", "stop.json")


def codex_stop(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, root: Path, rollout: Path
) -> dict[str, Any]:
    """`hook codex` on Codex's Stop input naming ``rollout``."""
    stdin = payload(CODEX, root, transcript_path=str(rollout))
    answer = Hook(capsys, tmp_path)(CODEX, stdin)
    assert answer.code == 0
    return answer.doc


def test_codex_blocks_over_the_file_its_rollout_wrote_not_its_neighbours(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two invalid files written a minute ago: the one the rollout's patch wrote sends the
    agent back; the other, which the rollout never names, is told to the person."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    written(write_meta(root, OTHER, BROKEN), MINUTE_AGO)
    rollout = root / "rollout-2026-11-20T10-00-00.jsonl"
    rollout.write_bytes((CODEX_FIXTURES / "rollout_apply_patch.jsonl").read_bytes())
    answer = codex_stop(capsys, tmp_path, root, rollout)
    assert answer["decision"] == "block"
    assert f"specs/{OWN}/.return-meta.json" in answer["reason"]
    assert OTHER not in answer["reason"]
    assert f"specs/{OTHER}/.return-meta.json (PF102" in answer["systemMessage"]


def test_codex_with_a_rollout_that_wrote_nothing_blocks_no_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    rollout = root / "rollout-2026-11-20T10-00-00.jsonl"
    rollout.write_bytes((CODEX_FIXTURES / "rollout_nothing.jsonl").read_bytes())
    answer = codex_stop(capsys, tmp_path, root, rollout)
    assert set(answer) == {"systemMessage"}
    assert f"specs/{OWN}/.return-meta.json (PF102" in answer["systemMessage"]


def test_codex_with_an_unreadable_rollout_falls_back_to_the_time_window(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A directory at the rollout's path: the file written a minute ago is the agent's."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    rollout = root / "rollout-2026-11-20T10-00-00.jsonl"
    rollout.mkdir()
    answer = codex_stop(capsys, tmp_path, root, rollout)
    assert answer["decision"] == "block"
    assert f"specs/{OWN}/.return-meta.json" in answer["reason"]
