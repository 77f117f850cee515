"""`postflightd hook claude` inside the real Claude Code (the release pinned in
tests/runtimes/pinned.txt), its model a scripted server on 127.0.0.1.

Each test sets a project up with `postflightd init --runtime claude` as a user would, runs
`claude -p` in it against the script (the agent's tool calls, then its final text), and reads
what happened: state.json, the metadata files, every request that reached the model (the hook's
reason must be in the next one), and every call of the hook (its stdin, its answer), recorded by
a `postflightd` first on Claude Code's PATH that runs the real CLI.

With PF_RECORD_FIXTURES=1 (never under CI) the runs also write the hook inputs and transcripts
they produced over the Claude fixtures: tests/hooks/fixtures/README.md.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.model_server import ModelServer, ToolCall, Turn, model_server, say, write
from helpers.project import META, task_status, write_meta
from helpers.runtime_project import (
    BROKEN,
    IN_PROGRESS,
    OTHER,
    OWN,
    REPO,
    SHELL_WRITES_VALID,
    VALID,
    another_process_writing_a_broken_file,
    broken_file_of_another_run,
    initialised_project,
    run_agent,
    sandbox,
    script_played,
)
from helpers.runtimes import HookCall, capture, pinned, placeheld, recording

pytestmark = pytest.mark.slow

#: The tools `claude -p` may use without asking (it runs as root here, where it refuses
#: --dangerously-skip-permissions); `Agent` is its subagent tool.
TOOLS = "Write,Edit,Bash,Read,Agent"
HOOK_FIXTURES = REPO / "tests" / "hooks" / "fixtures" / "claude"
TRANSCRIPT_FIXTURES = REPO / "tests" / "fixtures" / "transcripts"


@dataclass(frozen=True)
class Run:
    root: Path
    home: Path
    server: ModelServer
    calls: list[HookCall]
    stdout: str


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Tasks 259 (ready for a research report) and 260, set up by `postflightd init`."""
    return initialised_project(tmp_path, "claude", ".claude/settings.json")


def run_claude(claude: Path, root: Path, script: list[Turn], prompt: str) -> Run:
    """`claude -p prompt` in ``root`` against the scripted model, to its end."""
    box = sandbox(root, "claude")
    with model_server(script) as server:
        env = box.env(
            ANTHROPIC_BASE_URL=server.url,
            ANTHROPIC_API_KEY="dummy",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        argv = [str(claude), "-p", prompt, "--allowedTools", TOOLS]
        out = run_agent([*argv, "--permission-mode", "acceptEdits"], root, env, timeout=90)
    assert out.returncode == 0, (out.stdout, out.stderr)
    script_played(server, box.calls())
    return Run(root, box.home, server, box.calls(), out.stdout.decode("utf-8", "replace"))


def meta(root: Path, task_dir: str) -> Path:
    return root / "specs" / task_dir / META


def edit(path: Path, old: str, new: str) -> Turn:
    return Turn(
        calls=[ToolCall("Edit", {"file_path": str(path), "old_string": old, "new_string": new})]
    )


def read(path: Path) -> Turn:
    return Turn(calls=[ToolCall("Read", {"file_path": str(path)})])


def bash(command: str) -> Turn:
    return Turn(calls=[ToolCall("Bash", {"command": command, "description": "Write metadata"})])


def only(calls: list[HookCall], event: str) -> list[HookCall]:
    found = [c for c in calls if c.event == event]
    for call in found:
        assert call.code == 0, call
    return found


def feedback(request_text: str, reason: str) -> bool:
    """Whether the model was shown ``reason`` as the stop hook's feedback."""
    return f"Stop hook feedback:\n{reason}" in request_text


def test_a_valid_file_of_its_own_is_applied_and_the_agent_stops(
    claude_code: Path, root: Path
) -> None:
    own = meta(root, OWN)
    run = run_claude(
        claude_code, root, [write(str(own), VALID), say("Done.")], "Research task 259."
    )
    (stop,) = only(run.calls, "Stop")
    assert stop.answer == {}, stop
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert len(run.server.agent_requests()) == 2
    # Offline: nothing but the Messages API was asked (docs/hooks/claude.md).
    assert {r.path.split("?")[0] for r in run.server.requests} == {"/v1/messages"}
    record(run, stop, "stop.json", "write.jsonl")


def test_an_invalid_file_of_its_own_blocks_the_agent_until_it_is_fixed(
    claude_code: Path, root: Path
) -> None:
    own = meta(root, OWN)
    script = [write(str(own), BROKEN), say("Done."), write(str(own), VALID), say("Fixed.")]
    run = run_claude(claude_code, root, script, "Research task 259.")
    first, second = only(run.calls, "Stop")
    reason = first.answer["reason"]
    assert first.answer == {"decision": "block", "reason": reason}
    assert f"specs/{OWN}/.return-meta.json" in reason and "PF102" in reason
    requests = run.server.agent_requests()
    assert len(requests) == 4
    assert feedback(requests[2].last_user_text(), reason)
    assert second.answer == {}
    assert second.stdin["stop_hook_active"] is True
    assert task_status(root, 259) == "researched"
    assert not own.exists()


def test_an_old_invalid_file_of_another_session_never_blocks_the_agent(
    claude_code: Path, root: Path
) -> None:
    """Written an hour before this run, in its own task directory: said to the person, never
    put on this agent, whose own file (written by a shell command) is applied."""
    theirs = broken_file_of_another_run(root)
    own = meta(root, OWN)
    command = SHELL_WRITES_VALID
    run = run_claude(claude_code, root, [bash(command), say("Done.")], "Research task 259.")
    (stop,) = only(run.calls, "Stop")
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert len(run.server.agent_requests()) == 2
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, None, "bash_cat.jsonl")


