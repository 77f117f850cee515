"""`postflightd hook <runtime>` for every runtime: its documented input, its exact answer.

Each runtime's fixtures (tests/hooks/fixtures/<runtime>/) are its stop hook's input as its
documentation or source gives it; each case runs the real CLI (``main``, with the input on
descriptor 0, or in a subprocess where it says so) and checks the whole answer: stdout,
stderr and the exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta
from postflightd.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
TASKS = [task_entry(259, "prove_completeness"), task_entry(260, "plan_it")]
OWN, OTHER = "259_prove_completeness", "260_plan_it"
#: Not JSON: PF102, whoever wrote it.
BROKEN = '{"status": "researched",\n'
#: Long enough ago that no lag of a transcript explains it, well within every timeout.
MINUTE_AGO = 60.0
#: A file left behind by a run dead for 321 days: no runtime's agent wrote it.
STALE = 321 * 86400.0
REPAIR_HEAD = "postflightd: metadata to repair before stopping:\n"
REPAIR_TAIL = "\nRewrite the file(s) with these fixed; postflightd applies them when they validate."


def codex_rollout(root: Path) -> Path:
    path = root / "rollout.jsonl"
    path.write_bytes((FIXTURES / "codex" / "rollout_apply_patch.jsonl").read_bytes())
    return path


def claude_transcript(root: Path) -> Path:
    path = root / "session.jsonl"
    path.write_bytes((TRANSCRIPTS / "write.jsonl").read_bytes())
    return path


def gemini_transcript(root: Path) -> Path:
    path = root / "session-2026-11-26.json"
    path.write_text(json.dumps({"sessionId": "5f0c9a7e", "messages": []}), encoding="utf-8")
    return path


def copilot_transcript(root: Path) -> Path:
    path = root / "events.jsonl"
    began = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 3000))
    line = {"type": "session.start", "data": {"sessionId": "01HW2X"}, "timestamp": began}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path


def cursor_transcript(root: Path) -> Path:
    path = root / "cdefee2d.txt"
    path.write_text("user: research task 259\n\nassistant: done\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class Runtime:
    """What a test needs of one runtime: its input, its loop guard, its answer's shape."""

    name: str
    fixture: str
    transcript: Callable[[Path], Path]
    guard: dict[str, Any]
    #: the answer that sends the agent on, for a reason
    block: Callable[[str], dict[str, Any]]
    #: the person's message is in the answer (systemMessage), on stderr, or both
    person: str = "answer"
    malformed_exit: int = 1
    #: the argument of `hook`, when the runtime is reached through another one's command
    command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def decision(word: str) -> Callable[[str], dict[str, Any]]:
    return lambda reason: {"decision": word, "reason": reason}


RUNTIMES = [
    Runtime(
        "claude", "stop.json", claude_transcript, {"stop_hook_active": True}, decision("block")
    ),
    Runtime(
        "claude",
        "subagent_stop.json",
        claude_transcript,
        {"stop_hook_active": True},
        decision("block"),
    ),
    Runtime("codex", "stop.json", codex_rollout, {"stop_hook_active": True}, decision("block")),
    Runtime(
        "codex", "subagent_stop.json", codex_rollout, {"stop_hook_active": True}, decision("block")
    ),
    Runtime(
        "gemini",
        "after_agent.json",
        gemini_transcript,
        {"stop_hook_active": True},
        decision("deny"),
    ),
    Runtime(
        "copilot",
        "agent_stop.json",
        copilot_transcript,
        {"stopHookActive": True},
        decision("block"),
        person="both",
    ),
    Runtime(
        "copilot",
        "subagent_stop.json",
        copilot_transcript,
        {"stopHookActive": True},
        decision("block"),
        person="both",
    ),
    Runtime(
        "copilot",
        "stop_snake_case.json",
        copilot_transcript,
        {"stop_hook_active": True},
        decision("block"),
        person="both",
    ),
    Runtime(
        "cursor",
        "stop.json",
        cursor_transcript,
        {"loop_count": 1},
        lambda reason: {"followup_message": reason},
        person="stderr",
    ),
    Runtime(
        "opencode",
        "idle.json",
        lambda root: root,
        {"attempt": 3},
        decision("block"),
        malformed_exit=0,
    ),
    # Copilot CLI and Cursor also run the hooks of .claude/settings.json: `hook claude`
    # answers them in their own protocols.
    Runtime(
        "copilot",
        "agent_stop.json",
        copilot_transcript,
        {"stopHookActive": True},
        decision("block"),
        person="both",
        command="claude",
    ),
    Runtime(
        "cursor",
        "stop.json",
        cursor_transcript,
        {"loop_count": 1},
        lambda reason: {"followup_message": reason},
        person="stderr",
        command="claude",
    ),
]
IDS = [f"{r.command or r.name}-{r.name}-{r.fixture.removesuffix('.json')}" for r in RUNTIMES]


