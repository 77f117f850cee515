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

Trust: Codex 0.171.0 skips an untrusted hook without a word; ``project.codex_trust`` says
what trusts it (docs/hooks/codex.md).

Answer on stdout (``stop.command.output.schema.json`` and ``parse_completed`` in
``events/stop.rs``): exit 0 with empty stdout or ``{}`` lets the agent stop; exit 0 with
``{"decision": "block", "reason": ...}`` (a reason that is not blank, else the hook counts
as failed) sends the agent on with the reason as its next prompt; ``systemMessage`` is shown
to the person as a warning in Codex's interactive TUI only (below); the schema allows no other
field. Exit 2 blocks with stderr as the prompt, so the hook never exits 2; any other exit
code is a failed hook and the agent stops: malformed stdin is exit 1, one line on stderr.

Loop guard: ``stop_hook_active`` true means the agent is already going on because of a stop
hook: it is never blocked twice in a row (Codex has no cap of its own).

Whose files: the rollout at ``transcript_path`` (``Stop``) or ``agent_transcript_path``
(``SubagentStop``; ``transcript_path`` is then the parent's), read by ``hooks.rollout``; a
null or unreadable path falls back to the time window.

The person under ``codex exec``: measured on Codex CLI 0.171.0, ``codex exec`` shows a hook's
``systemMessage`` nowhere (not in its output, its ``--json`` events or the rollout), nor the
hook's stderr, and runs the hook in a session of its own with no terminal. So the message
also goes, appended, to the standard error of the ``codex exec`` process that runs the hook
(found up the hook's parents through ``/proc``), where ``codex exec`` prints its own progress;
under the TUI, which shows ``systemMessage``, and where there is no ``/proc``, nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from postflightd.hooks.decision import Runtime, StopRequest, Verdict, decision_answer
from postflightd.hooks.ownership import Ownership, ownership
from postflightd.hooks.parents import runtime_pid, tell_stderr_of
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

    session = text(doc, "session_id")
    return StopRequest((cwd,), not active, whose, text(doc, "agent_type"), session=session)


#: ``codex exec``'s subcommand and its alias.
EXEC_WORDS: Final = frozenset({b"exec", b"e"})


def _is_codex_exec(argv: list[bytes]) -> bool:
    return argv[0].rsplit(b"/", 1)[-1] == b"codex" and bool(EXEC_WORDS & set(argv[1:]))


def codex_exec_pid(start: int | None = None) -> int | None:
    """The ``codex exec`` process among this process's nearest parents, or None."""
    return runtime_pid(_is_codex_exec, start)


def tell_exec_person(message: str) -> bool:
    """Append ``message`` to the standard error of the ``codex exec`` running this hook;
    whether it was written."""
    return tell_stderr_of(codex_exec_pid(), message)


def render(verdict: Verdict) -> dict[str, Any]:
    """Claude Code's shape; the person's message also where ``codex exec`` shows it."""
    if verdict.message is not None:
        tell_exec_person(verdict.message)
    return decision_answer(verdict)


RUNTIME: Final = Runtime("codex", parse, render)
