"""postflightd's OpenCode plugin and `postflightd hook opencode` inside the real OpenCode (the
release pinned in tests/runtimes/pinned.txt), its model a scripted OpenAI-compatible server on
127.0.0.1 (helpers.chat_server).

Each test sets a project up with `postflightd init --runtime opencode` as a user would, adds an
`opencode.json` naming the scripted provider, and drives OpenCode in one of its two ways: `run`
(one prompt; the process ends when the session goes idle) or `serve` (long-lived, the session
prompted over its HTTP API, as the TUI does). It then reads what happened: state.json, the
metadata files, every request that reached the model (the hook's reason must be in the next
one), every call of the hook (its stdin, its answer), recorded by a `postflightd` first on
OpenCode's PATH that runs the real CLI.

Offline: OpenCode installs its plugin package (@opencode-ai/plugin) into each configuration
directory it reads when the directory has no node_modules, or a package.json dependency its
package-lock.json lacks. The tests write, in the throwaway HOME's ~/.config/opencode and the
project's .opencode, what that install leaves (the dependency in package.json and
package-lock.json, a node_modules directory; postflightd's plugin imports nothing from it), so
OpenCode installs nothing, and npm's registry in that HOME is a closed port on 127.0.0.1:
nothing reaches the network. The models list is not fetched (OPENCODE_DISABLE_MODELS_FETCH).

With PF_RECORD_FIXTURES=1 (never under CI) the runs also write the hook inputs the plugin
gave over the OpenCode fixtures: tests/hooks/fixtures/README.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.chat_server import ChatRequest, ChatServer, chat_server, chat_write
from helpers.model_server import ToolCall, Turn, say
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
from helpers.runtimes import HookCall, capture, hook_calls, pinned, placeheld, recording
from helpers.waiting import wait_until

pytestmark = pytest.mark.slow

PROVIDER, MODEL = "scripted", "model"
HOOK_FIXTURES = REPO / "tests" / "hooks" / "fixtures" / "opencode"
MODES = ["run", "serve"]


@dataclass(frozen=True)
class Run:
    root: Path
    home: Path
    server: ChatServer
    calls: list[HookCall]
    log: str

    def agent_requests(self) -> list[ChatRequest]:
        return [r for r in self.server.agent_requests() if isinstance(r, ChatRequest)]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Tasks 259 (ready for a research report) and 260, set up by `postflightd init`."""
    return initialised_project(tmp_path, "opencode", ".opencode/plugins/postflightd.ts")


def plugin_package_in_place(config_dir: Path) -> None:
    """What OpenCode's install of its plugin package leaves in a configuration directory, so
    that it installs nothing (the module docstring)."""
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "node_modules").mkdir(exist_ok=True)
    dependencies = {"@opencode-ai/plugin": pinned("opencode").version}
    (config_dir / "package.json").write_text(json.dumps({"dependencies": dependencies}))
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": dependencies}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock))


@contextmanager
def opencode_setup(
    root: Path, script: list[Turn], path_before: str = ""
) -> Iterator[tuple[ChatServer, dict[str, str]]]:
    """The scripted server, the project's opencode.json naming it, and OpenCode's environment
    (``path_before`` put before its PATH)."""
    box = sandbox(root, "opencode")
    # npm's registry, should OpenCode try to install anything: a closed port, never the net.
    (box.home / ".npmrc").write_text("registry=http://127.0.0.1:9/\n")
    plugin_package_in_place(box.home / ".config" / "opencode")
    plugin_package_in_place(root / ".opencode")
    with chat_server(script) as server:
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Scripted",
            "options": {"baseURL": f"{server.url}/v1", "apiKey": "dummy"},
            "models": {MODEL: {"name": "Scripted", "tool_call": True}},
        }
        config = {
            "provider": {PROVIDER: provider},
            "model": f"{PROVIDER}/{MODEL}",
            "small_model": f"{PROVIDER}/{MODEL}",
            "autoupdate": False,
            "share": "disabled",
        }
        (root / "opencode.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        env = box.env(
            # OpenCode takes its directory from $PWD before the working directory.
            PWD=str(root),
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
        )
        env["PATH"] = path_before + env["PATH"]
        # Its configuration, data and cache under that HOME, not where the tests' XDG points.
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
            env.pop(name, None)
        yield server, env


