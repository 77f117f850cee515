"""`postflightd hook copilot` inside the real GitHub Copilot CLI (the release pinned in
tests/runtimes/pinned.txt), its model a scripted server on 127.0.0.1.

Copilot CLI runs offline against a custom provider: ``COPILOT_OFFLINE=true`` (no GitHub
sign-in, telemetry or update check), ``COPILOT_PROVIDER_TYPE=anthropic`` and
``COPILOT_PROVIDER_BASE_URL`` the scripted server, which speaks Anthropic's Messages API
(helpers.model_server, shared with Claude Code's tests). ``COPILOT_ALLOW_ALL=true`` lets its
tools run without asking and trusts the project, whose hooks it then loads.

Each test sets a project up with `postflightd init --runtime copilot` as a user would, runs
`copilot -p` in it against the script, and reads what happened: state.json, the metadata
files, every request that reached the model, and every call of the hook (recorded by a
`postflightd` first on Copilot CLI's PATH that runs the real CLI).

With PF_RECORD_FIXTURES=1 (never under CI) the runs also write the hook inputs and the
sessions' events.jsonl they produced over the Copilot fixtures: tests/hooks/fixtures/README.md.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.model_server import ModelServer, ToolCall, Turn, model_server, say
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
    init,
    initialised_project,
    run_agent,
    sandbox,
    script_played,
)
from helpers.runtimes import HookCall, capture, offline_env, pinned, placeheld, recording

pytestmark = pytest.mark.slow

HOOK_FIXTURES = REPO / "tests" / "hooks" / "fixtures" / "copilot"
TRANSCRIPT_FIXTURES = REPO / "tests" / "fixtures" / "transcripts"


@dataclass(frozen=True)
class Run:
    root: Path
    home: Path
    server: ModelServer
    calls: list[HookCall]
    stdout: str
    stderr: str


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Tasks 259 (ready for a research report) and 260, set up by `postflightd init`."""
    return initialised_project(tmp_path, "copilot", ".github/hooks/postflightd.json")


def run_copilot(copilot: Path, root: Path, script: list[Turn], prompt: str) -> Run:
    """`copilot -p prompt` in ``root`` against the scripted model, to its end."""
    box = sandbox(root, "copilot")
    with model_server(script) as server:
        env = box.env(
            COPILOT_OFFLINE="true",
            COPILOT_PROVIDER_TYPE="anthropic",
            COPILOT_PROVIDER_BASE_URL=server.url,
            COPILOT_PROVIDER_API_KEY="dummy",
            COPILOT_MODEL="claude-sonnet-4.5",
            COPILOT_AUTO_UPDATE="false",
            COPILOT_ALLOW_ALL="true",
            # Its JavaScript, unpacked on first start, kept beside the install for every run.
            XDG_CACHE_HOME=str(copilot.parents[2] / "xdg-cache"),
        )
        out = run_agent(
            [str(copilot), "-p", prompt, "--allow-all-tools"],
            root,
            {k: v for k, v in env.items() if not k.startswith(("COPILOT_GITHUB", "GH_"))},
            timeout=120,
        )
    assert out.returncode == 0, (out.stdout, out.stderr)
    script_played(server, box.calls())
    stdout, stderr = (out.stdout.decode("utf-8", "replace"), out.stderr.decode("utf-8", "replace"))
    return Run(root, box.home, server, box.calls(), stdout, stderr)


def meta(root: Path, task_dir: str) -> Path:
    return root / "specs" / task_dir / META


def create(path: Path, content: str) -> Turn:
    return Turn(calls=[ToolCall("create", {"path": str(path), "file_text": content})])


def edit(path: Path, old: str, new: str) -> Turn:
    return Turn(calls=[ToolCall("edit", {"path": str(path), "old_str": old, "new_str": new})])


def view(path: Path) -> Turn:
    return Turn(calls=[ToolCall("view", {"path": str(path)})])


def bash(command: str) -> Turn:
    return Turn(calls=[ToolCall("bash", {"command": command, "description": "Write metadata"})])


def is_agent_stop(call: HookCall) -> bool:
    """A session's own stop in either shape (not a subagent's)."""
    return "agentId" not in call.stdin and "agent_id" not in call.stdin


def stops(calls: list[HookCall], command: str = "copilot") -> list[HookCall]:
    """The calls of `hook <command>`, each answered with exit 0."""
    found = [c for c in calls if c.argv[-1] == command]
    for call in found:
        assert call.code == 0, call
    return found


