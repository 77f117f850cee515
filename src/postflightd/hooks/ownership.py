"""Which metadata files are the stopping agent's own: it is blocked over those alone.

Decided, in order of what is known:

1. The agent's transcript (a subagent's own, or a session's and its subagents'): a file whose
   task directory a ``Write``, ``Edit``, ``MultiEdit`` or ``Bash`` call of it names is its own
   (Claude Code), or an ``apply_patch`` header or a shell command of it (Codex's rollout,
   ``hooks.rollout``), or a ``create``, ``edit`` or ``bash`` call of it (Copilot CLI's
   ``events.jsonl``, ``hooks.copilot``), or a ``write_file``, ``replace`` or
   ``run_shell_command`` call of it (Gemini CLI's chat record, ``hooks.chat``). The transcript
   alone decides: these runtimes write a tool call into it before the model is asked again, so
   the agent's last write is in it when the hook runs (measured by tests/runtimes/), and a file
   no line names is another process's, however recent.
2. A transcript path given but unreadable: files last written after it began (its first
   line's time where that can be read, else its birth time where the file system keeps one),
   else within the operation's timeout.
3. No transcript path at all: files last written within the operation's timeout.
4. The files the runtime itself says the session wrote (OpenCode's plugin): those, and the
   ones last written in the last LAG_S seconds (``files_ownership``).
5. A runtime whose transcript does not say what the agent wrote (Cursor): files
   last written within the operation's timeout, and after the transcript's first line's time
   where it has one (``window_ownership``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from postflightd.hooks.transcript import (
    Transcript,
    Written,
    began_of,
    read_transcripts,
    subagent_transcripts,
    task_dirs_named,
)

#: How far a runtime's own list of the files a session wrote may lag its last write, in
#: seconds (``files_ownership``); a transcript that can be read has no such lag.
LAG_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class Ownership:
    """The rule in force for one stop (see the module docstring)."""

    transcript: Transcript | None
    #: without a transcript: files last written at or after this Unix time are the agent's
    since: float
    #: how the rule was chosen, for the log: "transcript", "transcript unreadable", "window",
    #: "files"
    basis: str
    #: with a record of the agent's writes: files it does not name, last written within this
    #: many seconds (and after the record began), are the agent's too; 0 when the record is
    #: known to be complete when the hook runs
    lag_s: float = 0.0

    def owns(self, task_dir: str, mtime: float | None, now: float) -> bool:
        if mtime is None:
            return False
        if self.transcript is None:
            return mtime >= self.since
        if task_dir in self.transcript.task_dirs:
            return True
        if self.lag_s <= 0:
            return False
        began = self.transcript.began
        return (began is None or mtime >= began) and now - mtime <= self.lag_s


def transcripts_of(
    event: str | None,
    transcript_path: str | None,
    agent_transcript_path: str | None,
    session_id: str | None,
) -> list[Path]:
    """The transcripts of the agent that stopped: a subagent's own for ``SubagentStop``; for
    a session's ``Stop``, its transcript and its subagents' beside it."""
    if event == "SubagentStop":
        # transcript_path is then the parent session's: its writes are not this agent's.
        return [Path(agent_transcript_path)] if agent_transcript_path else []
    if not transcript_path:
        return []
    main = Path(transcript_path)
    return [main, *subagent_transcripts(main, session_id or "")]


def ownership(
    paths: list[Path], timeout_s: float, now: float, written: Written | None = None
) -> Ownership:
    """The rule for one stop, from the agent's transcripts (``transcripts_of``); their lines
    are Claude Code's unless ``written`` reads another runtime's."""
    window = now - timeout_s
    if not paths:
        return Ownership(None, window, "window")
    transcript = read_transcripts(paths, written=written)
    if transcript is not None:
        return Ownership(transcript, window, "transcript")
    born = began_of(paths[0])
    if born is None:
        try:
            birth = getattr(paths[0].stat(), "st_birthtime", None)
        except OSError:
            birth = None
        born = birth if isinstance(birth, float) else None
    since = born if born is not None else window
    return Ownership(None, since, "transcript unreadable")


def files_ownership(
    files: list[str],
    timeout_s: float,
    now: float,
    *,
    named: Iterable[str] = (),
    lag_s: float = LAG_S,
) -> Ownership:
    """The rule when the runtime names the files the session wrote: those files are its own
    (and the task directories ``named`` otherwise, by its shell commands), and, as the
    runtime's record may lag the last write, the ones written in the last ``lag_s`` (0 for a
    record known to be whole)."""
    dirs: set[str] = set(named)
    for path in files:
        dirs |= task_dirs_named(path)
    return Ownership(Transcript(frozenset(dirs), None), now - timeout_s, "files", lag_s)


def window_ownership(transcript: Path | None, timeout_s: float, now: float) -> Ownership:
    """The rule when the transcript does not say what the agent wrote: files last written
    within the operation's timeout, and not before the transcript's first line's time."""
    since = now - timeout_s
    began = began_of(transcript) if transcript is not None else None
    if began is not None and since < began <= now:
        since = began
    return Ownership(None, since, "window")
