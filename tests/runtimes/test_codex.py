"""`postflightd hook codex` inside the real Codex CLI (the release pinned in
tests/runtimes/pinned.txt), its model a scripted Responses API server on 127.0.0.1.

Each test sets a project up with `postflightd init --runtime codex` as a user would, trusts
the project and the hook in the throwaway home's ~/.codex/config.toml exactly as
docs/hooks/codex.md says (or runs without that, to show what Codex then does), runs
`codex exec` in it against the script (the agent's tool calls, then its final text), and reads
what happened: state.json, the metadata files, every request that reached the model (the
hook's reason must be in the next one), every call of the hook (its stdin, its answer), and
what `codex exec` printed.

With PF_RECORD_FIXTURES=1 (never under CI) the runs also write the hook inputs and rollouts
they produced over the Codex fixtures: tests/hooks/fixtures/README.md.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.model_server import ToolCall, Turn, say
from helpers.project import META, task_status, write_meta
from helpers.responses_server import (
    ResponsesServer,
    exec_command,
    patch,
    patch_update,
    responses_server,
)
from helpers.runtime_project import (
    BROKEN,
    IN_PROGRESS,
    OTHER,
    OWN,
    REPO,
    VALID,
    another_process_writing_a_broken_file,
    broken_file_of_another_run,
    initialised_project,
    run_agent,
    sandbox,
    script_played,
)
from helpers.runtimes import HookCall, capture, pinned, placeheld, recording
from postflightd.project.codex_trust import hook_trust, postflightd_hooks, trust_entries

pytestmark = pytest.mark.slow

#: A model slug Codex knows: it offers `apply_patch` (freeform) and `exec_command` for it.
MODEL = "gpt-5.5"
FIXTURES = REPO / "tests" / "hooks" / "fixtures" / "codex"
OWN_META = f"specs/{OWN}/{META}"
#: The name Codex gives the subagent the tests spawn (``task_name`` research_259).
SUBAGENT = "/root/research_259"


@dataclass(frozen=True)
class Run:
    root: Path
    home: Path
    server: ResponsesServer
    calls: list[HookCall]
    stdout: str
    stderr: str


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Tasks 259 (ready for a research report) and 260, set up by `postflightd init`."""
    return initialised_project(tmp_path, "codex", ".codex/hooks.json")


def codex_config(server: ResponsesServer, root: Path, trust: str) -> str:
    """The user's ~/.codex/config.toml: the scripted provider, and the trust of the project
    (``trust`` "project") or of the project and its hooks ("all") as docs/hooks/codex.md
    writes them."""
    text = f"""model = "{MODEL}"
model_provider = "scripted"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.scripted]
name = "scripted"
base_url = "{server.url}"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0

"""
    if trust != "none":
        hooks = postflightd_hooks(root) if trust == "all" else []
        text += trust_entries(root, hooks)
    return text


def run_codex(
    codex: Path,
    root: Path,
    script: list[Turn],
    prompt: str,
    *,
    trust: str = "all",
    flags: tuple[str, ...] = (),
    complete: bool = True,
    agents: dict[str, list[Turn]] | None = None,
) -> Run:
    """`codex exec prompt` in ``root`` against the scripted model, to its end; ``agents``:
    the scripts of the subagents it spawns, by name (``/root/<task_name>``)."""
    box = sandbox(root, "codex")
    (box.home / ".codex").mkdir()
    with responses_server(script, agents) as server:
        config = box.home / ".codex" / "config.toml"
        config.write_text(codex_config(server, root, trust), encoding="utf-8")
        env = box.env(SCRIPTED_API_KEY="dummy", NO_COLOR="1")
        env.pop("CODEX_HOME", None)
        argv = [str(codex), "exec", "--skip-git-repo-check"]
        # No sandbox of Codex's own here (it needs namespaces the tests' machine may refuse).
        argv += ["--dangerously-bypass-approvals-and-sandbox", *flags, prompt]
        out = run_agent(argv, root, env, timeout=90)
    stdout = out.stdout.decode("utf-8", "replace")
    stderr = out.stderr.decode("utf-8", "replace")
    assert out.returncode == 0, (stdout, stderr)
    script_played(server, box.calls(), complete)
    return Run(root, box.home, server, box.calls(), stdout, stderr)


def meta(root: Path, task_dir: str) -> Path:
    return root / "specs" / task_dir / META


def only(calls: list[HookCall], event: str) -> list[HookCall]:
    found = [c for c in calls if c.event == event]
    for call in found:
        assert call.code == 0, call
    return found


def test_a_valid_file_of_its_own_is_applied_and_the_agent_stops(
    codex_cli: Path, root: Path
) -> None:
    own = meta(root, OWN)
    run = run_codex(codex_cli, root, [patch(OWN_META, VALID), say("Done.")], "Research task 259.")
    (stop,) = only(run.calls, "Stop")
    assert stop.answer == {}, stop
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert len(run.server.agent_requests()) == 2
    # Offline: nothing but the Responses API was asked (docs/hooks/codex.md).
    assert {r.path.split("?")[0] for r in run.server.requests} == {"/v1/responses"}
    record(run, stop, "stop.json", "rollout_apply_patch.jsonl")


