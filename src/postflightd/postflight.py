"""The pure postflight transformation (SPEC 3): a metadata file's outcome applied to state.json.

No I/O: documents in, documents out, and the clock is an argument. The store writes what this
module returns; ``todo.py`` applies the ``TodoEdit`` it describes to TODO.md.
"""

from __future__ import annotations

import copy
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, Final, NamedTuple

from postflightd.models import Artifact, MetadataFile, Status

#: The state.json status each outcome moves the task to, when ``status_map`` omits it.
DEFAULT_STATUS_MAP: Final[Mapping[str, str]] = {
    Status.RESEARCHED: "researched",
    Status.PLANNED: "planned",
    Status.IMPLEMENTED: "completed",
    Status.BLOCKED: "blocked",
}

#: The task key stamped with the time of each success outcome.
TIMESTAMP_FIELDS: Final[Mapping[Status, str]] = {
    Status.RESEARCHED: "researched",
    Status.PLANNED: "planned",
    Status.IMPLEMENTED: "completed",
}

#: Outcomes that link their artifacts into the task (SPEC 3 table: failed and blocked do not).
LINKING_STATUSES: Final = frozenset(
    {Status.RESEARCHED, Status.PLANNED, Status.IMPLEMENTED, Status.PARTIAL}
)

#: Outcomes whose errors go to errors.json.
ERROR_STATUSES: Final = frozenset({Status.PARTIAL, Status.FAILED, Status.BLOCKED})

#: The ``type`` of the record written for a partial/failed/blocked file with no ``errors``
#: (PF307): the agent gave up without saying why, so the record says only that.
UNREPORTED_ERROR_TYPE: Final = "unreported_error"

#: Metadata artifact type -> the type task lists use (they say "research", not "report").
_STORED_TYPE: Final[Mapping[str, str]] = {"report": "research"}

#: Artifact type (as written, or as stored) -> the TODO.md label it is linked under (SPEC 3,
#: "Decided from a real client's history"). Other types are stored in state.json only.
LINK_LABELS: Final[Mapping[str, str]] = {
    "report": "Research",
    "research": "Research",
    "research_report": "Research",
    "plan": "Plan",
    "implementation_plan": "Plan",
    "summary": "Summary",
    "implementation_summary": "Summary",
}

#: The statuses a task moves through, in order: an outcome never moves a task backwards
#: along it (SPEC 3). Statuses off this line (blocked, partial, abandoned, ...) have no place.
STATUS_LINE: Final = (
    "not_started",
    "researching",
    "researched",
    "planning",
    "planned",
    "implementing",
    "completed",
)
_LINE_RANK: Final[Mapping[str, int]] = {status: rank for rank, status in enumerate(STATUS_LINE)}

#: SPEC 3: a TODO.md link is at most this long (longer paths are PF501).
MAX_LINK_CHARS: Final = 4096

_COMPLETION_KEYS: Final = ("completion_summary", "roadmap_items", "claudemd_suggestions")


@dataclass(frozen=True, slots=True)
class TodoLink:
    """One artifact to link in TODO.md: under ``label``, by its root-relative ``path``."""

    #: "Research", "Plan" or "Summary"
    label: str
    #: relative to the project root, as in state.json (``todo.py`` writes it in the form the
    #: section already uses: relative to the root, to the specs directory or the task's)
    path: str
    #: the artifact's summary, for sub-lists whose items end in " — summary"
    summary: str | None = None


