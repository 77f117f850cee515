"""OpenCode's protocol, spoken with postflightd's own plugin (``postflightd hook opencode``).

OpenCode has no hook that runs before its agent stops: the plugin ``.opencode/plugins/
postflightd.ts`` (written by ``postflightd init``) listens for the session going idle, runs
this command, and when the answer asks the agent to go on, sends the reason to the session as
a new prompt (so it arrives after the turn, not before it ends).

Input on stdin, from the plugin: ``{"session_id": str, "cwd": str, "files": [the absolute
paths the session's tool parts wrote], "attempt": int}`` (how many times in a row the plugin
already sent the agent back).

Answer on stdout: ``{}`` lets it be; ``{"decision": "block", "reason": ...}`` asks the agent
to go on; ``systemMessage`` is added when there is something for the person. Exit 0 always
(the plugin reads the answer; stderr is for its log), malformed stdin included: ``{}`` and
one line on stderr. Only a usage error (an unknown runtime) exits otherwise.

Loop guard: the plugin counts; an ``attempt`` of MAX_ATTEMPTS or more never blocks.

Whose files: those in ``files``, and, as the plugin's list may lag the last write, those
written in the last seconds (``hooks.ownership.files_ownership``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from postflightd.hooks.decision import Runtime, StopRequest, decision_answer
from postflightd.hooks.ownership import Ownership, files_ownership
from postflightd.hooks.stdin import HookInputError, count, directory

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

    def whose(timeout_s: float, now: float) -> Ownership:
        return files_ownership(files, timeout_s, now)

    return StopRequest((cwd,), attempt < MAX_ATTEMPTS, whose)


RUNTIME: Final = Runtime("opencode", parse, decision_answer, malformed_exit=0)