def test_an_invalid_file_of_its_own_blocks_the_agent_until_it_is_fixed(
    codex_cli: Path, root: Path
) -> None:
    own = meta(root, OWN)
    fix = exec_command(f"cat > {OWN_META} <<'EOF'\n{VALID}\nEOF")
    script = [patch(OWN_META, BROKEN), say("Done."), fix, say("Fixed.")]
    run = run_codex(codex_cli, root, script, "Research task 259.")
    first, second = only(run.calls, "Stop")
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
    record(run, second, None, "rollout_shell.jsonl")


def test_an_old_invalid_file_of_another_session_never_blocks_the_agent(
    codex_cli: Path, root: Path
) -> None:
    """Written an hour before this run, in its own task directory: said to the person (on
    what `codex exec` prints), never put on this agent, whose own file is applied."""
    theirs = broken_file_of_another_run(root)
    own = meta(root, OWN)
    run = run_codex(codex_cli, root, [patch(OWN_META, VALID), say("Done.")], "Research task 259.")
    (stop,) = only(run.calls, "Stop")
    assert "decision" not in stop.answer, stop
    told = f"specs/{OTHER}/.return-meta.json (PF102"
    assert told in stop.answer["systemMessage"]
    assert told in run.stderr, (run.stdout, run.stderr)
    assert len(run.server.agent_requests()) == 2
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN


def test_an_invalid_file_another_process_wrote_just_before_the_stop_never_blocks_the_agent(
    codex_cli: Path, root: Path
) -> None:
    """While the agent works on its own file (read, then rewritten from in_progress to its
    outcome), another process writes a broken file in another task directory about a second
    before the agent stops: the rollout names only the agent's own file, so the other one is
    said to the person, not put on the agent, however recent."""
    own = write_meta(root, OWN, IN_PROGRESS)
    theirs = meta(root, OTHER)

    other_process = another_process_writing_a_broken_file(root)

    update = patch_update(OWN_META, IN_PROGRESS, VALID)
    script = [exec_command(f"cat {OWN_META}"), update, say("Done.", before=other_process)]
    run = run_codex(codex_cli, root, script, "Research task 259.")
    (stop,) = only(run.calls, "Stop")
    assert "decision" not in stop.answer, stop
    assert f"specs/{OTHER}/.return-meta.json (PF102" in stop.answer["systemMessage"]
    assert len(run.server.agent_requests()) == 3
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    assert theirs.read_text(encoding="utf-8") == BROKEN
    record(run, stop, None, "rollout_update.jsonl")


def test_an_agent_that_keeps_its_file_invalid_is_let_stop_and_the_person_told(
    codex_cli: Path, root: Path
) -> None:
    """The agent rewrites its file, still invalid, when sent back: Codex's stop_hook_active
    lets it stop at the second stop (before postflightd's own bound of 3 is reached), and the
    person is told which file is still invalid and why, on `codex exec`'s stderr, which shows
    no systemMessage itself."""
    own = meta(root, OWN)
    again = exec_command(f"cat > {OWN_META} <<'EOF'\n{BROKEN} \nEOF")
    script = [patch(OWN_META, BROKEN), say("Done."), again, say("Done again.")]
    run = run_codex(codex_cli, root, script, "Research task 259.")
    first, second = only(run.calls, "Stop")
    assert first.answer["decision"] == "block"
    assert second.stdin["stop_hook_active"] is True
    assert set(second.answer) == {"systemMessage"}
    told = second.answer["systemMessage"]
    assert told.startswith(
        f"postflightd: specs/{OWN}/.return-meta.json is still invalid after the agent was sent "
        "back once to repair it (PF102: "
    )
    assert told in run.stderr, (run.stdout, run.stderr)
    assert len(run.server.agent_requests()) == 4
    assert own.exists()
    assert task_status(root, 259) != "researched"


