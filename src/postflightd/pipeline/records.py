"""What the pipeline records of a file: a journal row per step, errors.json records.

A journal row for every step a file goes through (validated, postflighted, deleted,
interrupted, stuck); an errors.json record for an invalid file, an interrupted run or a
stuck one, added under the project lock, without duplicates (``postflight.errors_json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from postflightd.config import Config
from postflightd.fs.atomic import Snapshot, TooLargeError, replace_if_unchanged
from postflightd.fs.directory import StoreError
from postflightd.fs.locks import project_lock
from postflightd.inert import clip, utf8_safe
from postflightd.journal.changes import TaskChange
from postflightd.journal.database import (
    Journal,
    JournalKind,
    content_text,
    identity_text,
)
from postflightd.models.files import META_NAME, parse_json
from postflightd.pipeline.results import FileReport
from postflightd.pipeline.unrecordable import UNWRITABLE
from postflightd.postflight.errors_json import (
    ACCEPTED_FORMS,
    VALIDATION_FAILED,
    document_text,
    error_key,
    error_list,
    error_record,
    errors_text,
    mark_fixed,
    merge_errors,
)
from postflightd.project.root import LOCK_TIMEOUT_S, Project, os_problem
from postflightd.rules.findings import Finding, Severity

if TYPE_CHECKING:
    from postflightd.postflight.errors_json import ErrorRecord

#: The code of an outcome not all written (TODO.md or errors.json): the file is kept.
INCOMPLETE = "PF606"


def journal_row(
    journal: Journal,
    kind: JournalKind,
    report: FileReport,
    *,
    content: bool = False,
    change: TaskChange | None = None,
) -> bool:
    """Record a ``kind`` row of ``report`` in the journal; False when no row can hold it.

    A ``validated`` row holds the file's findings; an ``incomplete`` one, why its outcome is
    not all written (PF606). The file's identity goes with it, so that the same content seen
    again with the same findings is not recorded twice (``Journal.record``).
    """
    raw = report.loaded.raw
    identity = report.loaded.identity
    if kind == "validated":
        findings: list[dict[str, str]] | None = [_finding_row(f) for f in report.findings]
    elif kind == "incomplete":
        findings = [_finding_row(f) for f in report.findings if f.code == INCOMPLETE]
    else:
        findings = None
    try:
        return journal.record(
            kind,
            root=str(report.root),
            file=report.rel_path,
            task=report.task,
            session=report.session,
            status=report.raw_status,
            findings=findings,
            content=content_text(raw) if content and raw is not None else None,
            change=change,
            agent=agent_type(report),
            identity=(
                identity_text(identity.dev, identity.ino, identity.size, identity.mtime_ns)
                if identity is not None
                else None
            ),
            leftover=report.validation is not None and report.validation.leftover,
        )
    except (UnicodeEncodeError, OverflowError):
        # A value no row can hold (a finding quoting a lone surrogate): this row is skipped;
        # sqlite3 refused it before it touched the transaction, so the batch goes on.
        return False


def _finding_row(f: Finding) -> dict[str, str]:
    """A finding as a journal row keeps it: what ``scan --format json`` shows, and its fix."""
    row = f.to_json()
    if f.fix is not None:
        row["fix"] = utf8_safe(f.fix)
    return row


def _metadata(report: FileReport) -> dict[str, Any]:
    """The file's ``metadata`` object, or an empty one, whatever else is wrong with it."""
    doc = report.loaded.doc
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return meta if isinstance(meta, dict) else {}


def agent_type(report: FileReport) -> str | None:
    """``metadata.agent_type`` when it is a string, encodable: a journal row must not be lost
    to a lone surrogate."""
    agent = _metadata(report).get("agent_type")
    return utf8_safe(agent) if isinstance(agent, str) else None


#: The most delegation_path entries an errors.json record copies.
MAX_PATH_ENTRIES = 32


def _record_for(
    report: FileReport,
    kind: str,
    message: str,
    action: str,
    now: datetime,
    n: int,
    recoverable: bool = True,
) -> ErrorRecord:
    meta = _metadata(report)
    path = meta.get("delegation_path")
    agent = meta.get("agent_type")
    return error_record(
        kind,
        message,
        session=clip(report.session) if report.session is not None else None,
        task=report.task,
        # Bounded: errors.json keeps a record per failed run, whatever length its values are.
        agent_type=clip(agent) if isinstance(agent, str) else None,
        file=report.rel_path,
        delegation_path=[clip(p) for p in path[:MAX_PATH_ENTRIES] if isinstance(p, str)]
        if isinstance(path, list)
        else None,
        now=now,
        n=n,
        recoverable=recoverable,
        suggested_action=action,
    )


def invalid_record(report: FileReport, now: datetime, n: int) -> ErrorRecord:
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    codes = ", ".join(sorted({f.code for f in errors})) or "warnings (strict)"
    first = errors[0].message if errors else "see `postflightd scan`"
    return _record_for(
        report,
        "validation_failed",
        f"{report.rel_path} failed validation ({codes}); it was not applied",
        f"Fix the metadata file, then it is applied: {first}",
        now,
        n,
    )