@dataclass(frozen=True, slots=True)
class TodoEdit:
    """What TODO.md needs for one task: a status marker, links to add, a completion date."""

    task: int
    #: e.g. "COMPLETED" (no brackets); None leaves the Status line alone.
    marker: str | None
    #: every linked artifact of the outcome, in the file's order; links accumulate: one
    #: already in the section (in any form) is left as it is, none is ever removed.
    links: tuple[TodoLink, ...] = ()
    #: "YYYY-MM-DD" for the "- **Completed**:" line, or None.
    completed: str | None = None
    #: the task directory relative to the root (``specs/259_x``): links written relative to
    #: it or to its parent (the specs directory) are recognised as the same artifact.
    task_dir: str | None = None

    @property
    def is_empty(self) -> bool:
        return self.marker is None and not self.links and self.completed is None

    def to_json(self) -> dict[str, Any]:
        """The edit as the journal records it (``from_json`` reads it back)."""
        return {
            "marker": self.marker,
            "links": [
                {"label": link.label, "path": link.path, "summary": link.summary}
                for link in self.links
            ],
            "completed": self.completed,
            "task_dir": self.task_dir,
        }

    @classmethod
    def from_json(cls, task: int, raw: Mapping[str, Any]) -> TodoEdit:
        """An edit from ``to_json``'s form, or from the older ``{label: "[name](path)"}``
        links of journal rows written before links accumulated; odd values are dropped."""

        def text(value: object) -> str | None:
            return value if isinstance(value, str) else None

        links: list[TodoLink] = []
        listed = raw.get("links")
        if isinstance(listed, list):
            for item in listed:
                label = text(item.get("label")) if isinstance(item, dict) else None
                path = text(item.get("path")) if isinstance(item, dict) else None
                if label is not None and path is not None:
                    links.append(TodoLink(label, path, text(item.get("summary"))))
        elif isinstance(listed, dict):
            for label, link in listed.items():
                target = _OLD_LINK.search(link) if isinstance(link, str) else None
                if isinstance(label, str) and target is not None:
                    links.append(TodoLink(label, target.group(1) or target.group(2)))
        return cls(
            task=task,
            marker=text(raw.get("marker")),
            links=tuple(links),
            completed=text(raw.get("completed")),
            task_dir=text(raw.get("task_dir")),
        )


#: The target of the one link an old journal row holds per label: ``[n](<t>)`` or ``[n](t)``.
_OLD_LINK: Final = re.compile(r"\]\((?:<(.*)>|(.*))\)$")


@dataclass(frozen=True, slots=True)
class Applied:
    """The result of applying one outcome."""

    #: the new state.json document; unchanged parts are shared with the input, never mutated.
    state: dict[str, Any]
    #: None when TODO.md needs no change.
    todo: TodoEdit | None
    #: errors.json records to add (before de-duplication by ``merge_errors``).
    errors: list[dict[str, Any]]
    #: the state differs from the input.
    changed: bool


def iso_timestamp(now: datetime) -> str:
    """``2026-01-08T14:30:00Z``: UTC, whole seconds (a naive ``now`` is taken as UTC)."""
    return _utc(now).strftime("%Y-%m-%dT%H:%M:%SZ")


def _utc(now: datetime) -> datetime:
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def todo_marker(status: str) -> str:
    """The TODO.md marker of a state.json status: ``not_started`` -> ``NOT STARTED``."""
    return status.strip().upper().replace("_", " ")


def stored_artifact(artifact: Artifact) -> dict[str, Any]:
    """The task-list entry of an artifact: ``{"type", "path", "summary"}``, Nones omitted."""
    entry: dict[str, Any] = {}
    if artifact.type is not None:
        entry["type"] = _STORED_TYPE.get(artifact.type, artifact.type)
    entry["path"] = artifact.path
    if artifact.summary is not None:
        entry["summary"] = artifact.summary
    return entry


def markdown_link(path: str) -> str:
    """``[name](path)``; a target with spaces or parentheses is wrapped in ``<>`` (CommonMark).

    Backslashes, brackets and angle brackets are escaped, so no path can end the link early
    or turn the rest of the line into markup (``todo.py`` reads them back).
    """
    name = PurePosixPath(path).name or path
    name = re.sub(r"([\\\[\]])", r"\\\1", name)
    target = path.replace("\\", "\\\\")
    if re.search(r"[\s()<>]", path):
        target = "<" + re.sub(r"([<>])", r"\\\1", target) + ">"
    return f"[{name}]({target})"