def test_a_subagents_invalid_file_blocks_the_subagent_until_it_is_fixed(
    codex_cli: Path, root: Path
) -> None:
    """Codex's subagents (the feature ``multi_agent_v2``): the main agent spawns one and waits
    for it; the subagent writes a broken file, its SubagentStop is blocked with the reason,
    which reaches that subagent's next request; its fix is applied, and the main agent's
    Stop finds nothing left to do."""
    own = meta(root, OWN)
    spawn = Turn(
        calls=[
            ToolCall(
                "collaboration.spawn_agent",
                {
                    "task_name": "research_259",
                    "message": "Research task 259.",
                    "fork_turns": "none",
                },
            )
        ]
    )
    wait = Turn(calls=[ToolCall("collaboration.wait_agent", {"timeout_ms": 60000})])
    fix = exec_command(f"cat > {OWN_META} <<'EOF'\n{VALID}\nEOF")
    subagent = [patch(OWN_META, BROKEN), say("Done."), fix, say("Fixed.")]
    run = run_codex(
        codex_cli,
        root,
        [spawn, wait, say("The subagent researched task 259.")],
        "Research task 259 with a subagent.",
        flags=("--enable", "multi_agent_v2"),
        agents={SUBAGENT: subagent},
    )
    first, second = only(run.calls, "SubagentStop")
    reason = first.answer["reason"]
    assert first.answer == {"decision": "block", "reason": reason}
    assert f"specs/{OWN}/.return-meta.json" in reason and "PF102" in reason
    assert first.stdin["agent_transcript_path"] != first.stdin["transcript_path"]
    theirs = [r for r in run.server.agent_requests() if r.agent == SUBAGENT]
    assert len(theirs) == 4
    assert reason in theirs[2].input_text()
    assert second.answer == {}
    (stop,) = only(run.calls, "Stop")
    assert stop.answer == {}
    assert task_status(root, 259) == "researched"
    assert not own.exists()
    record(run, first, "subagent_stop.json", "rollout_subagent.jsonl")


# --- trust -----------------------------------------------------------------------------------


def test_in_an_untrusted_project_codex_skips_the_hook_and_says_why(
    codex_cli: Path, root: Path
) -> None:
    """As `init` writes it and nothing more: the project's .codex/ is not read at all, and
    `codex exec` says so (and how to trust it)."""
    script = [patch(OWN_META, BROKEN), say("Done.")]
    run = run_codex(codex_cli, root, script, "Research task 259.", trust="none")
    assert run.calls == []
    assert "untrusted project-local configuration is disabled" in run.stderr.lower()
    assert meta(root, OWN).read_text(encoding="utf-8") == BROKEN
    assert hook_trust(root, run.home / ".codex") == (False, postflightd_hooks(root))


def test_an_untrusted_hook_of_a_trusted_project_is_skipped_without_a_word(
    codex_cli: Path, root: Path
) -> None:
    """The project trusted, the hook not: Codex never runs it and `codex exec` says nothing
    of it; the agent's broken file stays."""
    script = [patch(OWN_META, BROKEN), say("Done.")]
    run = run_codex(codex_cli, root, script, "Research task 259.", trust="project")
    assert run.calls == []
    said = (run.stdout + run.stderr).replace(str(run.root.parent), "$TMP").lower()
    assert "hook" not in said and "trust" not in said, said
    assert meta(root, OWN).read_text(encoding="utf-8") == BROKEN
    project_ok, hooks = hook_trust(root, run.home / ".codex")
    assert project_ok and hooks and not any(h.trusted for h in hooks)


def test_bypassing_hook_trust_runs_the_hook_for_that_run(codex_cli: Path, root: Path) -> None:
    run = run_codex(
        codex_cli,
        root,
        [patch(OWN_META, VALID), say("Done.")],
        "Research task 259.",
        trust="project",
        flags=("--dangerously-bypass-hook-trust",),
    )
    (stop,) = only(run.calls, "Stop")
    assert stop.answer == {}
    assert task_status(root, 259) == "researched"


def test_the_documented_trust_entries_are_what_codex_checks(codex_cli: Path, root: Path) -> None:
    """The entries docs/hooks/codex.md gives (written by the tests above too) make Codex run
    the hook; with them, postflightd reads the hook as trusted. The agent only reads: its
    rollout writes nothing."""
    script = [exec_command("ls specs"), say("Nothing to write.")]
    run = run_codex(codex_cli, root, script, "Look at the tasks.")
    (stop,) = only(run.calls, "Stop")
    assert stop.answer == {}
    project_ok, hooks = hook_trust(root, run.home / ".codex")
    assert project_ok and [h.event for h in hooks] == ["Stop", "SubagentStop"]
    assert all(h.trusted for h in hooks)
    record(run, stop, None, "rollout_nothing.jsonl")


# --- the captures (PF_RECORD_FIXTURES=1) -----------------------------------------------------


def record(run: Run, call: HookCall, hook_fixture: str | None, rollout: str) -> None:
    """With the switch on, this run's hook input and the stopping agent's rollout become the
    fixtures (tests/hooks/fixtures/README.md), their paths replaced by placeholders."""
    if not recording():
        return
    own = call.stdin.get("agent_transcript_path") or call.stdin["transcript_path"]
    places = {str(own): "$TRANSCRIPT", str(run.root): "$ROOT", str(run.home): "$HOME"}
    if hook_fixture is not None:
        text = placeheld(json.dumps(call.stdin, indent=2) + "\n", places)
        capture(FIXTURES / hook_fixture, text)
    text = placeheld(Path(own).read_text(encoding="utf-8"), places)
    capture(FIXTURES / rollout, text)


def test_the_pinned_release_is_the_one_that_runs(codex_cli: Path) -> None:
    out = subprocess.run(
        [str(codex_cli), "--version"], capture_output=True, check=False, timeout=60
    )
    assert out.returncode == 0
    assert out.stdout.decode().split()[-1] == pinned("codex").version
