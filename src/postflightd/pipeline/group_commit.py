"""The group commit: every ready file's outcome in one write of state.json, then TODO.md.

Under the project lock, ``fold_state`` folds each file's outcome (``postflight.transform``)
into the state read and returns one ``Folded`` value: the new document and its bytes
(``postflight.state_text``), the files applied, the files dropped and why. The journal
records the applied files, durably, before those bytes replace state.json
(``fs.atomic.replace_if_unchanged``); the TODO.md edits follow (``postflight.todo_edit``). A
file whose outcome cannot be written drops out of the batch (PF600, PF106); the others commit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from postflightd.config import Config
from postflightd.errors import StateUnusableError
from postflightd.fs.atomic import Snapshot, atomic_write, read_snapshot, replace_if_unchanged
from postflightd.fs.directory import FileIdentity, StoreError
from postflightd.fs.faults import crash_point
from postflightd.journal.changes import TaskChange
from postflightd.journal.database import Journal, content_text
from postflightd.models.files import META_NAME, json_problem
from postflightd.pipeline.records import NO_JOURNAL, journal_row
from postflightd.pipeline.results import FileReport, Outcome, Ready
from postflightd.pipeline.unrecordable import UNWRITABLE, unwritable_finding
from postflightd.postflight.state_text import render_state
from postflightd.postflight.todo_edit import apply_todo_edits
from postflightd.postflight.transform import (
    TIMESTAMP_FIELDS,
    Applied,
    TaskNotFound,
    TodoEdit,
    apply_outcome,
    find_task,
    task_index,
    task_position,
)
from postflightd.project.root import Project, os_problem
from postflightd.project.state import STATE_CACHE, parse_state
from postflightd.rules.findings import Finding, finding, state_unusable, state_unusable_text

if TYPE_CHECKING:
    from postflightd.postflight.errors_json import ErrorRecord


def outcome_of(
    state: dict[str, Any],
    item: Ready,
    *,
    now: datetime,
    status_map: Mapping[str, str],
    index: Mapping[int, int],
) -> Applied | TaskNotFound:
    """One ready file's outcome on ``state``, checked writable; ``TaskNotFound`` (PF600).

    Raises one of ``UNWRITABLE`` when the outcome cannot be written (PF106): copying or
    encoding a value is where that shows. The commit and its dry run fold with it alike.
    """
    result = apply_outcome(
        state,
        item.meta,
        task=item.task,
        file=item.report.rel_path,
        now=now,
        status_map=status_map,
        index=index,
        # The outcome's time is when the agent wrote the file, not when it was applied.
        written=item.report.loaded.written,
    )
    if isinstance(result, Applied):
        _check_writable(result, item.task, index)
    return result


def advanced(
    state: dict[str, Any],
    result: Applied,
    task: int,
    index: Mapping[int, int],
    *,
    rerun: bool | None = None,
) -> dict[str, Any]:
    """The state the fold goes on with: ``result.state``, unless this is a re-run of a file
    already applied and the task's entry still holds its outcome (then state.json stays byte
    for byte, and a dry run shows no diff).

    ``rerun`` is what the journal says: True, these very bytes were post-flighted before (a
    re-run after a crash, or after TODO.md could not be written); False, never: the first
    application, which always writes (a ``failed`` outcome changes nothing but
    ``last_updated``, and that is what it must write). None (no journal to ask): the entry
    decides, as a re-run looks: it differs only in when it was applied.
    """
    if not result.changed:
        return state
    if rerun is False:
        return result.state
    position = find_task(state, task, index)
    if _already_applied(
        state["active_projects"][position], result.state["active_projects"][position]
    ):
        return state
    return result.state


def _check_writable(result: Applied, task: int, index: Mapping[int, int]) -> None:
    """Raise what writing this outcome would raise, before the batch depends on it."""
    entry = result.state["active_projects"][find_task(result.state, task, index)]
    # The C encoder (no indent) is what makes this cheap: a few microseconds per file.
    json.dumps(entry, ensure_ascii=False).encode("utf-8")
    todo = result.todo
    if todo is not None:
        # Marker, date, every link's path and summary: what TODO.md and the journal get.
        json.dumps(todo.to_json(), ensure_ascii=False).encode("utf-8")
    if result.errors:
        # errors.json spells a lone surrogate as its escape (``errors_text``): only an
        # integer past the conversion limit can fail there.
        json.dumps(result.errors)


def _already_applied(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """The task entry already holds this outcome: it differs only in when it was applied.

    So applying a file again (a re-run after TODO.md could not be written, or after a crash
    before the delete) leaves state.json byte for byte as it is.
    """
    if before.get("session_id") != after.get("session_id"):
        return False
    stamps = {"last_updated", *TIMESTAMP_FIELDS.values()}
    keys = set(before) | set(after)
    return all(before.get(k) == after.get(k) for k in keys - stamps) and all(
        k in before for k in stamps & set(after)
    )


@dataclass(slots=True)
class Committed:
    """What one group commit wrote, and what it must still answer for."""

    #: errors.json records of the applied outcomes...
    errors: list[ErrorRecord] = field(default_factory=list)
    #: ...and the files they belong to: kept if errors.json cannot be written.
    erroring: list[FileReport] = field(default_factory=list)
    #: every file whose outcome state.json now holds, with its task number
    applied: list[Ready] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Folded:
    """What folding the ready files into one read of state.json gives: one value.

    ``data`` is the bytes that replace state.json (None: nothing changes); ``applied`` the
    files whose outcome it holds, in order; ``dropped`` the files whose outcome cannot be
    written, each with the finding that says why.
    """

    before: dict[str, Any]
    after: dict[str, Any]
    index: dict[int, int]
    applied: tuple[Ready, ...]
    dropped: tuple[tuple[Ready, Finding], ...]
    todo_edits: tuple[tuple[FileReport, TodoEdit], ...]
    errors: tuple[ErrorRecord, ...]
    erroring: tuple[FileReport, ...]
    data: bytes | None = None


def fold_state(
    snapshot: Snapshot,
    files: Sequence[Ready],
    config: Config,
    now: datetime,
    reruns: frozenset[int] | None = None,
) -> Folded:
    """Every file's outcome folded into the state.json read: the transform of the group commit.

    A function of the snapshot and the files: it changes neither (nor the files' reports).
    Raises StateUnusableError, UnicodeDecodeError or a JSONDecodeError when state.json is
    missing or unusable.
    """
    if snapshot.raw is None:
        raise StateUnusableError(state_unusable_text(f"{snapshot.path}: does not exist"))
    text = snapshot.raw.decode("utf-8", errors="strict")
    cached = STATE_CACHE.get(snapshot.path, snapshot.raw)
    if cached is not None and cached.doc is not None:
        doc = cached.doc
    else:
        # parse_state, not json.loads: a document nested too deeply is unusable, not a crash.
        doc, problem = parse_state(snapshot.raw)
        if problem is not None:
            raise StateUnusableError(state_unusable_text(f"{snapshot.path}: {problem}"))
    # Built once from the document read under the lock: outcomes never add or move tasks.
    index = task_index(doc)
    status_map = asdict(config.postflight.status_map)
    folded = _fold(doc, text, index, files, status_map, now, reruns, render_each=False)
    if folded.after == doc:
        return folded
    try:
        return replace(folded, data=render_state(text, doc, folded.after).encode("utf-8"))
    except UNWRITABLE:
        pass
    # Something the per-file checks did not foresee: find the file(s) by rendering one
    # outcome at a time, so only they drop out.
    again = _fold(doc, text, index, folded.applied, status_map, now, reruns, render_each=True)
    data = render_state(text, doc, again.after).encode("utf-8") if again.after != doc else None
    return replace(again, dropped=folded.dropped + again.dropped, data=data)


def _fold(
    doc: dict[str, Any],
    text: str,
    index: dict[int, int],
    files: Sequence[Ready],
    status_map: Mapping[str, str],
    now: datetime,
    reruns: frozenset[int] | None,
    *,
    render_each: bool,
) -> Folded:
    new = doc
    applied: list[Ready] = []
    dropped: list[tuple[Ready, Finding]] = []
    todo_edits: list[tuple[FileReport, TodoEdit]] = []
    errors: list[ErrorRecord] = []
    erroring: list[FileReport] = []
    for item in files:
        try:
            result = outcome_of(new, item, now=now, status_map=status_map, index=index)
            if render_each and isinstance(result, Applied):
                render_state(text, doc, result.state).encode("utf-8")
        except UNWRITABLE as exc:
            dropped.append((item, unwritable_finding(item.report, exc)))
            continue
        if isinstance(result, TaskNotFound):
            dropped.append((item, finding("PF600", "", result.message)))
            continue
        rerun = None if reruns is None else item.task in reruns
        new = advanced(new, result, item.task, index, rerun=rerun)
        applied.append(item)
        if result.todo is not None:
            todo_edits.append((item.report, result.todo))
        if result.errors:
            errors.extend(result.errors)
            erroring.append(item.report)
    return Folded(
        doc,
        new,
        index,
        tuple(applied),
        tuple(dropped),
        tuple(todo_edits),
        tuple(errors),
        tuple(erroring),
    )


def commit_outcomes(
    project: Project,
    ready: list[Ready],
    config: Config,
    journal: Journal,
    now: datetime,
) -> Committed:
    """One read-modify-write of state.json for every ready file (group commit), then TODO.md.

    ``fold_state`` computes every outcome (dropping a file whose outcome cannot be written);
    the applied files are recorded in the journal, durably, and only then are the bytes that
    replace state.json returned to ``replace_if_unchanged``: the journal always holds what
    state.json shows.
    """
    # Under the lock: a file another postflight took or an agent rewrote since it was read is
    # not applied from the stale copy.
    for item in ready:
        report = item.report
        current = _current_identity(project, report)
        if current != report.loaded.identity:
            report.outcome = Outcome.GONE if current is None else Outcome.REWRITTEN
    live = [i for i in ready if i.report.outcome is Outcome.APPLIED]
    if not live:
        return Committed()
    # replace_if_unchanged() folds again when a writer that ignores the lock changed state.json
    # meanwhile: one Folded per read, the last is what was written; each fold takes the files
    # the one before it applied (a file dropped stays dropped).
    folds: list[Folded] = []
    # What each file's row recorded, so it is journaled again only if that changed.
    journaled: dict[int, TaskChange | None] = {}
    # Asked once, before this commit journals anything: a fold again after another writer
    # changed state.json must still apply what this commit is applying.
    reruns = _reruns(journal, live)

    def transform(snapshot: Snapshot) -> bytes | None:
        folded = fold_state(snapshot, folds[-1].applied if folds else live, config, now, reruns)
        folds.append(folded)
        for item, problem in folded.dropped:
            item.report.drop(problem)
        # What each task's entry was and became, for the journal (``verify``, the healer).
        edits = [e for _, e in folded.todo_edits] if config.postflight.sync_todo else []
        changes = _task_changes(folded, edits)
        _journal_applied(journal, folded.applied, journaled, changes, reruns)
        return folded.data

    crash_point("before-state-write")
    try:
        specs, name = project.require_specs(), config.postflight.state_file
        replace_if_unchanged(specs, name, transform, crash_label="state")
    except (UnicodeDecodeError, json.JSONDecodeError, StateUnusableError) as exc:
        # state.json went bad between the first read and the lock: never overwrite it.
        if isinstance(exc, json.JSONDecodeError):
            problem = f"{config.postflight.state_file}: {json_problem(exc)}"
        elif isinstance(exc, UnicodeDecodeError):
            problem = f"{config.postflight.state_file}: not UTF-8 text"
        else:
            problem = str(exc)
        for item in live:
            report = item.report
            if report.outcome is Outcome.APPLIED:
                report.outcome = Outcome.STATE_UNUSABLE
                report.findings.append(state_unusable(problem))
        return Committed()
    crash_point("after-state-write")
    written = folds[-1]
    if written.data is not None:
        # The next read of state.json (the next agent's postflight) finds these bytes and
        # skips the parse.
        STATE_CACHE.remember(project.state.path, written.data, written.after)
    if config.postflight.sync_todo and written.todo_edits:
        edits = [(r, e) for r, e in written.todo_edits if r.outcome is Outcome.APPLIED]
        _sync_todo(project, config, edits)
    crash_point("after-todo-write")
    return Committed(list(written.errors), list(written.erroring), list(written.applied))


def _task_changes(folded: Folded, todo_edits: list[TodoEdit]) -> dict[int, TaskChange]:
    """Each applied task's entry before and after this commit, and its TODO.md edits.

    Per commit, not per file: several files for one task in one group commit are one change
    from the entry read to the entry written, which is what a writer that read before the
    commit would put back.
    """
    before_doc, after_doc, index = folded.before, folded.after, folded.index
    changes: dict[int, TaskChange] = {}
    for item in folded.applied:
        task = item.task
        if task in changes:
            continue
        position = task_position(before_doc, task, index)
        if position is None:
            continue
        changes[task] = TaskChange(
            before=before_doc["active_projects"][position],
            after=after_doc["active_projects"][position],
            todo=[e.to_json() for e in todo_edits if e.task == task],
        )
    return changes


def _journal_applied(
    journal: Journal,
    live: Sequence[Ready],
    journaled: dict[int, TaskChange | None],
    changes: Mapping[int, TaskChange],
    reruns: frozenset[int] | None,
) -> None:
    """The ``postflighted`` rows (full content, task change) of the files about to be applied.

    ``journaled`` (report id -> the change recorded) spans the retries of one commit: a file
    is recorded again only when a writer that ignores the lock changed its task meanwhile, so
    the latest row holds what is actually written. A file whose row is not committed is kept
    (``NO_JOURNAL``): its content would be lost.

    A re-run of these very bytes (``reruns``: the journal holds them post-flighted) that
    changes nothing in its task (an incomplete postflight retried: state.json holds the
    outcome already) gets no row: its outcome was journaled, with its content, when it was
    applied, and is counted once.
    """
    todo: list[tuple[FileReport, TaskChange | None]] = []
    for item in live:
        report, change = item.report, changes.get(item.task)
        if id(report) in journaled and journaled[id(report)] == change:
            continue
        rerun = reruns is not None and item.task in reruns
        if rerun and change is not None and change.before == change.after:
            journaled[id(report)] = change
            continue
        todo.append((report, change))
    if not todo:
        return
    failed: list[FileReport] = []
    with journal.batch() as batch:
        for report, change in todo:
            if not journal_row(journal, "postflighted", report, content=True, change=change):
                failed.append(report)
    for report, change in todo:
        journaled[id(report)] = change
        if (not batch.committed or report in failed) and NO_JOURNAL not in report.notes:
            report.notes.append(NO_JOURNAL)


def _current_identity(project: Project, report: FileReport) -> FileIdentity | None:
    """The metadata file's identity now, in the directory it was read from; None if gone."""
    try:
        with project.task_dir(report.path, report.loaded.dir_identity) as task:
            st = task.lstat(META_NAME)
    except OSError:
        return None
    return FileIdentity.of(st) if st is not None else None


def mark_incomplete(reports: Iterable[FileReport], problem: str) -> None:
    """The outcome is in state.json and the journal, but not all written: keep the file."""
    for report in reports:
        if report.outcome is not Outcome.APPLIED:
            continue
        report.outcome = Outcome.INCOMPLETE
        report.findings.append(
            finding(
                "PF606",
                "",
                f"{problem}; state.json already holds the outcome, the metadata file is kept: "
                "fix this and run again (applying it again completes it)",
            )
        )


def _sync_todo(project: Project, config: Config, edits: list[tuple[FileReport, TodoEdit]]) -> None:
    specs, name = project.require_specs(), config.postflight.todo_file
    path = specs.child(name)
    live = [r for r, _ in edits]
    try:
        snapshot = read_snapshot(specs, name)
    except StoreError as exc:
        mark_incomplete(live, os_problem(exc, f"{path.name} could not be read"))
        return
    if snapshot.raw is None:
        for report in live:
            report.notes.append(f"{path.name} does not exist; only state.json was updated")
        return
    try:
        text = snapshot.raw.decode("utf-8")
    except UnicodeDecodeError:
        for report in live:
            report.notes.append(f"{path.name} is not UTF-8; it was left alone")
        return
    new, missing = apply_todo_edits(text, [e for _, e in edits])
    for task in missing:
        for report in live:
            if report.task == task:
                report.notes.append(
                    f"{path.name} has no section for task {task}; state.json was updated"
                )
    if new != text:
        try:
            atomic_write(specs, name, new.encode("utf-8"), crash_label="todo")
        except (OSError, StoreError) as exc:
            mark_incomplete(live, os_problem(exc, f"{path.name} could not be written"))


def _reruns(journal: Journal, ready: Sequence[Ready]) -> frozenset[int] | None:
    """The tasks whose file, these very bytes, the journal shows post-flighted already (None:
    no journal to ask; the task entries then decide)."""
    if not journal.enabled:
        return None
    out = set()
    for item in ready:
        report, raw = item.report, item.report.loaded.raw
        if raw is None:
            continue
        if journal.was_postflighted(
            root=str(report.root),
            file=report.rel_path,
            task=report.task,
            content=content_text(raw),
        ):
            out.add(item.task)
    return frozenset(out)