def test_a_valid_file_of_its_own_is_applied_and_the_agent_stops(
    copilot_cli: Path, root: Path
) -> None:
    own = meta(root, OWN)
    run = run_copilot(copilot_cli, root, [create(own, VALID), say("Done.")], "Research task 259.")
    (stop,) = stops(run.calls)
    assert stop.answer == {}, stop
    assert stop.stdin["stop_hook_active"] is False
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert len(run.server.agent_requests()) == 2
    # Offline: nothing but the Messages API was asked.
    assert {r.path.split("?")[0] for r in run.server.requests} == {"/v1/messages"}
    record(run, stop, "agent_stop.json", "copilot_create.jsonl")


def test_an_invalid_file_of_its_own_blocks_the_agent_until_it_is_fixed(
    copilot_cli: Path, root: Path
) -> None:
    own = meta(root, OWN)
    script = [create(own, BROKEN), say("Done."), edit(own, BROKEN, VALID), say("Fixed.")]
    run = run_copilot(copilot_cli, root, script, "Research task 259.")
    first, second = stops(run.calls)
    reason = first.answer["reason"]
    assert first.answer == {"decision": "block", "reason": reason}
    assert f"specs/{OWN}/.return-meta.json" in reason and "PF102" in reason
    requests = run.server.agent_requests()
    assert len(requests) == 4
    assert reason in requests[2].last_user_text()
    assert second.answer == {}
    assert second.stdin["stop_hook_active"] is True
    assert task_status(root, 259) == "researched"
    assert not own.exists()


def test_an_old_invalid_file_of_another_session_never_blocks_the_agent(
    copilot_cli: Path, root: Path
) -> None:
    """Written an hour before this run, in its own task directory: said to the person, never
    put on this agent, whose own file (written by a shell command) is applied."""
    theirs = broken_file_of_another_run(root)
    own = meta(root, OWN)
    command = SHELL_WRITES_VALID
    run = run_copilot(copilot_cli, root, [bash(command), say("Done.")], "Research task 259.")
    (stop,) = stops(run.calls)
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert stop.stderr == stop.answer["systemMessage"] + "\n"
    assert len(run.server.agent_requests()) == 2
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, None, "copilot_bash_cat.jsonl")


def test_an_invalid_file_another_process_wrote_just_before_the_stop_never_blocks_the_agent(
    copilot_cli: Path, root: Path
) -> None:
    """While the agent works on its own file (viewed, then edited from in_progress to its
    outcome), another process writes a broken file in another task directory about a second
    before the agent stops: events.jsonl names only the agent's own file, so the other one is
    said to the person, not put on the agent, however recent."""
    own = write_meta(root, OWN, IN_PROGRESS)
    theirs = meta(root, OTHER)

    other_process = another_process_writing_a_broken_file(root)

    script = [view(own), edit(own, IN_PROGRESS, VALID), say("Done.", before=other_process)]
    run = run_copilot(copilot_cli, root, script, "Research task 259.")
    (stop,) = stops(run.calls)
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert len(run.server.agent_requests()) == 3
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, None, "copilot_edit.jsonl")


def test_an_agent_that_keeps_its_file_invalid_is_let_stop_and_the_person_told(
    copilot_cli: Path, root: Path
) -> None:
    """The agent rewrites its file, still invalid, when sent back: Copilot CLI's
    stop_hook_active lets it stop at the second stop (long before Copilot's own end of the
    turn after 8 blocks, and before postflightd's bound of 3), and the person is told which
    file is still invalid and why, on `copilot -p`'s stderr."""
    own = meta(root, OWN)
    script = [
        create(own, BROKEN),
        say("Done."),
        edit(own, BROKEN, BROKEN + " "),
        say("Done again."),
    ]
    run = run_copilot(copilot_cli, root, script, "Research task 259.")
    first, second = stops(run.calls)
    assert first.answer["decision"] == "block"
    assert second.stdin["stop_hook_active"] is True
    assert set(second.answer) == {"systemMessage"}
    told = second.answer["systemMessage"]
    assert told.startswith(
        f"postflightd: specs/{OWN}/.return-meta.json is still invalid after the agent was sent "
        "back once to repair it (PF102: "
    )
    assert second.stderr == told + "\n"
    # What the person sees: `copilot -p` shows neither the systemMessage nor the hook's
    # stderr; the hook writes the line on its stderr too.
    assert told in run.stderr, (run.stdout, run.stderr)
    assert len(run.server.agent_requests()) == 4
    assert own.exists()
    assert task_status(root, 259) != "researched"