def interrupted_record(report: FileReport, now: datetime, n: int) -> ErrorRecord:
    return _record_for(
        report,
        "delegation_interrupted",
        f"the agent's run ended while its metadata still said in_progress ({report.rel_path})",
        "Resume the task: run the same command again; the task status was left as it was",
        now,
        n,
    )


def record_stuck(
    project: Project,
    report: FileReport,
    config: Config,
    journal: Journal,
    now: datetime,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
) -> bool:
    """Record a stuck run: an errors.json ``timeout`` record (once per session), a journal row."""
    validation = report.validation
    timeout = validation.timeout_s if validation else None
    record = _record_for(
        report,
        "timeout",
        f"agent stuck: in_progress past the {validation.operation if validation else ''} "
        f"timeout of {int(timeout or 0)} s ({report.rel_path})",
        "The agent probably died: resume or restart the run; its metadata file is kept",
        now,
        0,
    )
    with project_lock(project.require_specs(), lock_timeout_s):
        added = _append_errors(project, config, [record], [report], now)
    journal_row(journal, "stuck", report)
    return added > 0


#: The largest errors.json postflightd reads: about 20,000 records. A larger one is refused
#: unread (and never overwritten), so a runaway log costs one fstat, not its whole size in
#: memory at every postflight.
MAX_ERRORS_BYTES: Final = 16 * 1024 * 1024


def write_errors(
    project: Project,
    config: Config,
    records: list[ErrorRecord],
    now: datetime,
    *,
    present: set[tuple[str, str, str]] | None = None,
    fixed: Set[int] = frozenset(),
    flipped: set[int] | None = None,
) -> str | None:
    """Add records to errors.json, de-duplicated, and set the ``validation_failed`` records of
    the tasks in ``fixed`` (applied since) to fixed; None, or why that could not be written.

    ``present`` gets the keys (``error_key``) of the records errors.json already held;
    ``flipped`` the tasks of ``fixed`` that had such a record, written or not.
    """
    added = _add_errors(project, config, records, now, present, fixed, flipped)
    return added if isinstance(added, str) else None


def _add_errors(
    project: Project,
    config: Config,
    records: list[ErrorRecord],
    now: datetime,
    present: set[tuple[str, str, str]] | None = None,
    fixed: Set[int] = frozenset(),
    flipped: set[int] | None = None,
) -> int | str:
    """The number of records added to errors.json, or why none could be."""
    if not records and not fixed:
        return 0
    specs, name = project.require_specs(), config.postflight.errors_file
    path = specs.child(name)
    count = 0

    def transform(snapshot: Snapshot) -> bytes | None:
        nonlocal count
        count = 0
        if flipped is not None:
            flipped.clear()
        doc: Any = None
        text = ""
        existing: list[Any] = []
        if snapshot.raw is not None:
            if not records and _VALIDATION_FAILED not in snapshot.raw:
                return None  # nothing to add, nothing that a fix could concern: not parsed
            doc, problem = parse_json(snapshot.raw)
            held = error_list(doc) if problem is None else problem
            if isinstance(held, str):
                raise _ErrorsFileUnusableError(held)
            existing = held
            text = snapshot.raw.decode("utf-8")
        writable = []
        for record in records:
            try:
                errors_text([record])
            except UNWRITABLE:
                continue  # the file it belongs to was dropped (PF106) before state.json
            writable.append(record)
        if present is not None:
            held_keys = {error_key(r) for r in existing if isinstance(r, Mapping)}
            present.clear()
            present.update(error_key(r) for r in writable if error_key(r) in held_keys)
        existing, fixes = mark_fixed(existing, fixed, META_NAME)
        if flipped is not None:
            flipped.update(fixes)
        merged, count = merge_errors(existing, writable)
        if not count and not fixes:
            return None
        return document_text(text, doc, merged, now).encode("utf-8")

    try:
        replace_if_unchanged(specs, name, transform, crash_label="errors", limit=MAX_ERRORS_BYTES)
    except TooLargeError:
        if not records:
            return 0  # a fix not recorded in a log too large to read: nothing reported is lost
        return _unusable(path.name, f"larger than {MAX_ERRORS_BYTES // 1024 // 1024} MiB")
    except (OSError, StoreError) as exc:
        return os_problem(exc, f"{path.name} could not be written")
    except _ErrorsFileUnusableError as exc:
        if not records:
            return 0  # as above: the file says so at the next record it cannot take
        return _unusable(path.name, str(exc))
    return count


def _unusable(name: str, why: str) -> str:
    return (
        f"{name} is not usable ({why}); postflightd keeps it as {ACCEPTED_FORMS}: it was not "
        "overwritten and no error was logged"
    )


#: Every validation_failed record holds these bytes: a file without them has none to fix.
_VALIDATION_FAILED: Final = VALIDATION_FAILED.encode()


def _append_errors(
    project: Project,
    config: Config,
    records: list[ErrorRecord],
    reports: list[FileReport],
    now: datetime,
) -> int:
    """Add records to errors.json, de-duplicated; the number added (-1: file unusable)."""
    added = _add_errors(project, config, records, now)
    if isinstance(added, str):
        for report in reports:
            report.notes.append(added)
        return -1
    return added


class _ErrorsFileUnusableError(Exception):
    """errors.json is neither of the forms postflightd keeps: it is never overwritten."""


NO_JOURNAL = "the journal is unavailable, so the file is kept (its content would be lost)"
