"""Which metadata files a Gemini CLI agent wrote, from its chat record (Gemini's transcript).

Gemini CLI (0.61) records a session as JSON lines, ``chats/session-<time>-<id>.jsonl`` under
the project's temporary directory in its home (``~/.gemini/tmp/<project>/``); the hook gets
its path as ``transcript_path``. Its first line is the session's metadata, ``{"sessionId",
"projectHash", "startTime", "lastUpdated", "kind"}`` (``startTime`` is when it began, read by
``hooks.transcript``); each later line is a message appended as it happens, or a ``{"$set":
{...}}`` update of the record's fields (``lastUpdated``, or the whole ``messages`` list when
Gemini rewrites it). The model's tool calls are on its messages:

``{"type": "gemini", "content": ..., "toolCalls": [{"id", "name", "args": {...}, "result",
"status", ...}]}``

where ``write_file`` and ``replace`` name the file in ``args.file_path`` and
``run_shell_command`` runs ``args.command``. A message with tool calls is written once the
calls are done, before the model is asked again, so the agent's last write is in the record
when ``AfterAgent`` runs (measured by tests/runtimes/test_gemini.py).

The record is read with the same bounds as Claude Code's transcript (its last 4 MiB, regular
files only, lines that do not parse or are not of that shape skipped); when nothing in its
tail parses the hook falls back to the files' times.
"""

from __future__ import annotations

from typing import Any, Final

from postflightd.hooks.transcript import task_dirs_named

#: Gemini CLI's tools that write the file ``args.file_path`` names.
FILE_TOOLS: Final = frozenset({"write_file", "replace"})
#: Its shell tool, whose ``args.command`` may write one.
SHELL_TOOL: Final = "run_shell_command"


def chat_written(entry: Any) -> set[str]:
    """The task directories whose metadata file one line of a Gemini chat record writes."""
    if not isinstance(entry, dict):
        return set()
    update = entry.get("$set")
    if isinstance(update, dict):
        messages = update.get("messages")
        out: set[str] = set()
        if isinstance(messages, list):
            for message in messages:
                out |= _message_written(message)
        return out
    return _message_written(entry)


def _message_written(message: Any) -> set[str]:
    if not isinstance(message, dict) or message.get("type") != "gemini":
        return set()
    calls = message.get("toolCalls")
    if not isinstance(calls, list):
        return set()
    out: set[str] = set()
    for call in calls:
        if not isinstance(call, dict):
            continue
        name, args = call.get("name"), call.get("args")
        if not isinstance(args, dict):
            continue
        if name in FILE_TOOLS:
            text = args.get("file_path")
        elif name == SHELL_TOOL:
            text = args.get("command")
        else:
            continue
        if isinstance(text, str):
            out |= task_dirs_named(text)
    return out