def test_a_subagents_invalid_file_blocks_the_subagent_until_it_is_fixed(
    copilot_cli: Path, root: Path
) -> None:
    """The session delegates to a subagent (the `task` tool). A subagent's end runs both of
    Copilot's events: `agentStop` with the subagent's id as sessionId, then `subagentStop`
    with the parent's; the block of `subagentStop` is what sends the subagent back, with the
    reason as its next request. Its fix is applied, and the session then stops."""
    own = meta(root, OWN)
    delegate = ToolCall(
        "task",
        {
            "description": "Research task 259",
            "prompt": "Research task 259 and write its metadata.",
            "agent_type": "general-purpose",
            "name": "researcher",
        },
    )
    script = [
        Turn(calls=[delegate]),
        create(own, BROKEN),
        say("Subagent done."),
        edit(own, BROKEN, VALID),
        say("Subagent fixed it."),
        say("Done."),
    ]
    run = run_copilot(copilot_cli, root, script, "Research task 259 with a subagent.")
    calls = stops(run.calls)
    subagent = [c for c in calls if "response" in c.stdin]  # subagentStop's own field
    first, second = subagent
    reason = first.answer["reason"]
    assert first.answer == {"decision": "block", "reason": reason}
    assert f"specs/{OWN}/.return-meta.json" in reason and "PF102" in reason
    assert first.stdin["agentType"] == "general-purpose"
    requests = run.server.agent_requests()
    assert len(requests) == 6
    assert reason in requests[3].last_user_text()
    assert second.answer == {}
    (stop,) = [c for c in calls if is_agent_stop(c)]
    assert stop.answer == {}
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    record(run, first, "subagent_stop.json", "copilot_subagent.jsonl")


def test_with_claudes_hook_too_each_stop_is_post_flighted_once(
    copilot_cli: Path, root: Path
) -> None:
    """A project set up for Copilot CLI and for Claude Code: Copilot CLI runs both hook files
    for each stop, one after the other, `hook claude` with the same input in snake_case. The
    first run of a stop decides (its block sends the agent back, with the reason); the second
    finds the stop already answered and answers {} without post-flighting again."""
    init(root, "claude")
    own = meta(root, OWN)
    script = [create(own, BROKEN), say("Done."), edit(own, BROKEN, VALID), say("Fixed.")]
    run = run_copilot(copilot_cli, root, script, "Research task 259.")
    ours, claudes = stops(run.calls), stops(run.calls, "claude")
    assert len(ours) == len(claudes) == 2
    for camel, snake in zip(ours, claudes, strict=True):
        assert snake.stdin["session_id"] == camel.stdin["sessionId"]
        assert snake.stdin["hook_event_name"] == "Stop"
    firsts = sorted([ours[0], claudes[0]], key=lambda c: c.started)
    reason = firsts[0].answer["reason"]
    assert firsts[0].answer == {"decision": "block", "reason": reason}
    assert (firsts[1].answer, firsts[1].stderr) == ({}, "")
    assert reason in run.server.agent_requests()[2].last_user_text()
    assert [c.answer for c in (ours[1], claudes[1])] == [{}, {}]
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    if recording():
        call = claudes[0]
        places = {call.stdin["transcript_path"]: "$TRANSCRIPT", str(run.root): "$ROOT"}
        text = placeheld(json.dumps(call.stdin, indent=2) + "\n", places)
        capture(HOOK_FIXTURES / "stop_snake_case.json", text)


# --- the captures (PF_RECORD_FIXTURES=1) -----------------------------------------------------


def record(run: Run, call: HookCall, hook_fixture: str | None, transcript: str) -> None:
    """With the switch on, this run's hook input and the session's events.jsonl become the
    fixtures (tests/hooks/fixtures/README.md), their paths replaced by placeholders."""
    if not recording():
        return
    events = call.stdin["transcriptPath"]
    places = {events: "$TRANSCRIPT", str(run.root): "$ROOT", str(run.home): "$HOME"}
    if hook_fixture is not None:
        text = placeheld(json.dumps(call.stdin, indent=2) + "\n", places)
        capture(HOOK_FIXTURES / hook_fixture, text)
    text = placeheld(Path(events).read_text(encoding="utf-8"), places)
    capture(TRANSCRIPT_FIXTURES / transcript, text)


def test_the_pinned_release_is_the_one_that_runs(copilot_cli: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [str(copilot_cli), "--version"],
        capture_output=True,
        env=offline_env(tmp_path, XDG_CACHE_HOME=str(copilot_cli.parents[2] / "xdg-cache")),
        check=False,
        timeout=120,
    )
    assert out.returncode == 0
    assert out.stdout.decode().split()[3] == pinned("copilot").version + "."
