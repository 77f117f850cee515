"""`hook claude` blocks an agent only over the metadata files it wrote itself.

Through the real CLI (a subprocess fed the runtime's JSON) on project trees in tmp_path, with
transcripts in the agent runtime's JSON-lines format (tests/fixtures/transcripts/): an
assistant line's ``tool_use`` items name the files the agent wrote. Other runs' invalid files
are said to the person (``systemMessage``), once per content, never in the block reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
TASKS = [task_entry(259, "prove_completeness"), task_entry(260, "plan_it")]
OWN, OTHER = "259_prove_completeness", "260_plan_it"
HOOK = [sys.executable, "-m", "postflightd", "hook", "claude"]
#: Not JSON: PF102, whoever wrote it.
BROKEN = '{"status": "researched",\n'
#: How long ago a file was written that no lag of the transcript can explain.
MINUTE_AGO = 60.0
#: A file left behind by a run dead for 321 days.
STALE = 321 * 86400.0
SESSION = "0b6e5c1e-4c1d-4f57-9c1a-2f7d3c9a1e11"


def hook(payload: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        HOOK, input=json.dumps(payload).encode(), capture_output=True, check=False, timeout=120
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert isinstance(doc, dict)
    return doc


def written(path: Path, ago: float) -> Path:
    """``path`` as if last written ``ago`` seconds ago."""
    when = time.time() - ago
    os.utime(path, (when, when))
    return path


def subagent_stop(root: Path, transcript: Path | None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": SESSION,
        "transcript_path": str(root / "parent-session.jsonl"),
        "cwd": str(root),
        "hook_event_name": "SubagentStop",
        "stop_hook_active": False,
        "agent_id": "a3f9c2e1",
        "agent_type": "general-purpose",
    }
    if transcript is not None:
        payload["agent_transcript_path"] = str(transcript)
    return hook(payload)


@pytest.mark.parametrize("fixture", ["write.jsonl", "edit.jsonl", "bash_cat.jsonl"])
def test_a_file_the_agent_wrote_blocks_it(tmp_path: Path, fixture: str) -> None:
    """Write, Edit, and a Bash `cat >` naming the file: the agent's own, so it must repair it,
    though it was written long enough ago that no transcript lag explains it."""
    root = project(tmp_path / "proj", TASKS)
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    doc = subagent_stop(root, FIXTURES / fixture)
    assert doc.get("decision") == "block", doc
    assert f"specs/{OWN}/.return-meta.json" in doc["reason"]
    assert "PF102" in doc["reason"]
    assert "systemMessage" not in doc


def test_an_agent_that_wrote_nothing_is_not_blocked_and_the_person_is_told(
    tmp_path: Path,
) -> None:
    """The transcript reads another run's file and writes none: no block; the broken file
    is named to the person instead."""
    root = project(tmp_path / "proj", TASKS)
    meta = written(write_meta(root, OTHER, BROKEN), MINUTE_AGO)
    doc = subagent_stop(root, FIXTURES / "nothing.jsonl")
    assert "decision" not in doc, doc
    assert f"specs/{OTHER}/.return-meta.json (PF102" in doc["systemMessage"]
    assert meta.exists()


def test_a_stale_invalid_file_of_another_session_is_said_once_never_blocked(
    tmp_path: Path,
) -> None:
    """The agent's own valid file is applied; another session's file dead for 321 days is
    named to the person at the first stop, and not again at the next one."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    own = written(write_meta(root, OWN, researched_doc()), MINUTE_AGO)
    stale = written(write_meta(root, OTHER, BROKEN), STALE)
    first = subagent_stop(root, FIXTURES / "write.jsonl")
    assert "decision" not in first, first
    assert "1 invalid metadata file not written by this agent" in first["systemMessage"]
    assert f"specs/{OTHER}/.return-meta.json" in first["systemMessage"]
    assert not own.exists()  # applied: valid files are post-flighted whoever wrote them
    second = subagent_stop(root, FIXTURES / "nothing.jsonl")
    assert second == {}
    assert stale.exists()


