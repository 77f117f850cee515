"""Clean up: the metadata file of an applied outcome deleted, and what a crash left behind.

The file is deleted only when it is still what was applied, inside the very task directory
it was read from; a deletion a crash interrupted is finished or undone after checking that
the journal holds the file's content (``clean_litter``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from postflightd.config import Config
from postflightd.fs.atomic import delete_if_unchanged
from postflightd.fs.directory import Directory, StoreError
from postflightd.fs.faults import crash_point
from postflightd.fs.litter import (
    Leftover,
    deletions_left_aside,
    read_leftover,
    remove_stale_temps,
    settle_leftover,
)
from postflightd.fs.locks import LockTimeoutError, project_lock
from postflightd.models.files import LOOP_GUARD_NAME, MARKER_NAME, META_NAME
from postflightd.pipeline.unrecordable import printable
from postflightd.project.metafiles import parse_task_dir
from postflightd.project.root import Project, os_problem

if TYPE_CHECKING:
    from postflightd.journal.database import Journal
    from postflightd.pipeline.results import FileReport


def delete_applied(project: Project, report: FileReport) -> bool:
    """Delete the metadata file if it is still what was processed, then the markers.

    All of it inside the task directory the file was read from (``Project.task_dir``).
    """
    # Imported here, not at the top: clean_litter runs at every stop of the hook (even one
    # with no metadata file), and these bring the metadata models and the rules.
    from postflightd.pipeline.records import NO_JOURNAL
    from postflightd.pipeline.results import Outcome
    from postflightd.project.meta_file import read_marker

    identity = report.loaded.identity
    if NO_JOURNAL in report.notes or identity is None:
        # Without the journal row its content would be lost; without the identity it was read
        # with (a file never read whole), nothing proves it unchanged: kept either way.
        return False
    crash_point("before-delete")
    try:
        task = project.task_dir(report.path, report.loaded.dir_identity)
    except OSError:
        # Swapped for a link or another directory since it was read: nothing is deleted
        # there; the file, wherever it went, is applied again (harmlessly) when it is seen.
        report.outcome = Outcome.GONE
        report.notes.append("applied, but its task directory was replaced; nothing was deleted")
        return False
    with task:
        try:
            deleted = delete_if_unchanged(task, META_NAME, identity)
        except (OSError, StoreError) as exc:
            report.notes.append(
                os_problem(exc, "applied, but the file could not be deleted")
                + "; applying it again is harmless"
            )
            return False
        if not deleted:
            report.outcome = Outcome.REWRITTEN if task.lstat(META_NAME) else Outcome.GONE
            return False
        marker = read_marker(task)
        if marker is None or marker.session_id in (None, report.session):
            for name in (MARKER_NAME, LOOP_GUARD_NAME):
                # A marker that cannot be removed is harmless: it only names a session.
                with contextlib.suppress(OSError):
                    task.unlink(name)
    crash_point("after-delete")
    return True


def clean_litter(
    project: Project,
    config: Config,
    journal: Journal | Callable[[], Journal],
    task_dirs: Iterable[str] | None = None,
) -> list[str]:
    """Remove what a killed postflightd left behind; one line per file, for the log.

    Temporary files beside state.json, TODO.md and errors.json go when their writer is dead.
    A metadata file renamed aside for deletion (``..return-meta.json.PID.HEX.deleting``) goes
    only when the journal holds a ``postflighted`` row with exactly its content; otherwise it
    is put back as ``.return-meta.json`` (processed again, which is harmless), or kept when a
    newer file took that name. ``journal``: the journal, or what opens it, called only for
    such a file. ``task_dirs``: the task directories to look in (None: all).
    Takes the project lock.
    """
    specs = project.specs
    if specs is None:
        return []
    if task_dirs is None:
        task_dirs = _task_dir_names(specs)
    notes: list[str] = []
    files = config.postflight
    names = frozenset({files.state_file, files.todo_file, files.errors_file})
    try:
        # One try at the lock: a writer holding it may be mid-write (its temporary file and
        # its aside file are in use), and whoever runs next under the lock looks again.
        with project_lock(specs, timeout_s=0):
            for path in remove_stale_temps(specs, names):
                notes.append(
                    f"removed {printable(path.name)}, a temporary file a killed writer left"
                )
            for name in task_dirs:
                try:
                    task = specs.subdir(name, listable=True)
                except OSError:
                    continue  # never entered through a link
                with task:
                    for leftover in deletions_left_aside(task, META_NAME):
                        notes.append(_settle(project, config, journal, task, leftover))
    except LockTimeoutError:
        pass
    except (OSError, StoreError) as exc:
        # Not writable: the postflight that follows says so for each file.
        notes.append(os_problem(exc, "crash leftovers were not checked"))
    return notes


def _task_dir_names(specs: Directory) -> list[str]:
    try:
        return [e.name for e in specs.names() if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _settle(
    project: Project,
    config: Config,
    journal: Journal | Callable[[], Journal],
    task: Directory,
    leftover: Leftover,
) -> str:
    """Finish or undo one interrupted deletion in ``task``, checking the journal first."""
    # Here, not at the top: the hook cleans up at every stop, and most stops find nothing
    # to settle and open no journal (sqlite3 and the journal's module: a tenth of such a stop).
    from postflightd.journal.database import content_text

    rel = printable(str(leftover.path.relative_to(project.root)))
    raw = read_leftover(task, leftover, config.validation.max_file_bytes)
    recorded = False
    if raw is not None:
        meta = leftover.path.with_name(META_NAME)
        parsed = parse_task_dir(meta.parent.name)
        if callable(journal):
            journal = journal()
        recorded = journal.was_postflighted(
            root=str(project.root),
            file=meta.relative_to(project.root).as_posix(),
            task=parsed[0] if parsed else None,
            content=content_text(raw),
        )
    try:
        done = settle_leftover(task, leftover, recorded=recorded)
    except OSError as exc:
        return f"{rel}: a deletion interrupted by a crash could not be finished: {exc.strerror}"
    if done == "removed":
        return f"removed {rel}: a deletion interrupted by a crash (its content is in the journal)"
    if done == "restored":
        return (
            f"restored {rel} as {META_NAME}: its deletion was interrupted by a crash and the "
            "journal does not hold its content; it is processed again"
        )
    return (
        f"kept {rel}: its deletion was interrupted by a crash, the journal does not hold its "
        f"content and a newer {META_NAME} exists; look at it, then delete it"
    )