def payload(runtime: Runtime, root: Path, **changes: Any) -> dict[str, Any]:
    """The runtime's fixture with the project's paths in it."""
    text = (FIXTURES / runtime.name / runtime.fixture).read_text(encoding="utf-8")
    transcript = runtime.transcript(root)
    text = text.replace("$TRANSCRIPT", str(transcript)).replace("$ROOT", str(root))
    doc = json.loads(text)
    assert isinstance(doc, dict)
    doc.update(changes)
    return doc


@dataclass(frozen=True)
class Answer:
    doc: dict[str, Any]
    stderr: str
    code: int


def hook_process(runtime: Runtime, stdin: dict[str, Any] | bytes) -> Answer:
    """The real CLI in a subprocess, as the runtime starts it."""
    raw = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    out = subprocess.run(
        [sys.executable, "-m", "postflightd", "hook", runtime.command or runtime.name],
        input=raw,
        capture_output=True,
        check=False,
        timeout=120,
    )
    return _answer(out.stdout.decode("utf-8"), out.stderr.decode("utf-8"), out.returncode)


class Hook:
    """The CLI's ``main`` in this process, its input on descriptor 0 (what the hook reads)."""

    def __init__(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        self.capsys = capsys
        self.stdin = tmp_path / "stdin"

    def __call__(self, runtime: Runtime, stdin: dict[str, Any] | bytes) -> Answer:
        raw = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
        self.stdin.write_bytes(raw)
        saved = os.dup(0)
        fd = os.open(self.stdin, os.O_RDONLY)
        try:
            os.dup2(fd, 0)
            self.capsys.readouterr()
            code = main(["hook", runtime.command or runtime.name])
            out = self.capsys.readouterr()
        finally:
            os.dup2(saved, 0)
            os.close(saved)
            os.close(fd)
        return _answer(out.out, out.err, code)


def _answer(stdout: str, stderr: str, code: int) -> Answer:
    doc = json.loads(stdout)  # anything else on stdout fails here
    assert isinstance(doc, dict), stdout
    return Answer(doc, stderr, code)


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


def written(path: Path, ago: float) -> Path:
    when = time.time() - ago
    os.utime(path, (when, when))
    return path


def reason_of(doc: dict[str, Any]) -> str:
    """What the agent is told to repair, in whichever field its runtime reads."""
    reason = doc.get("reason", doc.get("followup_message"))
    assert isinstance(reason, str), doc
    return reason


def person_told(runtime: Runtime, answer: Answer) -> str:
    """The person's message, wherever the runtime carries it; asserts it is nowhere else."""
    if runtime.person == "stderr":
        assert "systemMessage" not in answer.doc
        return answer.stderr.removesuffix("\n")
    message = answer.doc["systemMessage"]
    assert isinstance(message, str)
    assert answer.stderr == (message + "\n" if runtime.person == "both" else "")
    return message


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
        "postflightd: 1 invalid metadata file(s) not written by this agent, so not blocked on"
    )
    assert f"specs/{OTHER}/.return-meta.json (PF102" in message
    assert hook(runtime, payload(runtime, root)) == Answer({}, "", 0)  # said once


