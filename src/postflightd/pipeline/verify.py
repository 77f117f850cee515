"""Outcomes the journal recorded that the project no longer shows: check, repair.

A writer that ignores the lock (``jq ... > tmp && mv tmp state.json``) and read state.json
before a postflight wrote it puts back, when it writes, the task entries as they were before
that postflight: the outcome is silently lost, and the metadata file is already deleted. The
journal records each postflight's task entry before and after (``TaskChange``), so the check
is exact:

* the entry is the ``after`` -> the outcome is shown;
* the entry is exactly a pre-postflight version -> **lost**: the signature of a lost update,
  re-applied (from the journal, under the lock) by ``verify --repair`` and the daemon;
* anything else is someone's edit, never fought: **reverted** when a value the postflight set
  is back to its old one, **superseded** when only newer values replace them (a workflow's
  preflight moving the status on), **removed** when the task left ``active_projects``.

The pure part (``track``, ``judge``, ``todo_not_shown``, ``heal_state``) takes data and
returns data; ``inspect_root`` and ``repair_root`` are the thin I/O around it (the daemon's
``Healer`` calls them: healer.py; the command: commands/verify.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from postflightd.config import Config
from postflightd.errors import ExitCode, StateUnusableError
from postflightd.fs.atomic import Snapshot, read_snapshot, replace_if_unchanged
from postflightd.fs.directory import Directory, StoreError, open_specs
from postflightd.fs.faults import crash_point
from postflightd.fs.litter import remove_stale_temps
from postflightd.fs.locks import project_lock
from postflightd.journal.changes import TaskChange
from postflightd.journal.database import Journal
from postflightd.journal.rows import RecordedChange
from postflightd.logs import get_logger
from postflightd.postflight.state_text import render_state
from postflightd.postflight.todo_edit import apply_todo_edits
from postflightd.postflight.transform import TodoEdit, find_task, task_index
from postflightd.project.state import STATE_CACHE, StateView, load_state, parse_state
from postflightd.rules.findings import state_unusable_text

log = get_logger()

#: ``verify`` looks this far back when given no ``--since``: a day of agent work.
DEFAULT_SINCE: Final = "24h"

_MISSING: Final = object()


class Verdict(StrEnum):
    """What state.json (and TODO.md) show of one recorded outcome."""

    SHOWN = "shown"
    LOST = "lost"  # the entry is exactly a pre-postflight version: a lost update, repairable
    REVERTED = "reverted"  # a value the outcome set is back to its old one: someone's edit
    SUPERSEDED = "superseded"  # newer values replaced the outcome's: built upon, not lost
    REMOVED = "removed"  # the task left active_projects
    TODO = "todo"  # state.json shows it; TODO.md's section no longer does

    @property
    def fails(self) -> bool:
        """Something the outcome wrote is gone: ``verify`` exits 1."""
        return self in (Verdict.LOST, Verdict.REVERTED, Verdict.TODO)


# --- the pure part ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tracked:
    """The latest recorded postflight of one task, and the entries that are "before" it.

    Only the latest counts (a later postflight supersedes). ``befores`` holds its own
    ``before`` and, while the task's postflights followed one another (each one's ``before``
    the previous one's ``after``), theirs too: a writer that read before the first of them
    puts back the oldest, and that is as much a lost update as putting back the newest.
    """

    latest: RecordedChange
    befores: tuple[Any, ...]

    @property
    def task(self) -> int:
        return self.latest.task

    @property
    def after(self) -> Any:
        return self.latest.change.after


def track(
    changes: Iterable[RecordedChange], into: dict[int, Tracked] | None = None
) -> dict[int, Tracked]:
    """Task -> ``Tracked``, from one root's recorded changes in journal order (oldest first)."""
    tracked = {} if into is None else into
    for change in changes:
        previous = tracked.get(change.task)
        if previous is not None and change.id <= previous.latest.id:
            continue
        befores: tuple[Any, ...] = (change.change.before,)
        if previous is not None and change.change.before == previous.after:
            befores = (*previous.befores, change.change.before)
        tracked[change.task] = Tracked(change, befores)
    return tracked


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    #: the keys of the entry the outcome set that are back to their old value / newer since
    reverted: tuple[str, ...] = ()
    superseded: tuple[str, ...] = ()


