"""OpenCode's protocol, spoken with postflightd's own plugin (``postflightd hook opencode``).

OpenCode has no hook that runs before its agent stops: the plugin ``.opencode/plugins/
postflightd.ts`` (written by ``postflightd init``) listens for the session going idle, runs
this command, and when the answer asks the agent to go on, sends the reason to the session as
a new prompt (so it arrives after the turn, not before it ends).

Input on stdin, from the plugin: ``{"session_id": str, "cwd": str, "files": [the absolute
paths the session's tool parts wrote], "commands": [its shell commands], "attempt": int}``
(how many times in a row the plugin already sent the agent back).

Answer on stdout: ``{}`` lets it be; ``{"decision": "block", "reason": ...}`` asks the agent
to go on; ``systemMessage`` is added when there is something for the person. Exit 0 always
(the plugin reads the answer; stderr is for its log), malformed stdin included: ``{}`` and
one line on stderr. Only a usage error (an unknown runtime) exits otherwise.

Loop guard: the plugin counts; an ``attempt`` of MAX_ATTEMPTS or more never blocks.

Whose files: those in ``files`` and those a command of ``commands`` names (as a transcript's
shell commands are read). OpenCode awaits the plugin's ``tool.execute.after`` before a tool's
result goes back, so the two lists are whole when the session goes idle. A plugin of an older
postflightd sends no ``commands`` and cannot see what a shell command wrote: for it, files
written in the last seconds count too (``hooks.ownership.files_ownership``'s lag window).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from postflightd.hooks.decision import Runtime, StopRequest, decision_answer
from postflightd.hooks.ownership import Ownership, files_ownership
from postflightd.hooks.stdin import HookInputError, count, directory, text
from postflightd.hooks.transcript import task_dirs_named

#: The attempt from which the agent is no longer sent back.
MAX_ATTEMPTS: Final = 3
#: Paths read from ``files``: a session writes far fewer metadata files than this.
MAX_FILES: Final = 10_000


def parse(doc: Mapping[str, Any], env: Mapping[str, str]) -> StopRequest:
    cwd = directory(doc, "cwd")
    attempt = count(doc, "attempt")
    given = doc.get("files", [])
    if not isinstance(given, list) or not all(isinstance(f, str) for f in given):
        raise HookInputError('hook input "files" must be a list of paths')
    files = [f for f in given[:MAX_FILES] if "\0" not in f]
    commands = doc.get("commands")
    if commands is not None and (
        not isinstance(commands, list) or not all(isinstance(c, str) for c in commands)
    ):
        raise HookInputError('hook input "commands" must be a list of shell commands')
    named = sorted({d for c in (commands or [])[:MAX_FILES] for d in task_dirs_named(c)})

    def whose(timeout_s: float, now: float) -> Ownership:
        if commands is None:
            return files_ownership(files, timeout_s, now)
        return files_ownership(files, timeout_s, now, named=named, lag_s=0.0)

    session = text(doc, "session_id")
    return StopRequest((cwd,), attempt < MAX_ATTEMPTS, whose, session=session)


RUNTIME: Final = Runtime("opencode", parse, decision_answer, malformed_exit=0)