def test_the_loop_guard_is_obeyed(runtime: Runtime, hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    meta = written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    answer = hook(runtime, payload(runtime, root, **runtime.guard))
    assert answer == Answer({}, "", 0)
    assert meta.exists()


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


@pytest.mark.parametrize("stdin", [b"", b"{truncated", b"[1, 2]", b"\xff\xfe"])
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


# --- what each runtime has of its own --------------------------------------------------------


def by_name(name: str, fixture: str) -> Runtime:
    return next(r for r in RUNTIMES if (r.name, r.fixture, r.command) == (name, fixture, ""))


OPENCODE = by_name("opencode", "idle.json")
CURSOR = by_name("cursor", "stop.json")
GEMINI = by_name("gemini", "after_agent.json")
COPILOT = by_name("copilot", "agent_stop.json")


def test_opencode_owns_the_files_its_plugin_names_and_those_written_seconds_ago(
    hook: Hook, tmp_path: Path
) -> None:
    """Named by the plugin: the session's. Written a minute ago and not named: another's.
    Written a second ago and not named: the session's (the plugin's list may lag)."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    own = written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    written(write_meta(root, OTHER, BROKEN), MINUTE_AGO)
    answer = hook(OPENCODE, payload(OPENCODE, root, files=[str(own)]))
    assert f"specs/{OWN}/.return-meta.json" in reason_of(answer.doc)
    assert OTHER not in reason_of(answer.doc)
    assert f"specs/{OTHER}/.return-meta.json (PF102" in answer.doc["systemMessage"]
    written(own, 1.0)
    lagging = hook(OPENCODE, payload(OPENCODE, root, files=[]))
    assert f"specs/{OWN}/.return-meta.json" in reason_of(lagging.doc)


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


@pytest.mark.parametrize("status", ["aborted", "error"])
def test_cursor_never_sends_back_an_agent_that_was_aborted_or_failed(
    hook: Hook, tmp_path: Path, status: str
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    assert hook(CURSOR, payload(CURSOR, root, status=status)) == Answer({}, "", 0)


def test_cursor_finds_the_project_among_its_workspace_roots(hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    elsewhere = tmp_path / "docs-folder"
    elsewhere.mkdir()
    answer = hook(CURSOR, payload(CURSOR, root, workspace_roots=[str(elsewhere), str(root)]))
    assert f"specs/{OWN}/.return-meta.json" in reason_of(answer.doc)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"workspace_roots": None}, 'no "workspace_roots" list of folders'),
        ({"workspace_roots": []}, 'no "workspace_roots" list of folders'),
        ({"loop_count": "1"}, '"loop_count" must be a whole number from 0 up'),
    ],
)
def test_cursor_input_of_the_wrong_shape_is_exit_1_and_one_stderr_line(
    hook: Hook, tmp_path: Path, changes: dict[str, Any], problem: str
) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    answer = hook(CURSOR, payload(CURSOR, root, **changes))
    assert (answer.doc, answer.code) == ({}, 1)
    assert problem in answer.stderr
    assert answer.stderr.count("\n") == 1


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


def test_a_file_written_before_the_transcript_began_is_not_the_agents(
    hook: Hook, tmp_path: Path
) -> None:
    """Copilot's transcript began 50 minutes ago (its first line's time): a file written an
    hour ago, within the timeout, is still another session's."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written(write_meta(root, OWN, BROKEN), 3600 - 60)
    answer = hook(COPILOT, payload(COPILOT, root))
    assert "decision" not in answer.doc
    assert f"specs/{OWN}/.return-meta.json (PF102" in answer.doc["systemMessage"]


def test_a_stop_hook_active_that_is_not_a_boolean_is_malformed(hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    for runtime in (GEMINI, by_name("codex", "stop.json"), COPILOT):
        guard = next(iter(runtime.guard))
        answer = hook(runtime, payload(runtime, root, **{guard: "yes"}))
        assert (answer.doc, answer.code) == ({}, 1)
        assert f'"{guard}" must be true or false' in answer.stderr