def judge(entry: Any, tracked: Tracked) -> Judgement:
    """The verdict for the task's current state.json entry (``None``: the task is gone)."""
    after = tracked.after
    if entry is None:
        return Judgement(Verdict.REMOVED)
    if entry == after:
        return Judgement(Verdict.SHOWN)
    if any(entry == before for before in tracked.befores):
        return Judgement(Verdict.LOST)
    before = tracked.latest.change.before
    if not (isinstance(entry, dict) and isinstance(after, dict) and isinstance(before, dict)):
        return Judgement(Verdict.REVERTED)
    reverted: list[str] = []
    superseded: list[str] = []
    for key in dict.fromkeys([*before, *after]):
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if old == new:
            continue  # not the outcome's doing
        now = entry.get(key, _MISSING)
        if now == new:
            continue
        (reverted if now == old else superseded).append(key)
    if reverted:
        return Judgement(Verdict.REVERTED, tuple(reverted), tuple(superseded))
    if superseded:
        return Judgement(Verdict.SUPERSEDED, (), tuple(superseded))
    # Every value the outcome set is still there; only other keys changed since.
    return Judgement(Verdict.SHOWN)


def entry_of(doc: Mapping[str, Any], task: int, index: Mapping[int, int]) -> Any:
    """The task's entry in a state.json document (the first one, as postflight finds it)."""
    try:
        return doc["active_projects"][find_task(doc, task, index)]
    except KeyError:
        return None


def todo_edits(tracked: Tracked) -> list[TodoEdit]:
    """The TODO.md edits the task's latest postflight made, as ``TodoEdit`` values."""
    return [TodoEdit.from_json(tracked.task, raw) for raw in tracked.latest.change.todo]


def todo_not_shown(text: str, tracked: Sequence[Tracked]) -> set[int]:
    """The tasks whose TODO.md section no longer shows their latest postflight's edits.

    Shown means re-applying the edits changes nothing: the Status line has the marker, the
    label lines link every artifact, the Completed date is there. A task without a section
    is not counted (postflight only warned about it). One pass over the file when everything
    is shown, the common case; one per task otherwise.
    """
    edits = {t.task: todo_edits(t) for t in tracked}
    every = [e for task_edits in edits.values() for e in task_edits]
    if not every:
        return set()
    new, _missing = apply_todo_edits(text, every)
    if new == text:
        return set()
    out: set[int] = set()
    for task, task_edits in edits.items():
        if task_edits:
            new, missing = apply_todo_edits(text, task_edits)
            if new != text and not missing:
                out.add(task)
    return out


def heal_state(
    doc: dict[str, Any], tracked: Iterable[Tracked]
) -> tuple[dict[str, Any], list[tuple[Tracked, Any]]]:
    """The document with every lost outcome's entry set back to its journaled ``after``.

    Returns the new document (unchanged parts shared) and ``(tracked, entry found)`` for each
    outcome re-applied. Only an entry that is exactly a pre-postflight version is touched:
    that is re-applying the postflight (the transform is pure, so it gives ``after`` again
    from the same ``before``), without depending on today's configuration or clock.
    """
    index = task_index(doc)
    projects = doc.get("active_projects")
    if not isinstance(projects, list):
        return doc, []
    new_projects = list(projects)
    healed: list[tuple[Tracked, Any]] = []
    for t in tracked:
        entry = entry_of(doc, t.task, index)
        if judge(entry, t).verdict is not Verdict.LOST:
            continue
        new_projects[find_task(doc, t.task, index)] = t.after
        healed.append((t, entry))
    if not healed:
        return doc, []
    return {**doc, "active_projects": new_projects}, healed


# --- one root: read, judge, repair ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Check:
    """One recorded outcome and what the project shows of it."""

    tracked: Tracked
    judgement: Judgement
    repaired: bool = False

    @property
    def verdict(self) -> Verdict:
        return Verdict.SHOWN if self.repaired else self.judgement.verdict

    def to_json(self) -> dict[str, Any]:
        c = self.tracked.latest
        return {
            "root": c.root,
            "task": c.task,
            "file": c.file,
            "session": c.session,
            "status": c.status,
            "postflighted_at": c.ts,
            "journal_id": c.id,
            "verdict": self.judgement.verdict.value,
            "repaired": self.repaired,
            "reverted": list(self.judgement.reverted),
            "superseded": list(self.judgement.superseded),
        }


@dataclass(slots=True)
class RootCheck:
    root: Path
    checks: list[Check] = field(default_factory=list)
    #: state.json unusable (nothing could be judged), or a note about TODO.md
    problem: str | None = None
    notes: list[str] = field(default_factory=list)