def _project_number(entry: Any) -> int | None:
    number = entry.get("project_number") if isinstance(entry, dict) else None
    # bool is an int subclass: `true` is not task 1.
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def find_task(state: Mapping[str, Any], task: int, index: Mapping[int, int] | None = None) -> int:
    """Index of the task in ``active_projects``; KeyError when it is not listed.

    ``index`` (from ``task_index``) makes it a dict look-up; an entry it names that does not
    hold the task (a stale index) is ignored and the list searched as without one.
    """
    projects = state.get("active_projects")
    if not isinstance(projects, list):
        raise KeyError(f"task {task} is not in state.json active_projects")
    if index is not None:
        position = index.get(task)
        if (
            position is not None
            and 0 <= position < len(projects)
            and _project_number(projects[position]) == task
        ):
            return position
    for position, entry in enumerate(projects):
        if _project_number(entry) == task:
            return position
    raise KeyError(f"task {task} is not in state.json active_projects")


def task_index(state: Mapping[str, Any]) -> dict[int, int]:
    """Task number -> its index in ``active_projects`` (the first entry, as ``find_task``).

    Build it once per state document and pass it to every ``apply_outcome`` of a fold:
    outcomes replace entries but never add, remove or renumber them, so it stays valid for
    each state the fold returns.
    """
    found: dict[int, int] = {}
    projects = state.get("active_projects")
    if isinstance(projects, list):
        for position, entry in enumerate(projects):
            number = _project_number(entry)
            if number is not None:
                found.setdefault(number, position)
    return found


def _merge_artifacts(entry: dict[str, Any], artifacts: Sequence[Artifact]) -> None:
    current = entry.get("artifacts")
    listed: list[Any] = list(current) if isinstance(current, list) else []
    for artifact in artifacts:
        new = stored_artifact(artifact)
        for index, old in enumerate(listed):
            if isinstance(old, dict) and old.get("path") == artifact.path:
                listed[index] = new
                break
        else:
            listed.append(new)
    entry["artifacts"] = listed


def _phases_completed(meta: MetadataFile) -> int | None:
    if meta.partial_progress is not None and meta.partial_progress.phases_completed is not None:
        return meta.partial_progress.phases_completed
    return meta.metadata.phases_completed


def link_label(artifact_type: str | None) -> str | None:
    """The TODO.md label an artifact of this type is linked under, or None (not linked)."""
    return LINK_LABELS.get(artifact_type) if artifact_type is not None else None


def _task_dir(file: str) -> str | None:
    """The task directory of a root-relative metadata file path (None for an absolute one)."""
    parent = posixpath.dirname(file)
    if not parent or file.startswith("/") or PureWindowsPath(file).is_absolute():
        return None
    return parent


def _todo_edit(
    task: int, meta: MetadataFile, marker: str | None, file: str, now: datetime
) -> TodoEdit | None:
    links: list[TodoLink] = []
    if meta.status in LINKING_STATUSES:
        for artifact in meta.artifacts:
            label = link_label(artifact.type)
            if label is not None:
                links.append(TodoLink(label, artifact.path, artifact.summary))
    edit = TodoEdit(
        task=task,
        marker=marker,
        links=tuple(links),
        completed=_utc(now).date().isoformat() if meta.status is Status.IMPLEMENTED else None,
        task_dir=_task_dir(file),
    )
    return None if edit.is_empty else edit


def moves_backwards(current: object, new: str) -> bool:
    """Setting a task at ``current`` to ``new`` would move it back along ``STATUS_LINE``."""
    if not isinstance(current, str):
        return False
    rank = _LINE_RANK.get(current.strip().lower().replace(" ", "_"))
    new_rank = _LINE_RANK.get(new.strip().lower().replace(" ", "_"))
    return rank is not None and new_rank is not None and new_rank < rank