def test_a_changed_file_of_another_session_is_said_again(tmp_path: Path) -> None:
    """Said once per content: a rewrite that is still broken is new news for the person."""
    root = project(tmp_path / "proj", TASKS)
    meta = written(write_meta(root, OTHER, BROKEN), STALE)
    assert "systemMessage" in subagent_stop(root, FIXTURES / "nothing.jsonl")
    written(write_meta(root, OTHER, BROKEN + "  "), STALE)
    doc = subagent_stop(root, FIXTURES / "nothing.jsonl")
    assert f"specs/{OTHER}/.return-meta.json" in doc["systemMessage"]
    assert meta.exists()


def test_a_file_written_seconds_ago_that_the_transcript_does_not_name_is_not_the_agents(
    tmp_path: Path,
) -> None:
    """The transcript alone decides when it can be read: Claude Code has the agent's last tool
    call in it before the hook runs (tests/runtimes/), so a broken file written 2 s ago that no
    line names is another process's: said to the person, never put on this agent."""
    root = project(tmp_path / "proj", TASKS)
    meta = written(write_meta(root, OWN, BROKEN), 2.0)
    doc = subagent_stop(root, FIXTURES / "nothing.jsonl")
    assert "decision" not in doc, doc
    assert f"specs/{OWN}/.return-meta.json (PF102" in doc["systemMessage"]
    assert meta.exists()


@pytest.mark.parametrize(
    "kind", ["missing", "directory", "not json lines", "/dev/zero", "/proc/self/mem", "4 GiB hole"]
)
def test_an_unreadable_transcript_falls_back_to_the_operations_timeout(
    tmp_path: Path, kind: str
) -> None:
    """No transcript to read (and no birth time to know when it began): files written within
    the operation's timeout are the agent's; one dead for 321 days is not. Only a regular
    file is read, and only its end: a device or /proc file (endless, or faulting) is not, and
    a 4 GiB file of nothing (sparse) costs a bounded read."""
    root = project(tmp_path / "proj", TASKS)
    transcript = tmp_path / "agent.jsonl"
    if kind == "directory":
        transcript.mkdir()
    elif kind == "not json lines":
        transcript.write_text("not a transcript\n" * 3, encoding="utf-8")
    elif kind.startswith("/"):
        transcript = Path(kind)
    elif kind == "4 GiB hole":
        with transcript.open("wb") as fh:
            fh.truncate(4 << 30)
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    written(write_meta(root, OTHER, BROKEN), STALE)
    doc = subagent_stop(root, transcript)
    assert doc.get("decision") == "block", doc
    assert f"specs/{OWN}/.return-meta.json" in doc["reason"]
    assert OTHER not in doc["reason"]
    assert f"specs/{OTHER}/.return-meta.json" in doc["systemMessage"]


def test_without_a_transcript_path_the_operations_timeout_decides(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS)
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    written(write_meta(root, OTHER, BROKEN), STALE)
    doc = hook({"cwd": str(root), "hook_event_name": "Stop", "stop_hook_active": False})
    assert doc.get("decision") == "block", doc
    assert OTHER not in doc["reason"]