def run_opencode(
    opencode: Path,
    root: Path,
    script: list[Turn],
    prompt: str,
    mode: str,
    complete: bool = True,
    path_before: str = "",
) -> Run:
    """OpenCode in ``root`` against the scripted model, ``prompt`` its one message, to the end
    of the script: `opencode run` to its exit, or `opencode serve` until every turn was asked
    for and the last hook call answered (``path_before``: put before its PATH)."""
    with opencode_setup(root, script, path_before) as (server, env):
        if mode == "run":
            out = run_agent([str(opencode), "run", "--print-logs", prompt], root, env, 120)
            log = out.stderr.decode("utf-8", "replace")
            assert out.returncode == 0, (out.stdout, log[-3000:])
        else:
            log = serve(opencode, root, env, server, prompt)
    calls = hook_calls(root.parent / "hook-calls")
    script_played(server, calls, complete)
    # Nothing was installed or fetched: no warning of a failed install, only the model asked.
    assert "dependency install failed" not in log
    assert {r.path.split("?")[0] for r in server.requests} == {"/v1/chat/completions"}
    return Run(root, root.parent / "opencode-home", server, calls, log)


def serve(opencode: Path, root: Path, env: dict[str, str], server: ChatServer, prompt: str) -> str:
    """`opencode serve` on 127.0.0.1, a session made and prompted over its HTTP API; waits
    for the script's end and the hook's last answer, then stops the server."""
    log = root.parent / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(opencode), "serve", "--hostname", "127.0.0.1", "--port", "0", "--print-logs"],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=sink,
        )
    try:
        assert proc.stdout is not None
        said = ""
        while not (found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", said)):
            line = proc.stdout.readline().decode("utf-8", "replace")
            assert line, (said, log.read_text(encoding="utf-8", errors="replace")[-3000:])
            said += line
        base = found.group(1)
        session = post(base, "/session", {})
        body = {"parts": [{"type": "text", "text": prompt}]}
        post(base, f"/session/{session['id']}/message", body)
        calls_dir = root.parent / "hook-calls"

        def settled() -> bool:
            # The script asked to its end, and the hook answered the session's last idle
            # (a hook call recorded after the last model request, with nothing pending).
            if server.script or not (calls := hook_calls(calls_dir)):
                return False
            return all(c.answer.get("decision") != "block" for c in calls[-1:])

        wait_until("the script's end and the hook's last answer", settled, timeout=90)
        time.sleep(1.0)  # a prompt the plugin would still send shows as a request past the end
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stdout.close() if proc.stdout else None
    return log.read_text(encoding="utf-8", errors="replace")


def post(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    assert base.startswith("http://127.0.0.1:")
    request = urllib.request.Request(  # noqa: S310 - the loopback server just started
        base + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=90) as response:  # noqa: S310 - the same
        doc: dict[str, Any] = json.loads(response.read() or b"{}")
        return doc


def meta(root: Path, task_dir: str) -> Path:
    return root / "specs" / task_dir / META


def edit(path: Path, old: str, new: str) -> Turn:
    args = {"filePath": str(path), "oldString": old, "newString": new}
    return Turn(calls=[ToolCall("edit", args)])


def read(path: Path) -> Turn:
    return Turn(calls=[ToolCall("read", {"filePath": str(path)})])


def bash(command: str) -> Turn:
    return Turn(calls=[ToolCall("bash", {"command": command, "description": "Write metadata"})])


def answered(calls: list[HookCall]) -> list[HookCall]:
    for call in calls:
        assert call.code == 0, call
    return calls


@pytest.mark.parametrize("mode", MODES)
def test_a_valid_file_of_its_own_is_applied_and_the_agent_stops(
    opencode: Path, root: Path, mode: str
) -> None:
    own = meta(root, OWN)
    script = [chat_write(str(own), VALID), say("Done.")]
    run = run_opencode(opencode, root, script, "Research task 259.", mode)
    (stop,) = answered(run.calls)
    assert stop.answer == {}, stop
    assert stop.stdin["files"] == [str(own)]
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert len(run.agent_requests()) == 2
    record(run, stop, "idle.json")


def test_the_plugin_runs_no_postflightd_an_agent_planted_in_the_project(
    opencode: Path, root: Path, tmp_path: Path
) -> None:
    """An agent writes an executable ``postflightd`` into the project. A PATH with an empty
    entry (``PATH=$EXTRA:$PATH`` with EXTRA unset) or ``.`` names the working directory: the
    plugin still runs the installed postflightd, by its absolute path, from outside the
    project."""
    mark = tmp_path / "planted-postflightd-ran"
    for where in (root, root / ".opencode"):
        planted = where / "postflightd"
        planted.write_text(f"#!/bin/sh\necho ran >> {mark}\necho '{{}}'\n", encoding="utf-8")
        planted.chmod(0o755)
    own = meta(root, OWN)
    script = [chat_write(str(own), VALID), say("Done.")]
    run = run_opencode(opencode, root, script, "Research task 259.", "run", path_before=":.:")
    assert not mark.exists(), "the plugin ran a postflightd from the project"
    (stop,) = answered(run.calls)
    assert stop.cwd == "/", stop
    assert stop.stdin["files"] == [str(own)]
    assert task_status(root, 259) == "researched"
    assert not own.exists()


@pytest.mark.parametrize("mode", MODES)
def test_an_invalid_file_of_its_own_blocks_the_agent_until_it_is_fixed(
    opencode: Path, root: Path, mode: str
) -> None:
    """The plugin's prompt reaches the model, the fixed file is applied, in either mode; under
    `opencode run` before the process ends (the run's own output stops at its first idle)."""
    own = meta(root, OWN)
    script = [
        chat_write(str(own), BROKEN),
        say("Done."),
        chat_write(str(own), VALID),
        say("Fixed."),
    ]
    run = run_opencode(opencode, root, script, "Research task 259.", mode)
    first, *rest = answered(run.calls)
    reason = first.answer["reason"]
    assert first.answer == {"decision": "block", "reason": reason}
    assert first.stdin["attempt"] == 0
    assert f"specs/{OWN}/.return-meta.json" in reason and "PF102" in reason
    requests = run.agent_requests()
    assert len(requests) == 4
    assert requests[2].last_user_text() == reason
    assert rest and all(c.answer == {} for c in rest), rest
    assert 1 in [c.stdin["attempt"] for c in rest]
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    record(run, first, "idle_block.json")


def test_an_old_invalid_file_of_another_session_never_blocks_the_agent(
    opencode: Path, root: Path
) -> None:
    """Written an hour before this run, in its own task directory: said to the person, never
    put on this agent, whose own file (written by a shell command) is applied."""
    theirs = broken_file_of_another_run(root)
    own = meta(root, OWN)
    command = SHELL_WRITES_VALID
    run = run_opencode(opencode, root, [bash(command), say("Done.")], "Research task 259.", "run")
    (stop,) = answered(run.calls)
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert stop.stdin["files"] == []  # a shell command's file: the plugin does not see it
    assert len(run.agent_requests()) == 2
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, "idle_bash.json")


def test_an_invalid_file_another_process_wrote_just_before_the_stop_never_blocks_the_agent(
    opencode: Path, root: Path
) -> None:
    """While the agent works on its own file (read, then edited from in_progress to its
    outcome), another process writes a broken file in another task directory about a second
    before the agent stops: the plugin names only the agent's own file, so the other one is
    said to the person, not put on the agent, however recent."""
    own = write_meta(root, OWN, IN_PROGRESS)
    theirs = meta(root, OTHER)

    other_process = another_process_writing_a_broken_file(root)

    script = [read(own), edit(own, IN_PROGRESS, VALID), say("Done.", before=other_process)]
    run = run_opencode(opencode, root, script, "Research task 259.", "run")
    (stop,) = answered(run.calls)
    assert stop.stdin["files"] == [str(own)]
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert len(run.agent_requests()) == 3
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, "idle_edit.json")


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_that_keeps_its_file_invalid_is_stopped_by_the_bound_and_the_person_told(
    opencode: Path, root: Path, mode: str
) -> None:
    """The agent rewrites its file, still invalid, at every try: it is sent back 3 times in
    all, then the hook's bound lets it stop, and its answer tells the person which file is
    still invalid and why; the plugin shows that as a toast (in the TUI) and writes it to
    OpenCode's log, which `--print-logs` prints on stderr.

    Under `opencode run`, OpenCode disposes of the project's instance at the first idle and
    makes a new one (a new plugin, its counts at 0) for the plugin's prompt: two plugins then
    check the same session, so the plugin's `attempt` alone would not stop it; postflightd's
    bound counts per session and file, whichever plugin asks."""
    own = meta(root, OWN)
    script: list[Turn] = []
    for attempt in range(4):
        script += [chat_write(str(own), BROKEN + " " * attempt), say(f"Done ({attempt}).")]
    run = run_opencode(opencode, root, script, "Research task 259.", mode, complete=False)
    calls = answered(run.calls)
    decisions = [c.answer.get("decision") for c in calls]
    # Each call's session, attempt and files beside its answer: which plugin asked what.
    seen = [
        ({k: c.stdin.get(k) for k in ("session_id", "attempt", "files")}, c.answer) for c in calls
    ]
    assert decisions.count("block") == 3, seen
    told = [c.answer["systemMessage"] for c in calls if "systemMessage" in c.answer]
    assert told and all("sent back 3 times" in message for message in told), seen
    # No call that began once the person was told blocked. (Another call without a decision
    # can come before: the second plugin's check while the agent rewrites its file, which is
    # then not settled, so not yet a thing to block on or tell.)
    first_told = min(c.ended for c in calls if "systemMessage" in c.answer)
    assert all("decision" not in c.answer for c in calls if c.started > first_told), seen
    assert f"specs/{OWN}/.return-meta.json is still invalid" in told[0]
    assert "sent back 3 times" in told[0] and "PF102" in told[0]
    # Never sent back past the bound: at most the script's 4 tries reached the model.
    assert len(run.agent_requests()) <= 8
    logged = [line for line in run.log.splitlines() if "level=WARN" in line]
    assert any(told[0] in line for line in logged), logged
    assert own.exists()
    assert task_status(root, 259) != "researched"


