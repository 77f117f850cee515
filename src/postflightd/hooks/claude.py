"""Claude Code's Stop/SubagentStop hook protocol (``postflightd hook claude``).

Input on stdin (Claude Code's hooks reference, https://code.claude.com/docs/en/hooks, "Stop
and SubagentStop Input"): ``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``,
``hook_event_name`` (``Stop`` or ``SubagentStop``), ``stop_hook_active``; a ``SubagentStop``
adds ``agent_id``, ``agent_type`` and ``agent_transcript_path`` (Claude Code 2.0.42 and
later, reported missing from that reference in
https://github.com/anthropics/claude-code/issues/11726). ``$CLAUDE_PROJECT_DIR`` holds the
project's root: an agent that ran ``cd /tmp`` still belongs to it.

Answer on stdout, exit 0 (same reference, "Decision control"): ``{}`` lets the agent stop,
``{"decision": "block", "reason": ...}`` sends it back with the reason, ``systemMessage`` is
shown to the person. Exit 2 means "block and show stderr to the agent", so the hook never
exits 2; malformed stdin is exit 1 (a non-blocking error), one line on stderr.

Loop guard: ``stop_hook_active`` true means the agent is already going on because of a stop
hook: it is never blocked twice in a row.

Whose files: Claude Code's JSON-lines transcripts (``hooks.transcript``): the subagent's own
(``agent_transcript_path``) for ``SubagentStop``, the session's and its subagents' beside it
for ``Stop``.

The caller: GitHub Copilot CLI and Cursor also run the hooks of ``.claude/settings.json``,
with their own input and answer. ``caller`` tells them from the input's shape: Cursor's
(``conversation_id``, ``workspace_roots``, ``loop_count``) is answered in Cursor's protocol,
Copilot's, camelCase (``sessionId``, ``transcriptPath``, ``stopReason``, or an
``agentStop``/``subagentStop`` event) or snake_case as Copilot CLI sends it to the hooks of
``.claude/settings.json`` (``stop_reason``, ``parent_agent_id``: Claude Code sends neither), in
Copilot's; any other shape in Claude Code's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from postflightd.hooks.decision import Runtime, StopRequest, decision_answer, project_starts
from postflightd.hooks.stdin import directory, flag, text

if TYPE_CHECKING:
    from postflightd.hooks.ownership import Ownership

#: Keys only Cursor's input has.
CURSOR_KEYS: Final = frozenset({"conversation_id", "workspace_roots", "loop_count"})
#: Keys only Copilot CLI's camelCase input has.
COPILOT_KEYS: Final = frozenset({"sessionId", "transcriptPath", "stopReason", "agentId"})
COPILOT_EVENTS: Final = frozenset({"agentStop", "subagentStop"})
#: Keys only Copilot CLI's snake_case input (of ``.claude/settings.json``'s hooks) has.
COPILOT_SNAKE_KEYS: Final = frozenset({"stop_reason", "parent_agent_id"})


def parse(doc: Mapping[str, Any], env: Mapping[str, str]) -> StopRequest:
    cwd = directory(doc, "cwd")
    active = flag(doc, "stop_hook_active")
    event = text(doc, "hook_event_name")
    transcript, agent_transcript = text(doc, "transcript_path"), text(doc, "agent_transcript_path")

    def whose(timeout_s: float, now: float) -> Ownership:
        # Asked only of a stop that found files: most find none, and skip the transcripts'
        # listing and the ownership module with its records.
        from postflightd.hooks.ownership import ownership, transcripts_of

        paths = transcripts_of(event, transcript, agent_transcript, text(doc, "session_id"))
        return ownership(paths, timeout_s, now)

    project_dir = env.get("CLAUDE_PROJECT_DIR")
    starts = project_starts(cwd, [Path(project_dir)] if project_dir else [])
    # A subagent shares its session's id: its own count is kept apart by its agent_id.
    session = text(doc, "session_id")
    agent_id = text(doc, "agent_id") if event == "SubagentStop" else None
    if session and agent_id:
        session = f"{session}/{agent_id}"
    return StopRequest(starts, not active, whose, text(doc, "agent_type"), session=session)


RUNTIME: Final = Runtime("claude", parse, decision_answer)


def caller(doc: Mapping[str, Any]) -> Runtime:
    """Whose protocol the input of ``hook claude`` is in: Cursor's, Copilot CLI's, or Claude
    Code's (any other shape, as before)."""
    # Each module imported only for its own input: Claude Code's stop needs neither.
    if CURSOR_KEYS & doc.keys():
        from postflightd.hooks import cursor

        return cursor.RUNTIME
    copilot_shaped = (COPILOT_KEYS | COPILOT_SNAKE_KEYS) & doc.keys()
    if copilot_shaped or doc.get("hook_event_name") in COPILOT_EVENTS:
        from postflightd.hooks import copilot

        return copilot.RUNTIME
    return RUNTIME
