"""errors.json: its records, merged without duplicates, and its text.

Pure: the write path (``pipeline.records``) reads the file, merges and writes what this
returns. ``ErrorRecord`` is the shape of a record postflightd writes; records another tool
wrote are kept exactly as they were read, whatever their shape.

errors.json is kept in the form the project keeps it (``error_list``): a bare JSON array of
records, or the envelope agent systems write, an object whose ``"errors"`` key is that array
beside keys of their own (``_schema_version``, ``_last_updated``, ``_schema``,
``aggregations`` ...). An envelope is rewritten by ``state_text.render_state``, as state.json
is: only ``errors`` and ``_last_updated`` change, every other byte stays.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence, Set
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypedDict

from postflightd.postflight.state_text import render_state
from postflightd.timestamps import iso_timestamp, utc

# The shapes of the records, for the type checker alone: a TypedDict's value is a plain
# dict, and making its class at run time compiles each field's annotation (a
# typing.ForwardRef each): 3 million instructions, with transform's two, of every stop that
# applies a file.
if TYPE_CHECKING:

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


#: The forms of errors.json postflightd reads and writes, as its messages name them.
ACCEPTED_FORMS: Final = 'a JSON array of records, or an object whose "errors" key is that array'

#: The key of an envelope that holds its records, and the one that says when it last changed.
ERRORS_KEY: Final = "errors"
LAST_UPDATED_KEY: Final = "_last_updated"


def error_list(doc: Any) -> list[Any] | str:
    """The records of an errors.json document, or why it holds none postflightd can add to.

    A bare array is the records; an object whose ``"errors"`` is an array (the envelope) holds
    them there. Anything else is neither form: the reason names what the file is instead.
    """
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        if ERRORS_KEY not in doc:
            return f'an object without an "{ERRORS_KEY}" key'
        records = doc[ERRORS_KEY]
        if isinstance(records, list):
            return records
        return f'an object whose "{ERRORS_KEY}" is {_json_kind(records)}, not an array'
    return _json_kind(doc)


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return "a number"


#: The fix_status of a record nobody has dealt with yet, and of one that is dealt with.
UNFIXED: Final = "unfixed"
FIXED: Final = "fixed"
VALIDATION_FAILED: Final = "validation_failed"


def mark_fixed(
    records: Sequence[Any], tasks: Set[int], meta_name: str
) -> tuple[list[Any], frozenset[int]]:
    """``records`` with each unfixed ``validation_failed`` record of a task in ``tasks`` set to
    ``"fix_status": "fixed"``, and the tasks that had one.

    Only a record about a metadata file (its ``context.file`` names ``meta_name``) is: a later
    file of the task was applied, so the invalid one it records is superseded. A record of
    another kind, of another status (``investigating``, a project's own ``resolved``) or about
    something else than a metadata file is left exactly as it was.
    """
    result: list[Any] = []
    fixed: set[int] = set()
    for record in records:
        if _fixed_by(record, tasks, meta_name):
            fixed.add(record["context"]["task"])
            result.append({**record, "fix_status": FIXED})  # the key keeps its place
        else:
            result.append(record)
    return result, frozenset(fixed)


def _fixed_by(record: Any, tasks: Set[int], meta_name: str) -> bool:
    if not isinstance(record, Mapping) or record.get("type") != VALIDATION_FAILED:
        return False
    if record.get("fix_status") != UNFIXED:
        return False
    context = record.get("context")
    if not isinstance(context, Mapping):
        return False
    task, file = context.get("task"), context.get("file")
    return (
        isinstance(task, int)
        and not isinstance(task, bool)
        and task in tasks
        and isinstance(file, str)
        and file.rsplit("/", 1)[-1] == meta_name
    )


def errors_text(records: list[Any]) -> str:
    """errors.json as a bare array; a lone surrogate in a record is written as its JSON escape.

    errors.json is our own log, so an odd value an agent sent (a ``\\ud800``) is kept, escaped,
    rather than failing every record of the batch with it.
    """
    return _escape_surrogates(json.dumps(records, indent=2, ensure_ascii=False) + "\n")


def document_text(original_text: str, original: Any, records: list[Any], now: datetime) -> str:
    """errors.json's new text: ``records`` in the form and the formatting of the file read.

    A bare array is written as ``errors_text`` writes it. An envelope gets ``records`` as its
    ``"errors"`` and, when it has the key, ``_last_updated`` set to ``now``; every other key
    and the file's layout (key order, indentation, one-line arrays, non-ASCII text, the
    trailing newline) stay as they were, spliced as state.json is (``render_state``).
    """
    if not isinstance(original, dict):
        return errors_text(records)
    new = dict(original)
    new[ERRORS_KEY] = records
    if LAST_UPDATED_KEY in new:
        new[LAST_UPDATED_KEY] = iso_timestamp(now)
    return _escape_surrogates(render_state(original_text, original, new))


def _escape_surrogates(text: str) -> str:
    # Text decoded from UTF-8 holds no surrogate, so one here is a value's, inside a string.
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
