"""`postflightd hook gemini` inside the real Gemini CLI (the release pinned in
tests/runtimes/pinned.txt), its model a scripted server on 127.0.0.1 speaking the Gemini API.

Each test sets a project up with `postflightd init --runtime gemini` as a user would, trusts
its folder in a throwaway HOME (Gemini CLI ignores an untrusted folder's settings), runs
`gemini -p` in it against the script (the agent's tool calls, then its final text), and reads
what happened: state.json, the metadata files, every request that reached the model (the hook's
reason must be in the next one), and every call of the hook (its stdin, its answer), recorded by
a `postflightd` first on Gemini CLI's PATH that runs the real CLI.

Gemini CLI has no subagent stop: `AfterAgent` is its only end-of-turn hook, so there is no
case for a subagent here.

With PF_RECORD_FIXTURES=1 (never under CI) the runs also write the hook input and transcripts
they produced over the Gemini fixtures: tests/hooks/fixtures/README.md.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.gemini_server import GeminiServer, gemini_server, replace, shell, write_file
from helpers.model_server import Turn, say
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
from helpers.runtimes import HookCall, capture, offline_env, pinned, placeheld, recording

pytestmark = pytest.mark.slow

MINUTE = 60.0
MODEL = "gemini-2.5-flash"
#: Gemini CLI's settings in the throwaway HOME: the API key's auth (the key is a dummy, the
#: endpoint GOOGLE_GEMINI_BASE_URL), and nothing sent anywhere but the model.
USER_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}
FIXTURES = REPO / "tests" / "hooks" / "fixtures" / "gemini"


@dataclass(frozen=True)
class Run:
    root: Path
    home: Path
    server: GeminiServer
    calls: list[HookCall]
    stdout: str
    stderr: str


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Tasks 259 (ready for a research report) and 260, set up by `postflightd init`."""
    return initialised_project(tmp_path, "gemini", ".gemini/settings.json")


def run_gemini(gemini: Path, root: Path, script: list[Turn], prompt: str) -> Run:
    """`gemini -p prompt` in ``root`` against the scripted model, to its end."""
    box = sandbox(root, "gemini")
    settings = box.home / ".gemini"
    settings.mkdir()
    (settings / "settings.json").write_text(json.dumps(USER_SETTINGS), encoding="utf-8")
    trusted = {str(root): "TRUST_FOLDER"}
    (settings / "trustedFolders.json").write_text(json.dumps(trusted), encoding="utf-8")
    with gemini_server(script) as server:
        env = box.env(GOOGLE_GEMINI_BASE_URL=server.url, GEMINI_API_KEY="dummy")
        # yolo: -p cannot ask the person, and without it the file tools are not offered.
        argv = [str(gemini), "-p", prompt, "-m", MODEL, "--approval-mode", "yolo"]
        out = run_agent(argv, root, env, timeout=120)
    stdout, stderr = (out.stdout.decode("utf-8", "replace"), out.stderr.decode("utf-8", "replace"))
    assert out.returncode == 0, (stdout, stderr)
    script_played(server, box.calls())
    return Run(root, box.home, server, box.calls(), stdout, stderr)


def meta(root: Path, task_dir: str) -> Path:
    return root / "specs" / task_dir / META


def after_agent(calls: list[HookCall]) -> list[HookCall]:
    assert {c.event for c in calls} == {"AfterAgent"}
    for call in calls:
        assert call.code == 0, call
    return calls


def test_a_valid_file_of_its_own_is_applied_and_the_agent_stops(
    gemini_cli: Path, root: Path
) -> None:
    own = meta(root, OWN)
    run = run_gemini(
        gemini_cli, root, [write_file(str(own), VALID), say("Done.")], "Research task 259."
    )
    (stop,) = after_agent(run.calls)
    assert stop.answer == {}, stop
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert len(run.server.agent_requests()) == 2
    # Offline: nothing but the model's generateContent was asked (docs/hooks/gemini.md).
    paths = {r.path.split("?")[0] for r in run.server.requests}
    assert paths == {f"/v1beta/models/{MODEL}:streamGenerateContent"}
    record(run, stop, "after_agent.json", "write_file.jsonl")


