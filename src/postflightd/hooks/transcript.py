"""Which metadata files an agent wrote, from the agent runtime's transcript of it.

A transcript is JSON lines; an assistant line (``{"type": "assistant", "message": {"id": ...,
"content": [...]}}``) carries ``tool_use`` items: ``Write``, ``Edit`` and ``MultiEdit`` name the
file in ``input.file_path``, ``Bash`` runs ``input.command`` (``cat > specs/259_x/
.return-meta.json``, ``jq ... > .../.return-meta.json``). One response may span several lines
with the same ``message.id``; each line's items count on their own, so nothing is merged.

Transcripts are not a stable interface and can be tens of megabytes: only the end of the file
is read, within a budget; a line that does not parse, or is not of that shape, is skipped; and
when nothing in the tail parses at all, the transcript counts as unreadable (the caller falls
back to the files' times).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from postflightd.models.files import META_NAME
from postflightd.timestamps import parse_timestamp

#: How much of a transcript's end is read: an agent's final write is among its last lines.
TAIL_BYTES: Final = 4 * 1024 * 1024
#: How much of a transcript's start is read for the time it began (its first line).
HEAD_BYTES: Final = 64 * 1024
#: The subagent transcripts of one session read for a ``Stop``, the most recent first.
MAX_SUBAGENT_TRANSCRIPTS: Final = 32
#: Tools whose ``input.file_path`` names the file they write.
FILE_TOOLS: Final = frozenset({"Write", "Edit", "MultiEdit"})
_META_BYTES: Final = META_NAME.encode()
#: ``<task dir>/.return-meta.json`` in a path or a shell command: the task directory's name.
_TASK_DIR: Final = re.compile(r"([^/\s'\"`;|&<>()=]+)/" + re.escape(META_NAME))

#: The task directories whose metadata file one parsed line of a transcript says were written.
Written = Callable[[Any], set[str]]


@dataclass(frozen=True, slots=True)
class Transcript:
    """What one transcript says: the task directories whose metadata file the agent wrote,
    and when the transcript began (its first line's timestamp; None when it has none)."""

    task_dirs: frozenset[str]
    began: float | None


def task_dirs_named(text: str) -> set[str]:
    """The task directories whose metadata file ``text`` (a path, a command) names."""
    return {m.group(1) for m in _TASK_DIR.finditer(text)}


def read_transcript(path: Path, tail_bytes: int = TAIL_BYTES) -> Transcript | None:
    """The transcript at ``path``, or None when it cannot be read or none of its end parses."""
    return read_jsonl(path, _written, tail_bytes)


def read_jsonl(path: Path, written: Written, tail_bytes: int = TAIL_BYTES) -> Transcript | None:
    """Any runtime's JSON-lines transcript at ``path``, each line's writes told by ``written``;
    None when it cannot be read or none of its end parses."""
    try:
        # Non-blocking: a FIFO planted at the path must not hang the hook; only a regular
        # file is read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        head = os.pread(fd, HEAD_BYTES, 0)
        start = max(0, info.st_size - tail_bytes)
        tail = os.pread(fd, tail_bytes, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = tail.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first is the end of a line that began before the budget
    dirs: set[str] = set()
    parsed_any = False
    for line in reversed(lines):
        if not line.strip():
            continue
        if _META_BYTES not in line:
            # Only lines naming a metadata file can say the agent wrote one; the others are
            # checked to parse only until one does (the transcript is then JSON lines).
            if not parsed_any:
                parsed_any = _parses(line)
            continue
        entry = _loads(line)
        if entry is None:
            continue
        parsed_any = True
        dirs.update(written(entry))
    if not parsed_any:
        return None
    return Transcript(frozenset(dirs), _began(head))


def read_transcripts(
    paths: Iterable[Path], tail_bytes: int = TAIL_BYTES, written: Written | None = None
) -> Transcript | None:
    """Several transcripts as one (an agent and its subagents): the task directories any of
    them wrote, and the time the first began; None when none of them can be read. Lines are
    Claude Code's unless ``written`` reads another runtime's."""
    found = [
        t for t in (read_jsonl(p, written or _written, tail_bytes) for p in paths) if t is not None
    ]
    if not found:
        return None
    began = [t.began for t in found if t.began is not None]
    return Transcript(
        frozenset().union(*(t.task_dirs for t in found)), min(began) if began else None
    )


def subagent_transcripts(transcript: Path, session_id: str) -> list[Path]:
    """A session's subagent transcripts beside its own: ``<dir>/<session>/subagents/
    agent-*.jsonl``, the most recently written first, at most MAX_SUBAGENT_TRANSCRIPTS."""
    if not session_id or "/" in session_id or session_id in {".", ".."} or "\0" in session_id:
        return []
    folder = transcript.parent / session_id / "subagents"
    try:
        found = [(p.stat().st_mtime, p) for p in folder.glob("agent-*.jsonl")]
    except OSError:
        return []
    found.sort(key=lambda item: item[0], reverse=True)
    return [p for _, p in found[:MAX_SUBAGENT_TRANSCRIPTS]]


def began_of(path: Path) -> float | None:
    """When a transcript began, by its first line's time (``_began``; a regular file only,
    its first HEAD_BYTES read); None when that cannot be told."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.pread(fd, HEAD_BYTES, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _began(head)


def _loads(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _parses(line: bytes) -> bool:
    return isinstance(_loads(line), dict)


def _written(entry: Any) -> set[str]:
    """The task directories whose metadata file one transcript line's tool calls write."""
    if not isinstance(entry, dict) or entry.get("type") != "assistant":
        return set()
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return set()
    out: set[str] = set()
    for item in content:
        if not isinstance(item, dict) or item.get("type") != "tool_use":
            continue
        tool, given = item.get("name"), item.get("input")
        if not isinstance(given, dict):
            continue
        if tool in FILE_TOOLS:
            text = given.get("file_path")
        elif tool == "Bash":
            text = given.get("command")
        else:
            continue
        if isinstance(text, str):
            out |= task_dirs_named(text)
    return out


def _began(head: bytes) -> float | None:
    """The first line's time as a Unix time, when the first line holds one: its
    ``timestamp`` (Claude Code, Codex), or its ``startTime`` (Gemini CLI's chat record,
    whose first line is the session's metadata)."""
    first = head.split(b"\n", 1)[0]
    entry = _loads(first)
    stamp = None
    if isinstance(entry, dict):
        stamp = entry.get("timestamp", entry.get("startTime"))
    when = parse_timestamp(stamp) if isinstance(stamp, str) else None
    return when.timestamp() if when is not None else None
