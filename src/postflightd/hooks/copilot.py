"""GitHub Copilot CLI's agentStop/subagentStop hook protocol (``postflightd hook copilot``).

Where the hook goes: ``.github/hooks/*.json``, ``{"version": 1, "hooks": {"agentStop":
[{"type": "command", "bash": "postflightd hook copilot", "timeoutSec": 30}]}}``; Copilot CLI
also runs the Stop and SubagentStop hooks of the repository's ``.claude/settings.json``, with
the same input in snake_case, which is why ``hook claude`` answers that input in this protocol
(``hooks.claude.caller``).

Input on stdin, as Copilot CLI 1.0.102 sends it (tests/runtimes/test_copilot.py captures it
into tests/hooks/fixtures/copilot/): an event configured in camelCase (``agentStop``,
``subagentStop``) gets ``sessionId``, ``timestamp`` (Unix ms), ``cwd``, ``transcriptPath``
(the session's ``events.jsonl``), ``stopReason`` (``"end_turn"``) and ``stop_hook_active``
(snake_case even there); a subagent's stop adds ``agentId``, ``agentType`` and
``parentAgentId``. A subagent's end runs both events: ``agentStop`` with the subagent's id as
``sessionId``, then ``subagentStop`` with the parent's. An event of ``.claude/settings.json``
(``Stop``, ``SubagentStop``) gets the same fields in snake_case, ``hook_event_name`` and
``timestamp`` as an ISO 8601 string. Both shapes are read here.

Answer on stdout, exit 0: ``{"decision": "block", "reason": ...}`` keeps the agent going with
the reason as its next prompt; ``{}`` lets it stop (GitHub's hooks reference,
https://docs.github.com/en/copilot/reference/hooks-reference). Exit 2 with stderr is only a
warning there, the agent stops anyway, so a block is always the JSON answer. The person's
message is added as ``systemMessage``, as in Claude Code's answer, and the same line goes to
stderr. Measured on Copilot CLI 1.0.102, ``copilot -p`` shows neither (not in its output,
nor in the session's ``events.jsonl``), so the message is also appended to the standard error
of the ``copilot -p`` process that runs the hook (``hooks.parents``); the interactive screen
is never written to. Malformed stdin: exit 1 (any exit but 0 is a failed hook, the agent
stops), one line on stderr.

Loop guard: ``stop_hook_active`` true means the agent already goes on because of a stop hook:
never blocked twice in a row. (Copilot CLI also ends the turn itself after 8 blocks in a row.)

Run twice per stop: with both hook files set up, Copilot CLI runs the hook for each, one after
the other, with the same session, agent and time: ``stop`` names it, and the second run
answers ``{}`` without post-flighting again (``hooks.once``).

Whose files: ``events.jsonl`` records every tool call before it runs, the subagents' too
(theirs carry ``parentToolCallId``): ``assistant.message`` lists ``toolRequests`` (``name``,
``arguments``), ``tool.execution_start`` repeats one (``toolName``, ``arguments``), and
``tool.execution_complete`` lists the files it changed (``fileEdits[].path``). ``create`` and
``edit`` name their file in ``arguments.path``, ``bash`` runs ``arguments.command``. The record
alone decides (``hooks.ownership``, as for Claude Code): a session's stop counts its own and
its subagents' calls; a subagent's, the subagents' calls alone (the record does not say which
subagent made a call).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from postflightd.hooks.decision import Runtime, StopRequest, Verdict, decision_answer
from postflightd.hooks.ownership import Ownership, ownership
from postflightd.hooks.parents import runtime_pid, tell_stderr_of
from postflightd.hooks.stdin import directory, flag, text
from postflightd.hooks.transcript import task_dirs_named
from postflightd.timestamps import parse_timestamp

#: Copilot CLI's tools that write the file named in ``arguments.path``.
FILE_TOOLS: Final = frozenset({"create", "edit"})
#: Its shell tool, running ``arguments.command``.
SHELL_TOOLS: Final = frozenset({"bash"})


def parse(doc: Mapping[str, Any], env: Mapping[str, str]) -> StopRequest:
    cwd = directory(doc, "cwd")
    active = flag(doc, "stop_hook_active", "stopHookActive")
    found = text(doc, "transcriptPath", "transcript_path")
    paths = [Path(found)] if found else []
    agent = text(doc, "agentId", "agent_id")
    written = subagent_written if agent is not None else session_written

    def whose(timeout_s: float, now: float) -> Ownership:
        return ownership(paths, timeout_s, now, written=written)

    agent_type = text(doc, "agentType", "agent_type")
    session = text(doc, "sessionId", "session_id")
    if session and agent:  # a subagent's own count, apart from its session's
        session = f"{session}/{agent}"
    return StopRequest((cwd,), not active, whose, agent_type, stop=stop_name(doc), session=session)


def stop_name(doc: Mapping[str, Any]) -> str | None:
    """The stop's own name, the same in both shapes of one stop: its session, its agent and
    its time in milliseconds; None when the input lacks the session or the time."""
    session = text(doc, "sessionId", "session_id")
    when = doc.get("timestamp")
    if isinstance(when, str):
        parsed = parse_timestamp(when)
        when = round(parsed.timestamp() * 1000) if parsed is not None else None
    if session is None or isinstance(when, bool) or not isinstance(when, int):
        return None
    agent = text(doc, "agentId", "agent_id") or ""
    return f"copilot\0{session}\0{agent}\0{when}"


def events_written(entry: Any, subagents_only: bool = False) -> set[str]:
    """The task directories whose metadata file one line of ``events.jsonl`` says a tool call
    writes; with ``subagents_only``, only a subagent's calls count."""
    if not isinstance(entry, dict):
        return set()
    data = entry.get("data")
    if not isinstance(data, dict):
        return set()
    if subagents_only and not data.get("parentToolCallId"):
        return set()
    kind = entry.get("type")
    out: set[str] = set()
    if kind == "assistant.message":
        requests = data.get("toolRequests")
        for call in requests if isinstance(requests, list) else []:
            if isinstance(call, dict):
                out |= _call(call.get("name"), call.get("arguments"))
    elif kind == "tool.execution_start":
        out |= _call(data.get("toolName"), data.get("arguments"))
    elif kind == "tool.execution_complete":
        edits = data.get("fileEdits")
        for edit in edits if isinstance(edits, list) else []:
            path = edit.get("path") if isinstance(edit, dict) else None
            if isinstance(path, str):
                out |= task_dirs_named(path)
    return out