def _severity(status: Status) -> str:
    # A partial run can resume where it stopped; a failed or blocked one needs someone.
    return "medium" if status is Status.PARTIAL else "high"


def _outcome_errors(
    meta: MetadataFile, *, task: int, file: str, now: datetime, first_n: int
) -> list[dict[str, Any]]:
    common: dict[str, Any] = {
        "session": meta.metadata.session_id,
        "task": task,
        "agent_type": meta.metadata.agent_type,
        "file": file,
        "delegation_path": meta.metadata.delegation_path,
        "now": now,
        "severity": _severity(meta.status),
    }
    if not meta.errors:
        details = ""
        if meta.partial_progress is not None:
            details = (
                f" Last progress: stage {meta.partial_progress.stage!r}:"
                f" {meta.partial_progress.details}"
            )
        return [
            error_record(
                UNREPORTED_ERROR_TYPE,
                f"The agent ended with status {meta.status.value!r} without reporting any "
                f"error, so the cause is unknown.{details}",
                n=first_n,
                suggested_action=(meta.next_steps or "").strip()
                or "Read the agent's session output to find the cause, then re-run the operation.",
                **common,
            )
        ]
    return [
        error_record(
            (error.type or "").strip() or meta.status.value,
            error.message,
            n=first_n + offset,
            recoverable=error.recoverable if error.recoverable is not None else True,
            suggested_action=(error.recommendation or "").strip()
            or (meta.next_steps or "").strip(),
            **common,
        )
        for offset, error in enumerate(meta.errors)
    ]


def apply_outcome(
    state: Mapping[str, Any],
    meta: MetadataFile,
    *,
    task: int,
    file: str,
    now: datetime,
    status_map: Mapping[str, str],
    first_n: int = 1,
    index: Mapping[int, int] | None = None,
) -> Applied:
    """Apply a final metadata file to the state.json document (SPEC 3 table).

    ``file`` is the metadata file's path as errors.json should name it; ``first_n`` numbers
    the error records' ids (``err_{unix}_{n}``). Raises ValueError for an ``in_progress``
    file (not an outcome) and KeyError when the task is not in ``active_projects``.

    ``index`` is ``task_index`` of the state (or of any earlier state of the same fold): with
    it, finding the task is a dict look-up instead of a search of ``active_projects``.
    """
    if not meta.status.is_final:
        raise ValueError("an in_progress metadata file has no outcome to apply")
    position = find_task(state, task, index)
    projects: list[Any] = state["active_projects"]
    old_entry: dict[str, Any] = projects[position]
    # Copy on write: only the task that changes is copied, so a fold over a 1,000-task
    # state.json (group commit) does not deep-copy it once per file. A shallow copy is
    # enough: keys are only assigned, and the artifacts list is rebuilt, never mutated.
    entry = dict(old_entry)

    status = meta.status
    new_status: str | None = None
    if status in DEFAULT_STATUS_MAP:
        new_status = status_map.get(status.value, DEFAULT_STATUS_MAP[status])
        if moves_backwards(entry.get("status"), new_status):
            # A follow-up research on a planned task: its artifacts are still linked and its
            # timestamp set below, but status and TODO.md marker stay (SPEC 3).
            new_status = None
        else:
            entry["status"] = new_status
    stamp = iso_timestamp(now)
    if status in TIMESTAMP_FIELDS:
        entry[TIMESTAMP_FIELDS[status]] = stamp
    if status in LINKING_STATUSES:
        _merge_artifacts(entry, meta.artifacts)
    if status is Status.IMPLEMENTED and meta.completion_data is not None:
        for key in _COMPLETION_KEYS:
            value = getattr(meta.completion_data, key)
            if value is not None:
                entry[key] = copy.deepcopy(value)
    if status is Status.PARTIAL:
        done = _phases_completed(meta)
        if done is not None:
            entry["resume_phase"] = done + 1
    entry["last_updated"] = stamp
    entry["session_id"] = meta.metadata.session_id

    errors = (
        _outcome_errors(meta, task=task, file=file, now=now, first_n=first_n)
        if status in ERROR_STATUSES
        else []
    )
    changed = entry != old_entry
    new_state = dict(state)
    if changed:
        new_projects = list(projects)
        new_projects[position] = entry
        new_state["active_projects"] = new_projects
    return Applied(
        state=new_state,
        todo=_todo_edit(
            task, meta, todo_marker(new_status) if new_status is not None else None, file, now
        ),
        errors=errors,
        changed=changed,
    )


