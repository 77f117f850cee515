"""The pure postflight transformation: a metadata file's outcome applied to state.json.

No I/O: documents in, documents out, and the clock is an argument. ``pipeline.group_commit``
writes what this module returns (through ``fs.atomic``); ``todo_edit`` applies the
``TodoEdit`` it describes to TODO.md. What an outcome writes into its task's entry is a
``TaskUpdate``; the entry's other keys are kept as they are.

Why this module stays whole at a little over 500 lines: it is one transformation, read top to
bottom as an outcome is applied (its time, the task's update, its TODO.md edit, its errors);
split, what decides each key of the entry would be spread over several files.
"""

from __future__ import annotations

import copy
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import PureWindowsPath
from typing import TYPE_CHECKING, Any, Final, Literal, NotRequired, TypedDict

from postflightd.models.terms import Status
from postflightd.postflight.errors_json import error_record
from postflightd.timestamps import iso_timestamp, parse_timestamp, utc

if TYPE_CHECKING:
    from postflightd.models.metadata import Artifact, MetadataFile
    from postflightd.postflight.errors_json import ErrorRecord

#: The state.json status each outcome moves the task to, when ``status_map`` omits it.
DEFAULT_STATUS_MAP: Final[Mapping[str, str]] = {
    Status.RESEARCHED: "researched",
    Status.PLANNED: "planned",
    Status.IMPLEMENTED: "completed",
    Status.BLOCKED: "blocked",
}

#: The task key stamped with the time of each success outcome.
TIMESTAMP_FIELDS: Final[Mapping[Status, Literal["researched", "planned", "completed"]]] = {
    Status.RESEARCHED: "researched",
    Status.PLANNED: "planned",
    Status.IMPLEMENTED: "completed",
}

#: Outcomes that link their artifacts into the task (failed and blocked produced nothing to
#: link).
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

#: Artifact type (as written, or as stored) -> the TODO.md label it is linked under, as real
#: projects' TODO.md files label them. Other types are stored in state.json only.
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
#: along it (a follow-up research on a planned task must not make it "researched" again).
#: Statuses off this line (blocked, partial, abandoned, ...) have no place.
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

_COMPLETION_KEYS: Final[
    tuple[Literal["completion_summary", "roadmap_items", "claudemd_suggestions"], ...]
] = ("completion_summary", "roadmap_items", "claudemd_suggestions")


# For the type checker alone, as errors_json's records (a plain dict at run time).
if TYPE_CHECKING:

    class StoredArtifact(TypedDict):
        """An artifact in a task's ``artifacts`` list, as postflight writes it."""

        type: NotRequired[str]
        path: str
        summary: NotRequired[str]

    class TaskUpdate(TypedDict, total=False):
        """What an outcome writes into its task's state.json entry, in the order written.

        The entry keeps every other key, and the position of every key it had.
        """

        status: str
        researched: str
        planned: str
        completed: str
        #: the entry's list with the outcome's artifacts merged in (entries another tool wrote
        #: are kept as they are).
        artifacts: list[StoredArtifact | Any]
        completion_summary: str
        roadmap_items: list[str]
        claudemd_suggestions: str
        resume_phase: int
        last_updated: str
        session_id: str


@dataclass(frozen=True, slots=True)
class TodoLink:
    """One artifact to link in TODO.md: under ``label``, by its root-relative ``path``."""

    #: "Research", "Plan" or "Summary"
    label: str
    #: relative to the project root, as in state.json (``todo_edit`` writes it in the form the
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
    errors: list[ErrorRecord]
    #: the state differs from the input.
    changed: bool


@dataclass(frozen=True, slots=True)
class TaskNotFound:
    """The outcome's task is not in state.json ``active_projects``: nothing was applied."""

    task: int

    @property
    def message(self) -> str:
        return f"task {self.task} is not in state.json active_projects"


def todo_marker(status: str) -> str:
    """The TODO.md marker of a state.json status: ``not_started`` -> ``NOT STARTED``."""
    return status.strip().upper().replace("_", " ")


def stored_artifact(artifact: Artifact) -> StoredArtifact:
    """The task-list entry of an artifact: ``{"type", "path", "summary"}``, Nones omitted."""
    entry: StoredArtifact
    if artifact.type is not None:
        entry = {"type": _STORED_TYPE.get(artifact.type, artifact.type), "path": artifact.path}
    else:
        entry = {"path": artifact.path}
    if artifact.summary is not None:
        entry["summary"] = artifact.summary
    return entry


def _project_number(entry: Any) -> int | None:
    number = entry.get("project_number") if isinstance(entry, dict) else None
    # bool is an int subclass: `true` is not task 1.
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def task_position(
    state: Mapping[str, Any], task: int, index: Mapping[int, int] | None = None
) -> int | None:
    """Index of the task in ``active_projects``, or None when it is not listed.

    ``index`` (from ``task_index``) makes it a dict look-up; an entry it names that does not
    hold the task (a stale index) is ignored and the list searched as without one.
    """
    projects = state.get("active_projects")
    if not isinstance(projects, list):
        return None
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
    return None


