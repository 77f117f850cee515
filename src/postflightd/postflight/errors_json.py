"""errors.json: its records, merged without duplicates, and its text.

Pure: the write path (``pipeline.records``) reads the file, merges and writes what this
returns. ``ErrorRecord`` is the shape of a record postflightd writes; records another tool
wrote are kept exactly as they were read, whatever their shape.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TypedDict

from postflightd.timestamps import iso_timestamp, utc


class ErrorContext(TypedDict):
    """Where the error happened: the run's session, its task, its agent and its file."""

    session_id: str | None
    task: int | None
    agent_type: str | None
    file: str


class ErrorTrajectory(TypedDict):
    """The delegation path of the agent that failed, and its depth in it."""

    delegation_path: list[str] | None
    failed_at_depth: int | None


class ErrorRecovery(TypedDict):
    suggested_action: str
    auto_recoverable: bool


class ErrorRecord(TypedDict):
    """One errors.json record as postflightd writes it, keys in the order written."""

    id: str
    timestamp: str
    type: str
    severity: str
    message: str
    context: ErrorContext
    trajectory: ErrorTrajectory
    recovery: ErrorRecovery
    fix_status: str


def error_record(
    kind: str,
    message: str,
    *,
    session: str | None,
    task: int | None,
    agent_type: str | None,
    file: str,
    delegation_path: Sequence[str] | None,
    now: datetime,
    n: int,
    severity: str = "high",
    recoverable: bool = True,
    suggested_action: str = "",
) -> ErrorRecord:
    """One errors.json record: ``err_{unix seconds}_{n}``, what failed, where, how to recover."""
    path = list(delegation_path) if delegation_path is not None else None
    # delegation_path = [orchestrator, command, agent, ...]: the agent at depth d is entry d+1.
    failed_at_depth = len(path) - 2 if path is not None and len(path) >= 2 else None
    return {
        "id": f"err_{int(utc(now).timestamp())}_{n}",
        "timestamp": iso_timestamp(now),
        "type": kind,
        "severity": severity,
        "message": message,
        "context": {
            "session_id": session,
            "task": task,
            "agent_type": agent_type,
            "file": file,
        },
        "trajectory": {"delegation_path": path, "failed_at_depth": failed_at_depth},
        "recovery": {"suggested_action": suggested_action, "auto_recoverable": recoverable},
        "fix_status": "unfixed",
    }


def error_key(record: Mapping[str, Any]) -> tuple[str, str, str]:
    """What makes two records the same error: their session, type and message."""
    context = record.get("context")
    session = context.get("session_id") if isinstance(context, Mapping) else None
    # json.dumps makes the key hashable and total even for odd hand-written records.
    return (
        json.dumps(session, sort_keys=True),
        json.dumps(record.get("type"), sort_keys=True),
        json.dumps(record.get("message"), sort_keys=True),
    )


_ID_RE: Final = re.compile(r"^(err_\d+_)(\d+)$")


def merge_errors(
    existing: Sequence[Mapping[str, Any]], new: Sequence[ErrorRecord]
) -> tuple[list[dict[str, Any]], int]:
    """Append the records of ``new`` not already present (same session, type and message).

    Returns the merged list and how many were added. An added record whose id is already
    taken (two commits in the same second) gets the next free ``n``, so ids stay unique.
    """
    # Existing entries are kept exactly as they are, even ones another tool wrote oddly.
    merged: list[Any] = list(existing)
    seen = {error_key(record) for record in merged if isinstance(record, Mapping)}
    ids = {
        record["id"]
        for record in merged
        if isinstance(record, Mapping) and isinstance(record.get("id"), str)
    }
    added = 0
    for record in new:
        key = error_key(record)
        if key in seen:
            continue
        copied = copy.deepcopy(dict(record))
        record_id = copied.get("id")
        match = _ID_RE.match(record_id) if isinstance(record_id, str) else None
        if match is not None:
            n = int(match.group(2))
            while record_id in ids:
                n += 1
                record_id = f"{match.group(1)}{n}"
            copied["id"] = record_id
        merged.append(copied)
        seen.add(key)
        if isinstance(record_id, str):
            ids.add(record_id)
        added += 1
    return merged, added


def errors_text(records: list[Any]) -> str:
    """errors.json as text; a lone surrogate in a record is written as its JSON escape.

    errors.json is our own log, so an odd value an agent sent (a ``\\ud800``) is kept, escaped,
    rather than failing every record of the batch with it.
    """
    text = json.dumps(records, indent=2, ensure_ascii=False) + "\n"
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