def test_a_subagents_invalid_file_is_sent_to_the_subagent_and_fixed(
    opencode: Path, root: Path
) -> None:
    """The session delegates to a subagent (the `task` tool, a child session). The child's
    result goes back to the parent when its turn ends, which is also when the child session
    goes idle: the plugin checks the child's own files, and the hook's block reaches the child
    as its next prompt (after the parent had its result, while the parent goes on), the child
    fixes its file, and the fix is applied. The parent wrote nothing, so it is never blocked;
    its stop, if it comes before the child's fix, tells the person of the file."""
    own = meta(root, OWN)
    delegate = ToolCall(
        "task",
        {
            "description": "Research task 259",
            "prompt": "Research task 259 and write its metadata.",
            "subagent_type": "general",
        },
    )
    script = [
        Turn(calls=[delegate]),
        chat_write(str(own), BROKEN),
        say("Subagent done."),
        say("Done."),
        chat_write(str(own), VALID),
        say("Subagent fixed it."),
    ]
    run = run_opencode(opencode, root, script, "Research task 259 with a subagent.", "run")
    calls = answered(run.calls)
    blocks = [c for c in calls if c.answer.get("decision") == "block"]
    (block,) = blocks
    child = block.stdin["session_id"]
    assert block.stdin["files"] == [str(own)]
    reason = block.answer["reason"]
    assert f"specs/{OWN}/.return-meta.json" in reason and "PF102" in reason
    parents = [c for c in calls if c.stdin["session_id"] != child]
    assert parents and all(c.stdin["files"] == [] for c in parents)
    # The reason went to the child session: its request starts from the subagent's prompt.
    requests = run.agent_requests()
    sent = next(r for r in requests if r.last_user_text() == reason)
    assert "Research task 259 and write its metadata." in json.dumps(sent.body["messages"][:2])
    assert task_status(root, 259) == "researched"
    assert not own.exists()


# --- the captures (PF_RECORD_FIXTURES=1) -----------------------------------------------------


def record(run: Run, call: HookCall, name: str) -> None:
    """With the switch on, the hook input the plugin gave becomes a fixture
    (tests/hooks/fixtures/README.md), its paths replaced by placeholders."""
    if not recording():
        return
    places = {str(run.root): "$ROOT", str(run.home): "$HOME"}
    text = placeheld(json.dumps(call.stdin, indent=2) + "\n", places)
    capture(HOOK_FIXTURES / name, text)


def test_the_pinned_release_is_the_one_that_runs(opencode: Path) -> None:
    out = subprocess.run([str(opencode), "--version"], capture_output=True, check=False, timeout=60)
    assert out.returncode == 0
    assert out.stdout.decode().strip() == pinned("opencode").version