def find_task(state: Mapping[str, Any], task: int, index: Mapping[int, int] | None = None) -> int:
    """``task_position`` for a task the caller knows is listed; KeyError when it is not."""
    position = task_position(state, task, index)
    if position is None:
        raise KeyError(f"task {task} is not in state.json active_projects")
    return position


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


def _merged_artifacts(current: object, artifacts: Sequence[Artifact]) -> list[StoredArtifact | Any]:
    """The task's ``artifacts`` list (``current``) with ``artifacts`` stored in it: an entry
    of the same path is replaced where it stands, a new one appended."""
    listed: list[StoredArtifact | Any] = list(current) if isinstance(current, list) else []
    for artifact in artifacts:
        new = stored_artifact(artifact)
        for index, old in enumerate(listed):
            if isinstance(old, dict) and old.get("path") == artifact.path:
                listed[index] = new
                break
        else:
            listed.append(new)
    return listed


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


def outcome_time(written: datetime | None, started_at: str | None, now: datetime) -> datetime:
    """When the outcome happened: when the agent wrote its final file (``written``, the
    file's modification time), clamped between the run's ``started_at`` (when it is a time)
    and ``now``; ``now`` when the file's time is not known.

    Beside a running daemon the two are milliseconds apart; for a leftover applied months
    later, the task's history stays true. A clock set wrong (a time in the future, before
    the run started) cannot date an outcome outside its run.
    """
    if written is None:
        return now
    at = min(written, now)
    started = parse_timestamp(started_at) if started_at is not None else None
    if started is not None and at < started <= now:
        at = started
    return at


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
        completed=utc(now).date().isoformat() if meta.status is Status.IMPLEMENTED else None,
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
) -> list[ErrorRecord]:
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


def _task_update(
    old_entry: Mapping[str, Any],
    meta: MetadataFile,
    status_map: Mapping[str, str],
    now: datetime,
) -> tuple[TaskUpdate, str | None]:
    """What the outcome of ``meta`` writes into its task's entry, and the status it moves the
    task to (None: the status stays)."""
    update: TaskUpdate = {}
    status = meta.status
    new_status: str | None = None
    if status in DEFAULT_STATUS_MAP:
        new_status = status_map.get(status.value, DEFAULT_STATUS_MAP[status])
        if moves_backwards(old_entry.get("status"), new_status):
            # A follow-up research on a planned task: its artifacts are still linked and its
            # timestamp set below, but status and TODO.md marker stay (``STATUS_LINE``).
            new_status = None
        else:
            update["status"] = new_status
    stamp = iso_timestamp(now)
    if status in TIMESTAMP_FIELDS:
        update[TIMESTAMP_FIELDS[status]] = stamp
    if status in LINKING_STATUSES:
        update["artifacts"] = _merged_artifacts(old_entry.get("artifacts"), meta.artifacts)
    if status is Status.IMPLEMENTED and meta.completion_data is not None:
        for key in _COMPLETION_KEYS:
            value = getattr(meta.completion_data, key)
            if value is not None:
                update[key] = copy.deepcopy(value)
    if status is Status.PARTIAL:
        done = _phases_completed(meta)
        if done is not None:
            update["resume_phase"] = done + 1
    update["last_updated"] = stamp
    update["session_id"] = meta.metadata.session_id
    return update, new_status


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
    written: datetime | None = None,
) -> Applied | TaskNotFound:
    """Apply a final metadata file to the state.json document.

    ``written`` is when the agent wrote the file (its modification time): the outcome's time
    (``outcome_time``: ``last_updated``, the status timestamp, TODO.md's Completed date) is
    it, clamped between the file's ``started_at`` and ``now``; without it, ``now``. The
    errors.json records are stamped ``now``, when postflight recorded them.

    ``file`` is the metadata file's path as errors.json should name it; ``first_n`` numbers
    the error records' ids (``err_{unix}_{n}``). A task not in ``active_projects`` is
    ``TaskNotFound`` (PF600). An ``in_progress`` file has no outcome: passing one is a bug
    (ValueError).

    ``index`` is ``task_index`` of the state (or of any earlier state of the same fold): with
    it, finding the task is a dict look-up instead of a search of ``active_projects``.
    """
    if not meta.status.is_final:
        raise ValueError("an in_progress metadata file has no outcome to apply")
    position = task_position(state, task, index)
    if position is None:
        return TaskNotFound(task)
    projects: list[Any] = state["active_projects"]
    old_entry: dict[str, Any] = projects[position]
    at = outcome_time(written, meta.started_at, now)
    update, new_status = _task_update(old_entry, meta, status_map, at)
    # Copy on write: only the task that changes is copied, so a fold over a 1,000-task
    # state.json (group commit) does not deep-copy it once per file. A shallow copy is
    # enough: keys are only assigned, and the artifacts list is rebuilt, never mutated. Keys
    # the entry had keep their place; new ones follow in the order of ``update``.
    entry = {**old_entry, **update}
    status = meta.status

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
            task, meta, todo_marker(new_status) if new_status is not None else None, file, at
        ),
        errors=errors,
        changed=changed,
    )