def apply_outcomes(
    state: Mapping[str, Any],
    items: Sequence[tuple[MetadataFile, int, str]],
    *,
    now: datetime,
    status_map: Mapping[str, str],
) -> tuple[dict[str, Any], list[TodoEdit], list[dict[str, Any]]]:
    """Fold many ``(meta, task, file)`` outcomes over one state document (group commit).

    Returns the new state, the TODO.md edits in order (apply them one after the other) and
    the errors.json records, numbered so their ids differ within the batch.
    """
    current: dict[str, Any] = dict(state)
    edits: list[TodoEdit] = []
    errors: list[dict[str, Any]] = []
    index = task_index(current)
    for meta, task, file in items:
        applied = apply_outcome(
            current,
            meta,
            task=task,
            file=file,
            now=now,
            status_map=status_map,
            first_n=len(errors) + 1,
            index=index,
        )
        current = applied.state
        if applied.todo is not None:
            edits.append(applied.todo)
        errors.extend(applied.errors)
    return current, edits, errors


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
) -> dict[str, Any]:
    """One errors.json record (SPEC 3, seed 001)."""
    path = list(delegation_path) if delegation_path is not None else None
    # delegation_path = [orchestrator, command, agent, ...]: the agent at depth d is entry d+1.
    failed_at_depth = len(path) - 2 if path is not None and len(path) >= 2 else None
    return {
        "id": f"err_{int(_utc(now).timestamp())}_{n}",
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


def _error_key(record: Mapping[str, Any]) -> tuple[str, str, str]:
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
    existing: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """Append the records of ``new`` not already present (same session, type and message).

    Returns the merged list and how many were added. An added record whose id is already
    taken (two commits in the same second) gets the next free ``n``, so ids stay unique.
    """
    # Existing entries are kept exactly as they are, even ones another tool wrote oddly.
    merged: list[Any] = list(existing)
    seen = {_error_key(record) for record in merged if isinstance(record, Mapping)}
    ids = {
        record["id"]
        for record in merged
        if isinstance(record, Mapping) and isinstance(record.get("id"), str)
    }
    added = 0
    for record in new:
        key = _error_key(record)
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


# --- rendering state.json with its formatting kept (SPEC 3.1) ---------------------------------

_WS: Final = " \t\n\r"
_DECODER: Final = json.JSONDecoder()
_KEY_SEP_RE: Final = re.compile(r'"\s*:( ?)')
_ITEM_SEP_RE: Final = re.compile(r'["\d\]}el],( ?)["\d\[{tfn-]')


@dataclass(frozen=True, slots=True)
class _Style:
    indent: str | None  # None: one-line JSON
    item_sep: str
    key_sep: str
    ensure_ascii: bool
    newline: str

    def dump(self, value: Any, base: str = "") -> str:
        """``value`` as JSON in this style, continuation lines prefixed with ``base``."""
        text = json.dumps(
            value,
            indent=self.indent,
            separators=(self.item_sep if self.indent is None else ",", self.key_sep),
            ensure_ascii=self.ensure_ascii,
        )
        if self.indent is None:
            return text
        return text.replace("\n", self.newline + base)

    def compact(self, span: str) -> _Style:
        """This style on one line, with the separators ``span`` uses."""
        key = _KEY_SEP_RE.search(span)
        item = _ITEM_SEP_RE.search(span)
        return _Style(
            None,
            "," + item.group(1) if item else self.item_sep,
            ":" + key.group(1) if key else self.key_sep,
            self.ensure_ascii,
            self.newline,
        )


class _IrregularError(Exception):
    """The text cannot be spliced safely: fall back to a full dump."""


def _detect_style(text: str, body: str) -> _Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    # Keep \u escapes only when the file was written that way (Python's default dump).
    escaped = body.isascii() and re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", body) is not None
    if len(body) <= 2:
        # Empty, `{}` or `[]`: no layout to keep, so json.dumps' usual 2-space one.
        return _Style("  ", ", ", ": ", escaped, newline)
    if "\n" not in body:
        return _Style(None, ", ", ": ", escaped, newline).compact(body)
    indent = ""
    for line in body.split("\n")[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            indent = line[: len(line) - len(stripped)]
            break
    key = _KEY_SEP_RE.search(body)
    return _Style(indent, ", ", ":" + (key.group(1) if key else " "), escaped, newline)


def _decode(text: str, start: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise _IrregularError from exc


class _Span(NamedTuple):
    """Where one member of an object (or element of an array) is written."""

    head: int  # the key's opening quote (an element's start, in an array)
    start: int  # the value
    end: int
    value: Any
    key: str = ""
    #: the elements, when the value is an array that was already walked
    items: list[_Span] | None = None


_WS_RE: Final = re.compile(r"[ \t\n\r]*")


def _skip_ws(text: str, index: int) -> int:
    return _WS_RE.match(text, index).end()  # type: ignore[union-attr]  # `*` always matches


def _object_members(text: str, start: int, *, walk_arrays: bool = False) -> tuple[list[_Span], int]:
    """The members of the object at ``text[start]``, and the index after its ``}``.

    ``walk_arrays`` splits array values into their elements as it goes, so the big
    ``active_projects`` array is parsed once, not once whole and again element by element.
    """
    members: list[_Span] = []
    index = _skip_ws(text, start + 1)
    if text.startswith("}", index):
        return members, index + 1
    while True:
        if not text.startswith('"', index):
            raise _IrregularError
        head = index
        key, index = _decode(text, index)
        index = _skip_ws(text, index)
        if not text.startswith(":", index):
            raise _IrregularError
        value_start = _skip_ws(text, index + 1)
        if walk_arrays and text.startswith("[", value_start):
            items, value_end = _array_items(text, value_start)
            value: Any = [item.value for item in items]
            members.append(_Span(head, value_start, value_end, value, key, items))
        else:
            value, value_end = _decode(text, value_start)
            members.append(_Span(head, value_start, value_end, value, key))
        index = _skip_ws(text, value_end)
        if text.startswith(",", index):
            index = _skip_ws(text, index + 1)
        elif text.startswith("}", index):
            return members, index + 1
        else:
            raise _IrregularError


def _array_items(text: str, start: int) -> tuple[list[_Span], int]:
    """The elements of the array at ``text[start]``, and the index after its ``]``."""
    items: list[_Span] = []
    index = _skip_ws(text, start + 1)
    if text.startswith("]", index):
        return items, index + 1
    while True:
        value, end = _decode(text, index)
        items.append(_Span(index, index, end, value))
        index = _skip_ws(text, end)
        if text.startswith(",", index):
            index = _skip_ws(text, index + 1)
        elif text.startswith("]", index):
            return items, index + 1
        else:
            raise _IrregularError


def _line_indent(text: str, index: int) -> str:
    """The leading whitespace of the line holding ``text[index]``."""
    line = text[text.rfind("\n", 0, index) + 1 : index]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _own_line(text: str, index: int) -> bool:
    return not text[text.rfind("\n", 0, index) + 1 : index].strip(" \t")


def _same(old: Any, new: Any) -> bool:
    # 1 == 1.0 == True in Python, but they are written differently.
    return old is new or (type(old) is type(new) and old == new)


def _context_style(span: str, value: Any, inherited: _Style) -> _Style:
    """The style of a value's contents: its own layout when it is a non-empty container
    (a one-line object stays on one line), else the layout around it."""
    if isinstance(value, (dict, list)) and value and "\n" not in span:
        return inherited.compact(span)
    return inherited


def _appended(text: str, last: _Span, dumped: Sequence[str], style: _Style) -> str:
    """Text of members or elements appended after the last one, laid out like it."""
    if style.indent is not None and _own_line(text, last.head):
        lead = "," + style.newline + _line_indent(text, last.head)
    else:
        lead = style.item_sep
    return "".join(lead + part for part in dumped)


def _splice_spans(
    text: str, start: int, spans: Sequence[_Span], news: Sequence[Any], style: _Style
) -> list[str]:
    """The container's text up to the end of its last span, each span given its new value."""
    parts = [text[start : spans[0].start]]
    for position, (span, new) in enumerate(zip(spans, news, strict=True)):
        if position:
            parts.append(text[spans[position - 1].end : span.start])
        parts.append(_splice(text, span, new, style))
    return parts


def _splice_object(text: str, span: _Span, new: dict[str, Any], style: _Style) -> str | None:
    members, _ = _object_members(text, span.start)
    keys = [member.key for member in members]
    # Duplicate keys, removed keys or a new order: the caller rewrites the whole value.
    if len(set(keys)) != len(keys) or list(new)[: len(keys)] != keys:
        return None
    return _splice_container(text, span, members, [new[key] for key in keys], style, new)


def _splice_array(text: str, span: _Span, new: list[Any], style: _Style) -> str | None:
    items = span.items if span.items is not None else _array_items(text, span.start)[0]
    # Removed elements: the caller rewrites the whole array.
    if len(new) < len(items):
        return None
    return _splice_container(text, span, items, new, style, None)


def _splice_container(
    text: str,
    span: _Span,
    children: list[_Span],
    new: Sequence[Any],
    style: _Style,
    new_object: dict[str, Any] | None,
) -> str:
    """``span`` rewritten child by child, with ``new``'s extra members or elements appended."""
    parts = _splice_spans(text, span.start, children, new[: len(children)], style)
    last = children[-1]
    base = _line_indent(text, last.head)
    if new_object is not None:
        extra = list(new_object)[len(children) :]
        dumped = [style.dump(k) + style.key_sep + style.dump(new_object[k], base) for k in extra]
    else:
        # A new element looks like its predecessor: one line if that one was.
        sibling = _context_style(text[last.start : last.end], last.value, style)
        dumped = [sibling.dump(value, base) for value in new[len(children) :]]
    if dumped:
        parts.append(_appended(text, last, dumped, style))
    parts.append(text[last.end : span.end])
    return "".join(parts)


def _splice(text: str, span: _Span, new: Any, around: _Style) -> str:
    """The text of ``new`` for the value written at ``span``.

    ``around`` is the layout of the enclosing container. Unchanged values keep their bytes;
    changed containers of the same shape are spliced child by child; anything else is
    dumped in the layout of its place.
    """
    old = span.value
    if _same(old, new):
        return text[span.start : span.end]
    own = _context_style(text[span.start : span.end], old, around)
    spliced: str | None = None
    if isinstance(old, dict) and old and isinstance(new, dict):
        spliced = _splice_object(text, span, new, own)
    elif isinstance(old, list) and old and isinstance(new, list):
        spliced = _splice_array(text, span, new, own)
    if spliced is not None:
        return spliced
    return own.dump(new, _line_indent(text, span.start))


def render_state(original_text: str, original: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The text of ``new`` formatted like ``original_text``, the file ``original`` was read from.

    Key order, indentation (spaces or tabs), non-ASCII text and the trailing newline are kept,
    and only the values that changed are rewritten, so a postflight diff touches only the
    task it changed (SPEC 3.1). The splice compares ``new`` with the text itself, so an
    ``original`` that does not match the text cannot corrupt the result.
    """
    start = _skip_ws(original_text, 0)
    end = len(original_text.rstrip(_WS))
    body = original_text[start:end]
    style = _detect_style(original_text, body)
    trailing = style.newline if end < len(original_text) or not body else ""
    new_doc = dict(new)
    try:
        spliced = _splice_changed_tasks(original_text, original, new_doc, style)
        if spliced is not None:
            return spliced
        spliced = _splice_document(original_text, start, end, new_doc, style)
    except _IrregularError:
        spliced = None
    if spliced is None:
        return style.dump(new_doc) + trailing
    return original_text[:start] + spliced + original_text[end:]


#: Above this many changed tasks the full walk of the document is as cheap as searching.
_FAST_SPLICE_MAX: Final = 8


def _splice_changed_tasks(
    text: str, original: Mapping[str, Any], new: dict[str, Any], style: _Style
) -> str | None:
    """The common postflight, fast: only a few ``active_projects`` entries changed.

    Walking every element of a 1,000-task file to find their spans costs ~15 ms; finding the
    changed tasks by their ``"project_number"`` costs ~1 ms. Every guess is checked: the
    object found must decode to exactly the old task, and its replacement to exactly the new
    one; otherwise None, and the full walk decides.
    """
    old_tasks, new_tasks = original.get("active_projects"), new.get("active_projects")
    if (
        list(original) != list(new)
        or not isinstance(old_tasks, list)
        or not isinstance(new_tasks, list)
        or len(old_tasks) != len(new_tasks)
        or any(k != "active_projects" and not _same(original[k], new[k]) for k in original)
    ):
        return None
    pairs = zip(old_tasks, new_tasks, strict=True)
    changed = [i for i, (a, b) in enumerate(pairs) if not _same(a, b)]
    if not changed or len(changed) > _FAST_SPLICE_MAX:
        return None
    pieces: list[tuple[int, int, str, int]] = []
    for i in changed:
        number = old_tasks[i].get("project_number") if isinstance(old_tasks[i], dict) else None
        if not isinstance(number, int) or isinstance(number, bool):
            return None
        hits = list(re.finditer(rf'"project_number"\s*:\s*{number}(?![\d.eE])', text))
        if len(hits) != 1:
            return None
        brace = text.rfind("{", 0, hits[0].start())
        if brace < 0 or text[brace + 1 : hits[0].start()].strip():
            return None  # project_number is not the object's first key: no cheap guess
        value, end = _decode(text, brace)
        if value != old_tasks[i]:
            return None
        replacement = _splice(text, _Span(brace, brace, end, value), new_tasks[i], style)
        pieces.append((brace, end, replacement, i))
    pieces.sort()
    parts, cursor = [], 0
    for start, end, replacement, i in pieces:
        if start < cursor:
            return None
        # Each span held exactly one JSON value (the old task, decoded above); the document
        # stays valid and equal to ``new`` when each replacement is that task's new value.
        # Checking the replacements costs microseconds; re-parsing the file costs ~5 ms.
        try:
            if json.loads(replacement) != new_tasks[i]:
                return None
        except ValueError:
            return None
        parts += [text[cursor:start], replacement]
        cursor = end
    return "".join([*parts, text[cursor:]])


def _splice_document(
    text: str, start: int, end: int, new: dict[str, Any], style: _Style
) -> str | None:
    members, object_end = _object_members(text, start, walk_arrays=True)
    # Trailing garbage or an empty object: nothing worth keeping.
    if object_end != end or not members:
        return None
    keys = [member.key for member in members]
    if len(set(keys)) != len(keys) or list(new)[: len(keys)] != keys:
        return None
    document = _Span(start, start, end, {member.key: member.value for member in members})
    return _splice_container(text, document, members, [new[key] for key in keys], style, new)
