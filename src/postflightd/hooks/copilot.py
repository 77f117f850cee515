"""GitHub Copilot CLI's agentStop/subagentStop hook protocol (``postflightd hook copilot``).

Where the hook goes: ``.github/hooks/*.json``, ``{"version": 1, "hooks": {"agentStop":
[{"type": "command", "bash": "postflightd hook copilot", "timeoutSec": 30}]}}``; Copilot CLI
also runs the hooks of the repository's ``.claude/settings.json``, which is why ``hook
claude`` answers a Copilot input in this protocol (``hooks.claude.caller``).

Input on stdin (GitHub's hooks reference, https://docs.github.com/en/copilot/reference/hooks-reference,
"Hook event input payloads", and the ``agentStop`` entry added by
https://github.com/github/docs/pull/43876): an event configured in camelCase (``agentStop``,
``subagentStop``) gets camelCase fields: ``timestamp`` (Unix ms), ``cwd``, ``sessionId``,
``transcriptPath``, ``stopReason`` (``"end_turn"``), and for a subagent ``agentId`` and
``agentType`` (these two not confirmed: GitHub's pages we could read do not list a
subagent's fields); an event configured in PascalCase (``Stop``, ``SubagentStop``) gets the same
fields in snake_case, as Claude Code sends them. Both are read here.

Answer on stdout, exit 0 (same pages): ``{"decision": "block", "reason": ...}`` keeps the
agent going with the reason as its next prompt; ``{}`` lets it stop. Exit 2 with stderr is
only a warning there, the agent stops anyway (observed on Copilot CLI 1.0.41,
https://github.com/exospherehost/failproofai/pull/299), so a block is always the JSON answer.
The person's message is added as ``systemMessage``, as in Claude Code's answer (not in
GitHub's pages we could read, so not confirmed to be shown), and the same line goes to
stderr. Malformed stdin: exit 1 (any exit but 0 is a failed hook, the agent stops), one line
on stderr.

Loop guard: ``stop_hook_active`` (or ``stopHookActive``) true, when present, means the agent
already goes on because of a stop hook: never blocked twice in a row. Neither field is in
GitHub's pages we could read, nor is Copilot CLI's own cap (a forced stop after 8 blocks in
a row, as reported by others): without the field, that cap is the only bound.

Whose files: Copilot's transcript is its own event log, not a documented record of the
files each tool wrote, so the time window decides (``hooks.ownership.window_ownership``):
files last written within the operation's timeout, and not before the transcript's first
line's time.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from postflightd.hooks.decision import Runtime, StopRequest, decision_answer
from postflightd.hooks.ownership import Ownership, window_ownership
from postflightd.hooks.stdin import directory, flag, text


def parse(doc: Mapping[str, Any], env: Mapping[str, str]) -> StopRequest:
    cwd = directory(doc, "cwd")
    active = flag(doc, "stop_hook_active", "stopHookActive")
    found = text(doc, "transcriptPath", "transcript_path")
    transcript = Path(found) if found else None

    def whose(timeout_s: float, now: float) -> Ownership:
        return window_ownership(transcript, timeout_s, now)

    return StopRequest((cwd,), not active, whose, text(doc, "agentType", "agent_type"))


RUNTIME: Final = Runtime("copilot", parse, decision_answer, person="both")
