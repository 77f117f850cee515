"""Adapter for an agent runtime's Stop/SubagentStop hook (``postflightd hook claude``).

The runtime sends a JSON object on stdin (``cwd``, ``stop_hook_active``, ``agent_type``, ...)
and reads a decision on stdout: ``{}`` lets the agent stop, ``{"decision": "block", "reason":
...}`` sends it back to repair its metadata. A hook must never break the session: on any
well-formed input it exits 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from postflightd.errors import UsageError
from postflightd.findings import Severity
from postflightd.pipeline import FileReport, Outcome

MAX_HOOK_INPUT = 1024 * 1024
#: Findings listed in a block reason, per file; the agent needs the first few, not a wall.
MAX_REASONS_PER_FILE = 8


@dataclass(frozen=True, slots=True)
class HookInput:
    cwd: Path
    stop_hook_active: bool
    agent_type: str | None
    event: str | None


def parse_hook_input(raw: bytes) -> HookInput:
    """The hook's stdin as a HookInput; malformed input is a UsageError (exit 2)."""
    if len(raw) > MAX_HOOK_INPUT:
        raise UsageError(
            "hook input on stdin is larger than 1 MiB; expected the hook's JSON object"
        )
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise UsageError(
            f"hook input on stdin is not JSON ({exc}); expected the hook's JSON object"
        ) from None
    if not isinstance(doc, dict):
        raise UsageError('hook input on stdin must be a JSON object with at least "cwd"')
    cwd = doc.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        raise UsageError('hook input has no "cwd" string: cannot tell which project stopped')
    active = doc.get("stop_hook_active", False)
    if not isinstance(active, bool):
        raise UsageError('hook input "stop_hook_active" must be true or false')
    agent = doc.get("agent_type")
    event = doc.get("hook_event_name")
    return HookInput(
        cwd=Path(cwd),
        stop_hook_active=active,
        agent_type=agent if isinstance(agent, str) else None,
        event=event if isinstance(event, str) else None,
    )


def find_root(start: Path, specs_dir: str) -> Path | None:
    """The nearest directory at or above ``start`` that holds the specs directory."""
    try:
        here = start.resolve()
    except OSError:
        return None
    for candidate in (here, *here.parents):
        if (candidate / specs_dir).is_dir():
            return candidate
    return None


def decision(reports: Sequence[FileReport], stop_hook_active: bool) -> Mapping[str, Any]:
    """``{}`` or a block naming each invalid final file and exactly what to fix."""
    invalid = [r for r in reports if r.outcome is Outcome.INVALID]
    if not invalid or stop_hook_active:
        return {}
    lines = ["postflightd: metadata to repair before stopping:"]
    for report in invalid:
        lines.append(f"{report.rel_path}:")
        shown = [f for f in report.findings if f.severity is Severity.ERROR] or report.findings
        for f in shown[:MAX_REASONS_PER_FILE]:
            where = f" ({f.location})" if f.location else ""
            lines.append(f"  - {f.code}{where}: {f.message}")
        if len(shown) > MAX_REASONS_PER_FILE:
            lines.append(f"  - ... and {len(shown) - MAX_REASONS_PER_FILE} more")
    lines.append(
        "Rewrite the file(s) with these fixed; postflightd applies them when they validate."
    )
    return {"decision": "block", "reason": "\n".join(lines)}
