"""Cursor's stop hook protocol (``postflightd hook cursor``).

Where the hook goes: ``.cursor/hooks.json`` (or ``~/.cursor/hooks.json``), ``{"version": 1,
"hooks": {"stop": [{"command": "postflightd hook cursor", "loop_limit": 5}]}}``; Cursor can
also run the hooks of ``.claude/settings.json``, which is why ``hook claude`` answers a
Cursor input in this protocol (``hooks.claude.caller``).

Input on stdin (Cursor's hooks documentation, https://cursor.com/docs/hooks, as quoted in
https://github.com/eqtylab/cupcake/pull/77 and https://cupcake.eqtylab.io/reference/harnesses/cursor;
we could not read cursor.com itself): every event carries ``hook_event_name`` (``stop``),
``conversation_id``, ``generation_id``, ``workspace_roots`` (a list of the workspace's
folders; there is no ``cwd``), ``transcript_path`` (may be null), optionally ``model``,
``cursor_version``, ``user_email``; ``stop`` adds ``status`` (``completed``, ``aborted`` or
``error``) and ``loop_count`` (how many follow-ups stop hooks already sent in this chain).

Answer on stdout, exit 0 (same sources): ``{"followup_message": ...}`` submits the text as
the next user message, so the agent goes on; ``{}`` lets it stop. The stop hook's answer has
no field for the person, so the person's message goes to stderr (where Cursor's hooks output
shows it, as far as we could tell: not confirmed). The hook never exits 2 (Cursor's "deny"
for the events that can be denied); malformed stdin is exit 1 (a failed hook: the agent
stops), one line on stderr.

Loop guard: Cursor caps follow-ups with the hook's ``loop_limit`` (default 5), which the
hook is not told; so the agent is sent back only when ``loop_count`` is 0 (never twice in a
row, as with Claude Code's ``stop_hook_active``), and never after the person aborted it or
it stopped on an error (``status`` other than ``completed``).

Whose files: Cursor's transcripts do not show the agent's writes, so the time window decides
(``hooks.ownership.window_ownership``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from postflightd.hooks.decision import Runtime, StopRequest, Verdict, project_starts
from postflightd.hooks.ownership import Ownership, window_ownership
from postflightd.hooks.stdin import HookInputError, count, text

#: Follow-ups a stop chain may already hold for the agent to be sent back once more.
MAX_LOOP_COUNT: Final = 0


def parse(doc: Mapping[str, Any], env: Mapping[str, str]) -> StopRequest:
    starts = _starts(doc)
    loops = count(doc, "loop_count")
    status = text(doc, "status")
    may_block = loops <= MAX_LOOP_COUNT and status in (None, "completed")
    found = text(doc, "transcript_path")
    transcript = Path(found) if found else None

    def whose(timeout_s: float, now: float) -> Ownership:
        return window_ownership(transcript, timeout_s, now)

    return StopRequest(starts, may_block, whose, session=text(doc, "conversation_id"))


def _starts(doc: Mapping[str, Any]) -> tuple[Path, ...]:
    """The workspace's folders (and a ``cwd``, when a version sends one, within them)."""
    cwd = text(doc, "cwd")
    roots = doc.get("workspace_roots")
    folders = []
    if isinstance(roots, list):
        folders = [Path(r) for r in roots if isinstance(r, str) and r and "\0" not in r]
    starts = project_starts(Path(cwd) if cwd and "\0" not in cwd else None, folders)
    if not starts:
        raise HookInputError(
            'hook input has no "workspace_roots" list of folders: cannot tell which project stopped'
        )
    return starts


def render(verdict: Verdict) -> dict[str, Any]:
    return {} if verdict.reason is None else {"followup_message": verdict.reason}


RUNTIME: Final = Runtime("cursor", parse, render, person="stderr")
