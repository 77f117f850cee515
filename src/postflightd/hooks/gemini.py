"""Gemini CLI's AfterAgent hook protocol (``postflightd hook gemini``).

Where the hook goes: ``.gemini/settings.json`` (the project's, in a trusted folder) or
``~/.gemini/settings.json``, under ``hooks.AfterAgent``: ``[{"hooks": [{"type": "command",
"command": "postflightd hook gemini", "timeout": 60000}]}]``, the timeout in milliseconds
(Gemini CLI's ``docs/hooks/reference.md``, "Configuration schema"; ``docs/hooks/index.md``
on project hooks needing a trusted folder).

Input on stdin (``docs/hooks/reference.md``, "Base input schema" and ``AfterAgent``):
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` (``AfterAgent``),
``timestamp`` (ISO 8601), ``prompt``, ``prompt_response``, ``stop_hook_active``.
``$GEMINI_PROJECT_DIR`` holds the project's root (``docs/hooks/index.md``).

Answer on stdout, exit 0 (same page, "Common output fields" and ``AfterAgent``):
``{"decision": "deny", "reason": ...}`` rejects the response and sends the reason to the
agent as a new prompt (``block`` is an alias of ``deny``); ``systemMessage`` is shown to
the person; ``{}`` lets the turn end. Stdout must hold nothing but that JSON. Exit 2 would
retry with stderr as the prompt, so the hook never exits 2; any other exit code is a
warning and the turn ends: malformed stdin is exit 1, one line on stderr.

Loop guard: ``stop_hook_active`` true means the hook runs in a retry it caused: never denied
again then. Gemini CLI sets it only when the retry's turn ends without a tool call (its
``GeminiClient.sendMessageStream``: the retry that calls a tool ends in a new turn, flag
false), so an agent that rewrites its file, still invalid, at every try is never stopped by
it; postflightd's own bound is (``hooks.bound``, in ``hooks.decision``).

Whose files: the session's chat record at ``transcript_path`` (``chats/session-*.jsonl``),
read by ``hooks.chat``: its ``write_file``, ``replace`` and ``run_shell_command`` calls alone
decide, as for Claude Code; an unreadable record falls back to the files' times, not before
its first line's ``startTime``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from postflightd.hooks.chat import chat_written
from postflightd.hooks.decision import (
    Runtime,
    StopRequest,
    Verdict,
    decision_answer,
    project_starts,
)
from postflightd.hooks.ownership import Ownership, ownership
from postflightd.hooks.stdin import directory, flag, text


def parse(doc: Mapping[str, Any], env: Mapping[str, str]) -> StopRequest:
    cwd = directory(doc, "cwd")
    active = flag(doc, "stop_hook_active")
    found = text(doc, "transcript_path")
    paths = [Path(found)] if found else []

    def whose(timeout_s: float, now: float) -> Ownership:
        return ownership(paths, timeout_s, now, written=chat_written)

    project_dir = env.get("GEMINI_PROJECT_DIR")
    starts = project_starts(cwd, [Path(project_dir)] if project_dir else [])
    return StopRequest(starts, not active, whose, session=text(doc, "session_id"))


def render(verdict: Verdict) -> dict[str, Any]:
    return decision_answer(verdict, "deny")


RUNTIME: Final = Runtime("gemini", parse, render)
