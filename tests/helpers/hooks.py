"""Running a runtime's stop hook in tests: its documented input (tests/hooks/fixtures/), the
real CLI in this process or in a subprocess, and the whole answer (stdout, stderr, exit code).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import task_entry
from postflightd.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "hooks" / "fixtures"
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
REPAIR_TAIL = "\nRewrite the file with these fixed; postflightd applies it when it validates."


def codex_rollout(root: Path) -> Path:
    path = root / "rollout.jsonl"
    path.write_bytes((FIXTURES / "codex" / "rollout_apply_patch.jsonl").read_bytes())
    return path


def claude_transcript(root: Path) -> Path:
    path = root / "session.jsonl"
    path.write_bytes((TRANSCRIPTS / "write.jsonl").read_bytes())
    return path


def gemini_transcript(root: Path, capture: str = "write_file.jsonl") -> Path:
    """A chat record Gemini CLI wrote (tests/hooks/fixtures/gemini/): its agent wrote OWN's
    file."""
    path = root / "session-2026-11-28T20-13-0fd64743.jsonl"
    path.write_bytes((FIXTURES / "gemini" / capture).read_bytes())
    return path


def copilot_transcript(root: Path) -> Path:
    """Copilot CLI's events.jsonl of a session whose agent created its own file (task 259)."""
    path = root / "events.jsonl"
    path.write_bytes((TRANSCRIPTS / "copilot_create.jsonl").read_bytes())
    return path


def copilot_subagent_transcript(root: Path) -> Path:
    """Copilot CLI's events.jsonl of a session whose subagent created task 259's file."""
    path = root / "events.jsonl"
    path.write_bytes((TRANSCRIPTS / "copilot_subagent.jsonl").read_bytes())
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
        {"stop_hook_active": True},
        decision("block"),
        person="both",
    ),
    Runtime(
        "copilot",
        "subagent_stop.json",
        copilot_subagent_transcript,
        {"stop_hook_active": True},
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
        {"stop_hook_active": True},
        decision("block"),
        person="both",
        command="claude",
    ),
    Runtime(
        "copilot",
        "stop_snake_case.json",
        copilot_transcript,
        {"stop_hook_active": True},
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


def by_name(name: str, fixture: str) -> Runtime:
    """The runtime's entry of RUNTIMES reached through its own command."""
    return next(r for r in RUNTIMES if (r.name, r.fixture, r.command) == (name, fixture, ""))