def test_an_invalid_file_another_process_wrote_just_before_the_stop_never_blocks_the_agent(
    claude_code: Path, root: Path
) -> None:
    """While the agent works on its own file (read, then edited from in_progress to its
    outcome), another process writes a broken file in another task directory about a second
    before the agent stops: the transcript names only the agent's own file, so the other one
    is said to the person, not put on the agent, however recent."""
    own = write_meta(root, OWN, IN_PROGRESS)
    theirs = meta(root, OTHER)

    other_process = another_process_writing_a_broken_file(root)

    script = [read(own), edit(own, IN_PROGRESS, VALID), say("Done.", before=other_process)]
    run = run_claude(claude_code, root, script, "Research task 259.")
    (stop,) = only(run.calls, "Stop")
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert len(run.server.agent_requests()) == 3
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, None, "edit.jsonl")


def test_an_agent_that_keeps_its_file_invalid_is_let_stop_and_the_person_told(
    claude_code: Path, root: Path
) -> None:
    """The agent rewrites its file, still invalid, when sent back: Claude Code's
    stop_hook_active lets it stop at the second stop, and the answer tells the person which
    file is still invalid and why (before, `{}`: nobody heard of it)."""
    own = meta(root, OWN)
    script = [
        write(str(own), BROKEN),
        say("Done."),
        write(str(own), BROKEN + " "),
        say("Done again."),
    ]
    run = run_claude(claude_code, root, script, "Research task 259.")
    first, second = only(run.calls, "Stop")
    assert first.answer["decision"] == "block"
    assert second.stdin["stop_hook_active"] is True
    assert set(second.answer) == {"systemMessage"}
    told = second.answer["systemMessage"]
    assert told.startswith(
        f"postflightd: specs/{OWN}/.return-meta.json is still invalid after the agent was sent "
        "back once to repair it (PF102: "
    )
    assert len(run.server.agent_requests()) == 4
    assert own.exists()


def test_a_subagents_invalid_file_blocks_the_subagent_until_it_is_fixed(
    claude_code: Path, root: Path
) -> None:
    """The session delegates to a subagent (the `Agent` tool); the subagent's broken file
    blocks the subagent at its SubagentStop, the reason reaches its next request, its fix is
    applied, and the session then stops."""
    own = meta(root, OWN)
    delegate = ToolCall(
        "Agent",
        {
            "description": "Research task 259",
            "prompt": "Research task 259 and write its metadata.",
            "subagent_type": "general-purpose",
            "run_in_background": False,
        },
    )
    script = [
        Turn(calls=[delegate]),
        write(str(own), BROKEN),
        say("Subagent done."),
        write(str(own), VALID),
        say("Subagent fixed it."),
        say("Done."),
    ]
    run = run_claude(claude_code, root, script, "Research task 259 with a subagent.")
    first, second = only(run.calls, "SubagentStop")
    reason = first.answer["reason"]
    assert first.answer == {"decision": "block", "reason": reason}
    assert f"specs/{OWN}/.return-meta.json" in reason and "PF102" in reason
    requests = run.server.agent_requests()
    assert len(requests) == 6
    assert feedback(requests[3].last_user_text(), reason)
    assert second.answer == {}
    (stop,) = only(run.calls, "Stop")
    assert stop.answer == {}
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    record(run, first, "subagent_stop.json", "subagent_write.jsonl")
    if recording():
        # The session's own transcript: it delegated, and wrote nothing itself.
        session = Path(stop.stdin["transcript_path"])
        capture_transcript(run, session, "nothing.jsonl")


# --- the captures (PF_RECORD_FIXTURES=1) -----------------------------------------------------


def record(run: Run, call: HookCall, hook_fixture: str | None, transcript: str) -> None:
    """With the switch on, this run's hook input and the stopping agent's transcript become
    the fixtures (tests/hooks/fixtures/README.md), their paths replaced by placeholders."""
    if not recording():
        return
    own = call.stdin.get("agent_transcript_path") or call.stdin["transcript_path"]
    places = {str(own): "$TRANSCRIPT", str(run.root): "$ROOT", str(run.home): "$HOME"}
    if call.event == "SubagentStop":
        # The parent session's transcript, which the hook must not read for a subagent.
        places[call.stdin["transcript_path"]] = "$ROOT/parent-session.jsonl"
    if hook_fixture is not None:
        text = placeheld(json.dumps(call.stdin, indent=2) + "\n", places)
        capture(HOOK_FIXTURES / hook_fixture, text)
    capture_transcript(run, Path(own), transcript)


def capture_transcript(run: Run, path: Path, name: str) -> None:
    places = {str(run.root): "$ROOT", str(run.home): "$HOME"}
    # Claude Code's name for the project's folder under ~/.claude/projects/.
    places[re.sub(r"[^A-Za-z0-9]", "-", str(run.root))] = "$PROJECT"
    text = placeheld(path.read_text(encoding="utf-8"), places)
    capture(TRANSCRIPT_FIXTURES / name, text)


def test_the_pinned_release_is_the_one_that_runs(claude_code: Path) -> None:
    out = subprocess.run(
        [str(claude_code), "--version"], capture_output=True, check=False, timeout=60
    )
    assert out.returncode == 0
    assert out.stdout.decode().split()[0] == pinned("claude").version
