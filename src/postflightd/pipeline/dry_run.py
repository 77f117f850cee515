"""``--dry-run``: what postflight would write to state.json and TODO.md, as diffs.

The same pure fold the commit runs (``commit.outcome_of``, ``commit.advanced``), on the files
as they are now; nothing is locked, journaled, written or deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from postflightd.config import Config
from postflightd.fs.atomic import read_snapshot
from postflightd.inert import inert_diff
from postflightd.pipeline.group_commit import advanced, outcome_of
from postflightd.pipeline.results import FileReport
from postflightd.pipeline.unrecordable import UNWRITABLE, unrecordable
from postflightd.postflight.state_text import render_state
from postflightd.postflight.todo_edit import apply_todo_edits
from postflightd.postflight.transform import TaskNotFound, TodoEdit, task_index
from postflightd.project.root import Project
from postflightd.project.state import parse_state


@dataclass(frozen=True, slots=True)
class Plan:
    """What applying would do: the files it would replace, and the metadata files it would
    apply (and so delete); every other metadata file would be kept."""

    writes: list[PlannedWrite]
    applied: list[FileReport]


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    """A file postflight would replace, with its text before and after."""

    path: Path
    old: str
    new: str


def preview(
    project: Project, reports: Sequence[FileReport], config: Config, now: datetime
) -> list[PlannedWrite]:
    """What applying the valid final ``reports`` would write to state.json and TODO.md."""
    return plan(project, reports, config, now).writes


def plan(project: Project, reports: Sequence[FileReport], config: Config, now: datetime) -> Plan:
    """What applying the valid final ``reports`` would write, and which of them it would apply.

    The same pure transformation ``commit_outcomes`` runs, on the files as they are now;
    nothing is locked, journaled, written or deleted (``scan --apply --dry-run``,
    ``process --dry-run``).
    """
    ready = [
        item
        for r in reports
        if r.valid and unrecordable(r) is None and (item := r.ready()) is not None
    ]
    if not ready or not project.state.usable:
        return Plan([], [])
    specs = project.require_specs()
    snapshot = read_snapshot(specs, config.postflight.state_file)
    if snapshot.raw is None:
        return Plan([], [])
    doc, problem = parse_state(snapshot.raw)
    if problem is not None:
        return Plan([], [])
    text = snapshot.raw.decode("utf-8")
    new = doc
    index = task_index(doc)
    status_map = asdict(config.postflight.status_map)
    edits: list[TodoEdit] = []
    applied: list[FileReport] = []
    for item in ready:
        try:
            result = outcome_of(new, item, now=now, status_map=status_map, index=index)
        except UNWRITABLE:
            continue  # PF106: postflight would leave it out of the batch
        if isinstance(result, TaskNotFound):
            continue  # PF600: nothing would be written for it
        new = advanced(new, result, item.task, index)
        applied.append(item.report)
        if result.todo is not None:
            edits.append(result.todo)
    planned: list[PlannedWrite] = []
    if new != doc:
        planned.append(PlannedWrite(project.state.path, text, render_state(text, doc, new)))
    if config.postflight.sync_todo and edits:
        todo = read_snapshot(specs, config.postflight.todo_file)
        if todo.raw is not None:
            try:
                todo_text = todo.raw.decode("utf-8")
            except UnicodeDecodeError:
                return Plan(planned, applied)
            new_todo, _missing = apply_todo_edits(todo_text, edits)
            if new_todo != todo_text:
                planned.append(PlannedWrite(todo.path, todo_text, new_todo))
    return Plan(planned, applied)


def unified_diff(write: PlannedWrite, shown_as: str) -> str:
    """``write`` as a unified diff, labelled with the path the user sees, every line inert."""
    return inert_diff(write.old, write.new, f"a/{shown_as}", f"b/{shown_as}")