def state_view(root: Path, config: Config) -> StateView:
    """state.json of ``root``, read through the tree layer (no link is followed)."""
    try:
        with open_specs(root, config.specs_dir) as specs:
            return load_state(specs, config.postflight.state_file)
    except OSError as exc:
        path = _state_path(root, config)
        return StateView(path, exists=False, problem=f"{path.parent}: {exc.strerror or exc}")


def _state_path(root: Path, config: Config) -> Path:
    return root / config.specs_dir / config.postflight.state_file


def judge_all(
    doc: Mapping[str, Any], tracked: Mapping[int, Tracked], todo_text: str | None
) -> list[Check]:
    """Every tracked outcome judged against the state.json document and TODO.md's text."""
    index = task_index(doc)
    checks = [Check(t, judge(entry_of(doc, t.task, index), t)) for t in tracked.values()]
    if todo_text is not None:
        shown = [c.tracked for c in checks if c.judgement.verdict is Verdict.SHOWN]
        missing = todo_not_shown(todo_text, shown)
        checks = [
            Check(c.tracked, Judgement(Verdict.TODO)) if c.tracked.task in missing else c
            for c in checks
        ]
    return sorted(checks, key=lambda c: c.tracked.task)


def _read_todo(specs: Directory, config: Config, notes: list[str]) -> str | None:
    if not config.postflight.sync_todo:
        return None
    path = specs.child(config.postflight.todo_file)
    try:
        raw = read_snapshot(specs, config.postflight.todo_file).raw
    except StoreError as exc:
        notes.append(f"{exc}; TODO.md was not checked")
        return None
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        notes.append(f"{path.name} is not UTF-8; it was not checked")
        return None


def inspect_root(root: Path, config: Config, journal: Journal, since: str) -> RootCheck:
    """Judge every outcome of ``root`` recorded at or after ``since`` (no lock, no write)."""
    result = RootCheck(root)
    tracked = track(journal.changes(roots=[str(root)], since=since))
    if not tracked:
        return result
    try:
        specs = open_specs(root, config.specs_dir)
    except OSError as exc:
        result.problem = state_unusable_text(f"{root / config.specs_dir}: {exc.strerror or exc}")
        return result
    with specs:
        view = load_state(specs, config.postflight.state_file)
        if view.doc is None:
            result.problem = state_unusable_text(view.problem or "state.json is unusable")
            return result
        result.checks = judge_all(view.doc, tracked, _read_todo(specs, config, result.notes))
    return result


def _parse_state(snapshot: Snapshot) -> tuple[str, dict[str, Any]]:
    if snapshot.raw is None:
        raise StateUnusableError(state_unusable_text(f"{snapshot.path}: does not exist"))
    text = snapshot.raw.decode("utf-8", errors="strict")
    cached = STATE_CACHE.get(snapshot.path, snapshot.raw)
    if cached is not None and cached.doc is not None:
        return text, cached.doc
    # parse_state, not json.loads: a document nested too deeply is unusable, not a crash.
    doc, problem = parse_state(snapshot.raw)
    if problem is not None:
        raise StateUnusableError(state_unusable_text(f"{snapshot.path}: {problem}"))
    return text, doc