def test_an_invalid_file_of_its_own_blocks_the_agent_until_it_is_fixed(
    gemini_cli: Path, root: Path
) -> None:
    own = meta(root, OWN)
    script = [
        write_file(str(own), BROKEN),
        say("Done."),
        write_file(str(own), VALID),
        say("Fixed."),
    ]
    run = run_gemini(gemini_cli, root, script, "Research task 259.")
    first, second = after_agent(run.calls)
    reason = first.answer["reason"]
    assert first.answer == {"decision": "deny", "reason": reason}
    assert f"specs/{OWN}/.return-meta.json" in reason and "PF102" in reason
    requests = run.server.agent_requests()
    assert len(requests) == 4
    # Gemini CLI sends the reason as the next prompt, alone.
    assert requests[2].last_user_text() == reason
    assert second.answer == {}
    # The retry's turn ended after a tool call: Gemini CLI does not say it is a retry.
    assert second.stdin["stop_hook_active"] is False
    assert task_status(root, 259) == "researched"
    assert not own.exists()


def test_an_old_invalid_file_of_another_session_never_blocks_the_agent(
    gemini_cli: Path, root: Path
) -> None:
    """Written a minute before this session began, in its own task directory: within the
    operation's hour, but the transcript names only the agent's own file (written by a shell
    command), so the other one is said to the person, never put on this agent."""
    theirs = broken_file_of_another_run(root, MINUTE)
    own = meta(root, OWN)
    command = SHELL_WRITES_VALID
    run = run_gemini(gemini_cli, root, [shell(command), say("Done.")], "Research task 259.")
    (stop,) = after_agent(run.calls)
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert len(run.server.agent_requests()) == 2
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, None, "run_shell_command.jsonl")


def test_an_invalid_file_another_process_wrote_just_before_the_stop_never_blocks_the_agent(
    gemini_cli: Path, root: Path
) -> None:
    """The agent edits its own in_progress file to its outcome (`replace`); another process
    writes a broken file in another task directory about a second before the agent stops:
    the transcript names only the agent's own file, so the other one is said to the person."""
    own = write_meta(root, OWN, IN_PROGRESS)
    theirs = meta(root, OTHER)

    other_process = another_process_writing_a_broken_file(root)

    script = [replace(str(own), IN_PROGRESS, VALID), say("Done.", before=other_process)]
    run = run_gemini(gemini_cli, root, script, "Research task 259.")
    (stop,) = after_agent(run.calls)
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert len(run.server.agent_requests()) == 2
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, None, "replace.jsonl")


def test_an_agent_that_keeps_its_file_invalid_is_stopped_by_the_bound_and_the_person_told(
    gemini_cli: Path, root: Path
) -> None:
    """The agent rewrites its file, still invalid, at every try: Gemini CLI's own flag never
    stops it (each retry ends after a tool call), postflightd's bound does, after 3 denials,
    and its answer tells the person which file is still invalid and why."""
    own = meta(root, OWN)
    script: list[Turn] = []
    for attempt in range(4):
        script += [write_file(str(own), BROKEN + " " * attempt), say(f"Done ({attempt}).")]
    run = run_gemini(gemini_cli, root, script, "Research task 259.")
    calls = after_agent(run.calls)
    assert [c.stdin["stop_hook_active"] for c in calls] == [False] * 4
    assert [c.answer.get("decision") for c in calls] == ["deny", "deny", "deny", None]
    last = calls[-1].answer
    assert set(last) == {"systemMessage"}
    told = last["systemMessage"]
    assert f"specs/{OWN}/.return-meta.json is still invalid" in told
    assert "sent back 3 times" in told and "PF102" in told
    assert len(run.server.agent_requests()) == 8
    # What the person sees: `gemini -p` prints a hook's systemMessage on stderr.
    assert f"Hook system message: {told}" in run.stderr
    assert own.exists()
    assert task_status(root, 259) != "researched"


# --- the captures (PF_RECORD_FIXTURES=1) -----------------------------------------------------


def record(run: Run, call: HookCall, hook_fixture: str | None, transcript: str) -> None:
    """With the switch on, this run's hook input and the session's transcript become the
    fixtures (tests/hooks/fixtures/README.md), their paths replaced by placeholders."""
    if not recording():
        return
    path = Path(call.stdin["transcript_path"])
    places = {str(path): "$TRANSCRIPT", str(run.root): "$ROOT", str(run.home): "$HOME"}
    if hook_fixture is not None:
        text = placeheld(json.dumps(call.stdin, indent=2) + "\n", places)
        capture(FIXTURES / hook_fixture, text)
    text = placeheld(path.read_text(encoding="utf-8"), places)
    capture(FIXTURES / transcript, text)


def test_the_pinned_release_is_the_one_that_runs(gemini_cli: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [str(gemini_cli), "--version"],
        capture_output=True,
        env=offline_env(tmp_path),
        check=False,
        timeout=60,
    )
    assert out.returncode == 0
    assert out.stdout.decode().strip() == pinned("gemini").version