def test_a_sessions_stop_counts_its_subagents_transcripts(tmp_path: Path) -> None:
    """``Stop``: the session's transcript writes nothing, but a subagent of it, whose
    transcript is under ``<session>/subagents/``, wrote the file."""
    root = project(tmp_path / "proj", TASKS)
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    folder = tmp_path / "transcripts"
    (folder / SESSION / "subagents").mkdir(parents=True)
    shutil.copy(FIXTURES / "nothing.jsonl", folder / f"{SESSION}.jsonl")
    payload = {
        "session_id": SESSION,
        "transcript_path": str(folder / f"{SESSION}.jsonl"),
        "cwd": str(root),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    assert "decision" not in hook(payload)  # no subagent transcript yet: not the session's
    shutil.copy(
        FIXTURES / "subagent_write.jsonl", folder / SESSION / "subagents" / "agent-a3f9c2e1.jsonl"
    )
    doc = hook(payload)
    assert doc.get("decision") == "block", doc
    assert f"specs/{OWN}/.return-meta.json" in doc["reason"]


def test_a_subagents_stop_reads_its_own_transcript_not_the_sessions(tmp_path: Path) -> None:
    """``SubagentStop``: ``transcript_path`` is the parent session's, whose writes are not this
    subagent's; its own transcript (which wrote nothing) decides."""
    root = project(tmp_path / "proj", TASKS)
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    shutil.copy(FIXTURES / "write.jsonl", root / "parent-session.jsonl")
    doc = subagent_stop(root, FIXTURES / "nothing.jsonl")
    assert "decision" not in doc, doc


def test_a_50_mb_transcript_is_read_from_its_end(tmp_path: Path) -> None:
    """50 MB of other tool calls, the agent's own write near the end: found, the hook
    answers (it reads a bounded tail, never the whole file)."""
    root = project(tmp_path / "proj", TASKS)
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    transcript = tmp_path / "big.jsonl"
    big_transcript(transcript, 50 * 1024 * 1024, FIXTURES / "write.jsonl")
    assert transcript.stat().st_size >= 50 * 1024 * 1024
    doc = subagent_stop(root, transcript)
    assert doc.get("decision") == "block", doc
    assert f"specs/{OWN}/.return-meta.json" in doc["reason"]


def big_transcript(path: Path, size: int, ending: Path) -> None:
    """A transcript of ``size`` bytes: ``ending``'s first line, many Read/Bash calls, then
    ``ending``'s other lines (the own write among them)."""
    first, *rest = ending.read_text("utf-8").splitlines(keepends=True)
    call = {
        "type": "assistant",
        "timestamp": "2026-01-08T14:05:00.000Z",
        "message": {
            "id": "msg_01X",
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01X",
                    "name": "Bash",
                    "input": {"command": "grep -rn TODO src/ | head -50 " + "x" * 300},
                }
            ],
        },
    }
    line = (json.dumps(call) + "\n").encode()
    with path.open("wb") as fh:
        fh.write(first.encode())
        block = line * 1000
        for _ in range(size // len(block) + 1):
            fh.write(block)
        fh.write("".join(rest).encode())


def test_a_fifo_at_the_transcript_path_neither_hangs_the_hook_nor_counts(
    tmp_path: Path,
) -> None:
    """A FIFO where the transcript should be is not read (it would wait for a writer
    forever): the hook answers from the operation's timeout window, as for a missing one."""
    root = project(tmp_path / "proj", TASKS)
    fifo = tmp_path / "agent.jsonl"
    os.mkfifo(fifo)
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    doc = subagent_stop(root, fifo)
    assert doc.get("decision") == "block", doc
    assert f"specs/{OWN}/.return-meta.json" in doc["reason"]


@pytest.mark.parametrize(
    "garbage", [b"\x00\xff" * 100, b"not a key\n" * 50, b"a" * 64 + b"\n" + b"\x1b[2J" * 10]
)
def test_a_garbled_memory_of_what_was_said_only_means_saying_it_again(
    tmp_path: Path, garbage: bytes
) -> None:
    """What the person was already told lives in the user's state directory; when that file
    is garbage the hook still answers, names the other run's file again, and rewrites it."""
    from postflightd.hooks.reported import default_path

    root = project(tmp_path / "proj", TASKS)
    written(write_meta(root, OTHER, BROKEN), STALE)
    memory = default_path()
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_bytes(garbage)
    first = subagent_stop(root, FIXTURES / "nothing.jsonl")
    assert f"specs/{OTHER}/.return-meta.json" in first["systemMessage"]
    assert subagent_stop(root, FIXTURES / "nothing.jsonl") == {}