def repair_root(
    root: Path,
    config: Config,
    journal: Journal,
    since: str,
    *,
    tasks: set[int] | None = None,
    lock_timeout_s: float = 30.0,
) -> RootCheck:
    """Under the lock, re-apply every lost outcome of ``root`` (of ``tasks``, when given).

    Everything is read again under the lock, the journal included: a cooperating writer that
    committed meanwhile has journaled its outcome too, so nothing it did is taken for a loss.
    The write is the one every postflight makes (``fs.atomic.replace_if_unchanged``: atomic,
    and re-applied if a writer that does not lock replaces the file meanwhile;
    ``render_state``: formatting kept). A healed task's TODO.md edits are re-applied too, before
    state.json (see below); they are idempotent.
    """
    result = RootCheck(root)
    specs_dir = root / config.specs_dir
    healed: list[tuple[Tracked, Any]] = []
    try:
        with (
            open_specs(root, config.specs_dir) as specs,
            project_lock(specs, timeout_s=lock_timeout_s),
        ):
            # What a killed writer left beside the files repaired (a repair killed mid-write).
            files = config.postflight
            remove_stale_temps(specs, frozenset({files.state_file, files.todo_file}))
            tracked = track(journal.changes(roots=[str(root)], since=since))
            wanted = [t for t in tracked.values() if tasks is None or t.task in tasks]

            def transform(snapshot: Snapshot) -> bytes | None:
                nonlocal healed
                text, doc = _parse_state(snapshot)
                new, healed = heal_state(doc, wanted)
                return render_state(text, doc, new).encode("utf-8") if healed else None

            if wanted and config.postflight.sync_todo:
                # TODO.md first: a repair killed between the two writes then leaves state.json
                # still showing the loss, and running it again finishes both. The other order
                # would leave a TODO.md section that no repair rewrites (a stale section alone
                # is only reported: nothing in TODO.md proves which version is stale).
                found = load_state(specs, config.postflight.state_file).doc
                _, losses = heal_state(found, wanted) if found is not None else (None, [])
                if losses:
                    _reapply_todo(specs, config, [t for t, _ in losses], result.notes)
            if wanted:
                replace_if_unchanged(
                    specs, config.postflight.state_file, transform, crash_label="state"
                )
            with journal.batch(durable=False):
                for t, entry in healed:
                    journal.record(
                        "reapplied",
                        root=t.latest.root,
                        file=t.latest.file,
                        task=t.task,
                        session=t.latest.session,
                        status=t.latest.status,
                        change=TaskChange(entry, t.after, t.latest.change.todo),
                        ref=t.latest.id,
                    )
            crash_point("repair:after-journal")
            if healed and config.postflight.sync_todo:
                # Those whose loss showed only under the lock's second read (their edits are
                # idempotent: the others' write nothing).
                _reapply_todo(specs, config, [t for t, _ in healed], result.notes)
            view = load_state(specs, config.postflight.state_file)
            if view.doc is None:
                result.problem = state_unusable_text(view.problem or "state.json is unusable")
                return result
            todo_text = _read_todo(specs, config, result.notes)
            checks = judge_all(view.doc, {t.task: t for t in wanted}, todo_text)
    except (UnicodeDecodeError, json.JSONDecodeError, StateUnusableError) as exc:
        result.problem = (
            str(exc) if isinstance(exc, StateUnusableError) else state_unusable_text(str(exc))
        )
        return result
    except (OSError, StoreError) as exc:
        result.problem = f"cannot repair in {specs_dir}: {exc}"
        return result
    ids = {t.latest.id for t, _ in healed}
    # A repaired outcome is reported as what was found (lost), and repaired.
    result.checks = [
        Check(c.tracked, Judgement(Verdict.LOST), repaired=True)
        if c.tracked.latest.id in ids
        else c
        for c in checks
    ]
    return result


def _reapply_todo(
    specs: Directory, config: Config, healed: list[Tracked], notes: list[str]
) -> None:
    edits = [e for t in healed for e in todo_edits(t)]
    if not edits:
        return

    def transform(snapshot: Snapshot) -> bytes | None:
        if snapshot.raw is None:
            return None
        text = snapshot.raw.decode("utf-8")
        new, _missing = apply_todo_edits(text, edits)
        return new.encode("utf-8") if new != text else None

    try:
        replace_if_unchanged(specs, config.postflight.todo_file, transform, crash_label="todo")
    except UnicodeDecodeError:
        notes.append("TODO.md is not UTF-8; it was left alone")
    except (OSError, StoreError) as exc:
        notes.append(f"TODO.md could not be written: {exc}")


# --- the result of `verify` ----------------------------------------------------------------


@dataclass(slots=True)
class VerifyReport:
    since: str
    repair: bool
    roots: list[RootCheck]

    def listed(self) -> list[Check]:
        return [c for r in self.roots for c in r.checks if c.judgement.verdict is not Verdict.SHOWN]

    def summary(self) -> dict[str, int]:
        counts = {"checked": sum(len(r.checks) for r in self.roots)}
        for verdict in Verdict:
            counts[verdict.value] = sum(
                1 for r in self.roots for c in r.checks if c.verdict is verdict
            )
        counts["repaired"] = sum(1 for r in self.roots for c in r.checks if c.repaired)
        return counts

    @property
    def exit_code(self) -> int:
        if any(r.problem is not None for r in self.roots):
            return int(ExitCode.STATE_UNUSABLE)
        failing = any(c.verdict.fails for r in self.roots for c in r.checks)
        return int(ExitCode.FINDINGS if failing else ExitCode.OK)

    def to_json(self) -> dict[str, Any]:
        return {
            "roots": [str(r.root) for r in self.roots],
            "since": self.since,
            "repair": self.repair,
            "outcomes": [c.to_json() for c in self.listed()],
            "problems": [
                {"root": str(r.root), "problem": r.problem} for r in self.roots if r.problem
            ],
            "notes": [{"root": str(r.root), "note": n} for r in self.roots for n in r.notes],
            "summary": self.summary(),
        }
