"""Codex CLI's Stop/SubagentStop hook protocol (``postflightd hook codex``).

Where the hook goes (Codex's hooks page, https://developers.openai.com/codex/hooks):
``<repo>/.codex/hooks.json`` (loaded only when the project's ``.codex/`` layer is trusted) or
``~/.codex/hooks.json``, under ``hooks.Stop`` and ``hooks.SubagentStop`` in Claude Code's
shape; a hook that is new or changed is skipped until the person reviews and trusts it in
``/hooks`` (trust is kept per hash of its definition).

Input on stdin (Codex's source, ``codex-rs/hooks/schema/generated/stop.command.input.schema.json``
and ``subagent-stop.command.input.schema.json``, built in ``codex-rs/hooks/src/events/stop.rs``):
``session_id``, ``turn_id``, ``transcript_path`` (a string or null), ``cwd``,
``hook_event_name`` (``Stop`` or ``SubagentStop``), ``model``, ``permission_mode``,
``stop_hook_active``, ``last_assistant_message`` (a string or null); ``SubagentStop`` adds
``agent_id``, ``agent_type`` and ``agent_transcript_path`` (a string or null).

Answer on stdout (``stop.command.output.schema.json`` and ``parse_completed`` in
``events/stop.rs``): exit 0 with empty stdout or ``{}`` lets the agent stop; exit 0 with
``{"decision": "block", "reason": ...}`` (a reason that is not blank, else the hook counts
as failed) sends the agent on with the reason as its next prompt; ``systemMessage`` is shown
to the person as a warning; the schema allows no other field. Exit 2 blocks with stderr as
the prompt, so the hook never exits 2; any other exit code is a failed hook and the agent
stops: malformed stdin is exit 1, one line on stderr.

Loop guard: ``stop_hook_active`` true means the agent is already going on because of a stop
hook: it is never blocked twice in a row (Codex has no cap of its own).

Whose files: the rollout at ``transcript_path`` (``Stop``) or ``agent_transcript_path``
(``SubagentStop``; ``transcript_path`` is then the parent's), read by ``hooks.rollout``; a
null or unreadable path falls back to the time window.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from postflightd.hooks.decision import Runtime, StopRequest, decision_answer
from postflightd.hooks.ownership import Ownership, ownership
from postflightd.hooks.rollout import rollout_written
from postflightd.hooks.stdin import directory, flag, text


def parse(doc: Mapping[str, Any], env: Mapping[str, str]) -> StopRequest:
    cwd = directory(doc, "cwd")
    active = flag(doc, "stop_hook_active")
    if text(doc, "hook_event_name") == "SubagentStop":
        found = text(doc, "agent_transcript_path")
    else:
        found = text(doc, "transcript_path")
    paths = [Path(found)] if found else []

    def whose(timeout_s: float, now: float) -> Ownership:
        return ownership(paths, timeout_s, now, written=rollout_written)

    return StopRequest((cwd,), not active, whose, text(doc, "agent_type"))


RUNTIME: Final = Runtime("codex", parse, decision_answer)
