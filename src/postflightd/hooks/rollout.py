"""Which metadata files a Codex agent wrote, from its rollout (Codex's transcript).

A rollout is JSON lines, one ``RolloutLine`` each: ``{"timestamp": ..., "type": ...,
"payload": {...}}`` (``codex-rs/protocol/src/protocol.rs``, ``RolloutLine`` and the
``RolloutItem`` enum tagged by ``type`` with its content in ``payload``; the first line is
the ``session_meta``). The model's tool calls are the ``response_item`` lines whose payload
is one of (``codex-rs/protocol/src/models.rs``, ``ResponseItem``):

- ``{"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch\\n***
  Add File: specs/259_x/.return-meta.json\\n+{...}\\n*** End Patch", "call_id": ...}``: the
  patch's ``*** Add File:``, ``*** Update File:`` and ``*** Move to:`` headers name the files
  it writes (its body, which may quote any path, does not count);
- ``{"type": "function_call", "name": ..., "arguments": "<JSON text>", "call_id": ...}``:
  ``apply_patch`` as a function (its ``input`` or ``patch`` argument read as above), or a
  shell tool (``shell``, ``exec_command``, ...) whose ``command`` (a list of words or a
  string) or ``cmd`` names the file (``cat > specs/259_x/.return-meta.json``);
- ``{"type": "local_shell_call", "action": {"type": "exec", "command": [...]}}``: the same.

A rollout is no more a stable interface than Claude Code's transcript: it is read with the
same bounds (its last 4 MiB, regular files only, lines that do not parse or are not of that
shape skipped), and when nothing in its tail parses the hook falls back to the files' times.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from postflightd.hooks.transcript import task_dirs_named

#: The ``apply_patch`` headers naming a file the patch writes.
PATCH_HEADERS: Final = ("*** Add File:", "*** Update File:", "*** Move to:")


def patch_targets(patch: str) -> set[str]:
    """The task directories whose metadata file an ``apply_patch`` input writes."""
    out: set[str] = set()
    for line in patch.splitlines():
        stripped = line.strip()
        for header in PATCH_HEADERS:
            if stripped.startswith(header):
                out |= task_dirs_named(stripped[len(header) :].strip())
    return out


def rollout_written(entry: Any) -> set[str]:
    """The task directories whose metadata file one rollout line's tool call writes."""
    if not isinstance(entry, dict) or entry.get("type") != "response_item":
        return set()
    item = entry.get("payload")
    if not isinstance(item, dict):
        return set()
    kind, name = item.get("type"), item.get("name")
    if kind == "custom_tool_call":
        given = item.get("input")
        if not isinstance(given, str):
            return set()
        return patch_targets(given) if name == "apply_patch" else task_dirs_named(given)
    if kind == "function_call":
        return _function_call(name, item.get("arguments"))
    if kind == "local_shell_call":
        action = item.get("action")
        return _command(action.get("command")) if isinstance(action, dict) else set()
    return set()


def _function_call(name: object, arguments: object) -> set[str]:
    if not isinstance(arguments, str):
        return set()
    try:
        args = json.loads(arguments)
    except (ValueError, RecursionError):
        return set()
    if not isinstance(args, dict):
        return set()
    if name == "apply_patch":
        patch = args.get("input", args.get("patch"))
        return patch_targets(patch) if isinstance(patch, str) else set()
    return _command(args.get("command", args.get("cmd")))


def _command(command: object) -> set[str]:
    """A shell command, as a string or a list of words (``["bash", "-lc", "..."]``)."""
    if isinstance(command, str):
        return task_dirs_named(command)
    if isinstance(command, list):
        words: Iterable[str] = (w for w in command if isinstance(w, str))
        return task_dirs_named(" ".join(words))
    return set()