def session_written(entry: Any) -> set[str]:
    return events_written(entry)


def subagent_written(entry: Any) -> set[str]:
    return events_written(entry, subagents_only=True)


def _call(name: object, arguments: object) -> set[str]:
    if not isinstance(arguments, dict):
        return set()
    if name in FILE_TOOLS:
        found = arguments.get("path")
    elif name in SHELL_TOOLS:
        found = arguments.get("command")
    else:
        return set()
    return task_dirs_named(found) if isinstance(found, str) else set()


#: Copilot CLI's prompt mode: it runs one prompt without its interactive screen.
PROMPT_FLAGS: Final = frozenset({b"-p", b"--prompt"})


def _is_copilot_prompt(argv: list[bytes]) -> bool:
    name = argv[0].rsplit(b"/", 1)[-1]
    flags = {a.split(b"=", 1)[0] for a in argv[1:]}
    return name == b"copilot" and bool(PROMPT_FLAGS & flags)


def render(verdict: Verdict) -> dict[str, Any]:
    """Claude Code's shape; the person's message also where ``copilot -p`` shows it."""
    if verdict.message is not None:
        tell_stderr_of(runtime_pid(_is_copilot_prompt), verdict.message)
    return decision_answer(verdict)


RUNTIME: Final = Runtime("copilot", parse, render, person="both")
