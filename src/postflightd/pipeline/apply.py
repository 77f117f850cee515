"""The pipeline every command runs, stage by stage; each stage lives in its own module.

    find, read             project.metafiles, project.meta_file, project.state, through
                           project.root (a root, its specs directory opened once)
    validate               rules.metadata; check runs reading and rules per file (parallel:
                           a large scan)
    follow the run         runs.lifecycle, through the rules
    postflight, pure       postflight.transform, state_text, todo_edit + todo_sections,
                           errors_json
    postflight, written    group_commit (state.json, journal, TODO.md), records (errors.json)
    clean up               cleanup

``scan`` checks every file of the roots (and applies them with ``--apply``), ``apply_all``
applies every ready file of one project, ``apply_files`` the files it is given (``process``,
the hook, the daemon).

It never prints and never exits: it returns reports (``pipeline.results``), and their ``exit_code``
decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from postflightd.config import Config
from postflightd.fs.directory import StoreError
from postflightd.fs.locks import project_lock
from postflightd.journal.database import Journal
from postflightd.models.terms import Status
from postflightd.pipeline.check import Only, check_file, check_specs_dir, metadata_refs
from postflightd.pipeline.cleanup import clean_litter, delete_applied
from postflightd.pipeline.records import (
    interrupted_record,
    invalid_record,
    journal_row,
    write_errors,
)
from postflightd.pipeline.results import FileReport, Outcome, Ready
from postflightd.pipeline.unrecordable import unrecordable
from postflightd.postflight.errors_json import error_key
from postflightd.project.metafiles import MetaFileRef
from postflightd.project.root import LOCK_TIMEOUT_S, Project, os_problem
from postflightd.rules.findings import (
    STATE_UNUSABLE,
    Finding,
    Policy,
    Severity,
    finding,
    state_unusable,
)

if TYPE_CHECKING:
    from postflightd.pipeline.summaries import ScanReport
    from postflightd.postflight.errors_json import ErrorRecord


def scan(
    roots: Iterable[Path],
    config: Config,
    policy: Policy,
    now: datetime,
    only: Only = None,
    *,
    positions: bool = False,
) -> ScanReport:
    """Validate every metadata file under each root (``scan``), all in memory.

    ``positions``: the output needs findings' lines and columns. Reporters
    find them from the bytes each report keeps; only the files checked in a forked process
    (whose bytes are not sent back) get them here.
    """
    # Here, not at the top: the stop hook applies files with this module, and neither makes a
    # scan's report nor streams a scan.
    from postflightd.pipeline.stream import scan_files
    from postflightd.pipeline.summaries import ScanReport

    report = ScanReport(roots=list(roots), strict=policy.strict)
    files = scan_files(report.roots, config, policy, now, only, positions=positions)
    report.files.extend(files.reports(report.notes.append))
    return report


def _projects(
    report: ScanReport, config: Config, only: Only = None
) -> Iterator[tuple[Project, Sequence[MetaFileRef]]]:
    """Each root of ``report`` with its metadata files; a root without specs/ is a note."""
    for root in report.roots:
        with Project.open(root, config) as project:
            if project.specs is None:
                if project.specs_problem is not None:
                    report.refused = True
                    report.notes.append(project.specs_problem)
                    continue
                check_specs_dir(root, config)
                report.notes.append(f"{root}: no {config.specs_dir}/ directory; nothing to scan")
                continue
            yield project, metadata_refs(project, only)


# --- postflight: apply, record, clean up ----------------------------------------------------


def apply_all(
    roots: Iterable[Path],
    config: Config,
    policy: Policy,
    journal: Journal,
    now: datetime,
    only: Only = None,
) -> ScanReport:
    """``scan --apply``: validate everything, post-flight every valid final file."""
    from postflightd.pipeline.summaries import ScanReport  # as in ``scan``

    report = ScanReport(roots=list(roots), strict=policy.strict)
    for project, listed in _projects(report, config, only):
        # A deletion a crash interrupted may have put a metadata file back: list again then.
        notes = clean_litter(project, config, journal)
        report.notes.extend(f"{project.root}: {note}" for note in notes)
        refs = metadata_refs(project, only) if notes else listed
        report.files.extend(apply_files(project, refs, config, policy, journal, now))
    return report


def apply_files(
    project: Project,
    refs: Sequence[MetaFileRef],
    config: Config,
    policy: Policy,
    journal: Journal,
    now: datetime,
    *,
    report_unparsed: bool = True,
    interrupted: bool = False,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
    first_seen: Mapping[str, datetime] | None = None,
) -> list[FileReport]:
    """Validate ``refs`` and apply every valid final file in one locked commit.

    ``first_seen`` (a file's path -> when postflightd first saw it: the daemon's runs) dates
    the first sight PF607 compares with a file's modification time; a file not in it (every
    file of a command) is first seen now.

    ``report_unparsed=False`` (the watcher, before a file has settled) leaves a file that does
    not parse alone without recording anything. ``interrupted=True`` (``process`` of an
    in_progress file) records a ``delegation_interrupted`` error for it. A lock held by
    another writer past ``lock_timeout_s`` raises LockTimeoutError, nothing applied.

    Each write path runs journal -> state.json -> TODO.md -> errors.json -> delete and stops
    at the first failure, keeping the file (``Outcome.INCOMPLETE``): nothing is deleted while
    a part of its outcome is unwritten. A file whose outcome cannot be recorded at all (PF106)
    drops out of the batch; the others commit.

    Stages, each a function of what the one before returned: ``_triage`` (``triage`` decides
    each file's fate as a value, then it is journaled: which files are ready),
    ``_error_records`` (what errors.json gets for the others), then under the lock ``_commit``
    (the group commit, errors.json, the deletions).
    """
    seen = first_seen or {}
    reports = [
        check_file(project, ref, config, policy, now, first_seen=seen.get(ref.path_text))
        for ref in refs
    ]
    ready = _triage(reports, journal, policy, report_unparsed=report_unparsed)
    if not project.state.usable:
        _refuse_unusable_state(ready, project.state.problem)
        return reports
    records = _error_records(reports, now, interrupted=interrupted)
    if not ready and not records:
        return reports
    try:
        with project_lock(project.require_specs(), lock_timeout_s):
            _commit(project, reports, ready, records, config, journal, now)
    except (OSError, StoreError) as exc:
        # Permission denied on the specs directory or state.json, a full disk: nothing was
        # half-written (every write is atomic); say what and where, keep the files.
        problem = os_problem(exc, f"cannot write in {project.specs_dir}")
        for report in (item.report for item in ready):
            if report.outcome is Outcome.APPLIED:
                report.outcome = Outcome.STATE_UNUSABLE
                report.findings.append(state_unusable(problem, "; the file is kept"))
    if interrupted:
        with journal.batch(durable=False):
            for report in reports:
                if report.outcome is Outcome.IN_PROGRESS:
                    journal_row(journal, "interrupted", report)
    return reports


@dataclass(frozen=True, slots=True)
class Triaged:
    """What triage decided for one checked file, before anything is written or journaled."""

    #: its outcome so far (APPLIED: it goes to the group commit).
    outcome: Outcome
    #: the finding that takes it out of the batch (its outcome becomes INVALID), if any.
    dropped: Finding | None = None
    #: it gets a "validated" journal row (not a deferred file, nor one no row can hold).
    journaled: bool = True
    #: what applying it needs, when it is ready.
    ready: Ready | None = None


def triage(report: FileReport, policy: Policy, *, report_unparsed: bool = True) -> Triaged:
    """Decide what becomes of one checked file: a function of the report, nothing changed."""
    outcome = _classify(report, report_unparsed, policy)
    if outcome is Outcome.DEFERRED:
        return Triaged(outcome, journaled=False)
    unfit = unrecordable(report)
    if unfit is not None:
        # Checked before the first journal row: one such file must not abort the batch's
        # transaction.
        return Triaged(outcome, unfit, journaled=False)
    if outcome is not Outcome.APPLIED:
        return Triaged(outcome)
    item = report.ready()
    if item is None and report.task is None:
        # Valid only because PF104 is ignored: an outcome needs the task's number.
        return Triaged(outcome, _unnumbered(report))
    if item is None:
        # Valid only because the errors that leave it without a usable document are not
        # selected: nothing can be applied from it.
        return Triaged(outcome, _unusable(report))
    return Triaged(outcome, ready=item)


def _triage(
    reports: Sequence[FileReport], journal: Journal, policy: Policy, *, report_unparsed: bool
) -> list[Ready]:
    """Each checked file's triage applied to its report and journaled; the files ready."""
    decided = [triage(report, policy, report_unparsed=report_unparsed) for report in reports]
    # One journal transaction per step, not one per row: a burst of 1,000 files is 3 fsyncs.
    with journal.batch(durable=False):
        for report, triaged in zip(reports, decided, strict=True):
            report.outcome = triaged.outcome
            if triaged.dropped is not None:
                report.drop(triaged.dropped)
            if triaged.journaled:
                journal_row(journal, "validated", report)
    return [triaged.ready for triaged in decided if triaged.ready is not None]


def _refuse_unusable_state(ready: Sequence[Ready], problem: str | None) -> None:
    """state.json is unusable: no file is applied, each says why (PF604), each is kept."""
    for report in (item.report for item in ready):
        report.outcome = Outcome.STATE_UNUSABLE
        if not any(f.code == STATE_UNUSABLE for f in report.findings):
            report.findings.append(
                state_unusable(
                    str(problem),
                    ": postflight needs it (it is never created or overwritten); "
                    "the metadata file is kept",
                )
            )


def _error_records(
    reports: Sequence[FileReport], now: datetime, *, interrupted: bool
) -> list[ErrorRecord]:
    """The errors.json records of the files not applied: the invalid ones, and with
    ``interrupted`` the runs that ended in progress."""
    records = [
        invalid_record(r, now, i)
        for i, r in enumerate(reports)
        # A file that never parsed (PF102, past the settle time) is recorded too: it is
        # what an agent that died mid-write leaves behind.
        if r.outcome is Outcome.INVALID and r.raw_status != Status.IN_PROGRESS.value
    ]
    if interrupted:
        records += [
            interrupted_record(r, now, i)
            for i, r in enumerate(reports)
            if r.outcome is Outcome.IN_PROGRESS
        ]
    return records


def _commit(
    project: Project,
    reports: Sequence[FileReport],
    ready: Sequence[Ready],
    records: list[ErrorRecord],
    config: Config,
    journal: Journal,
    now: datetime,
) -> None:
    """Under the project lock: the group commit, errors.json, then the applied files deleted."""
    errors: list[ErrorRecord] = []
    erroring: list[FileReport] = []
    committed: list[Ready] = []
    if ready:
        # The group commit, and the postflight it brings, imported with a file to apply: a
        # stop over invalid files alone writes their errors.json records and nothing else.
        from postflightd.pipeline.group_commit import commit_outcomes

        applied = commit_outcomes(project, list(ready), config, journal, now)
        errors, erroring, committed = applied.errors, applied.erroring, applied.applied
    # Files the commit found invalid (PF600, PF106) are logged as the others were.
    records = records + [
        invalid_record(r, now, len(records) + i)
        for i, r in enumerate(item.report for item in ready)
        if r.outcome is Outcome.INVALID
    ]
    # Records of invalid files: a failure to write them is a note (the files are kept
    # anyway). Records of applied files are part of their outcome, and so is setting the
    # task's earlier validation_failed records to fixed, once errors.json shows one.
    present: set[tuple[str, str, str]] = set()
    flipped: set[int] = set()
    live = [item for item in committed if item.report.outcome is Outcome.APPLIED]
    problem = write_errors(
        project,
        config,
        records + errors,
        now,
        present=present,
        fixed=frozenset(item.task for item in live),
        flipped=flipped,
    )
    _mark_recorded_before(reports, records, present)
    if problem is not None:
        from postflightd.pipeline.group_commit import mark_incomplete

        mark_incomplete(erroring, problem)
        mark_incomplete((item.report for item in live if item.task in flipped), problem)
        # The others (an invalid file's record, a record of a file applied in full) learn
        # it from a note; an incomplete one's PF606 says it already, with what to do.
        for report in reports:
            if report.outcome is not Outcome.INCOMPLETE:
                report.notes.append(problem)
    deleted = [
        item.report
        for item in ready
        if item.report.outcome is Outcome.APPLIED and delete_applied(project, item.report)
    ]
    with journal.batch(durable=False):
        for report in deleted:
            journal_row(journal, "deleted", report)
        # Kept, and retried until its cause is fixed: one row per cause (a retry that meets
        # the same one repeats the last row, which the journal does not record again).
        for report in (item.report for item in ready):
            if report.outcome is Outcome.INCOMPLETE:
                journal_row(journal, "incomplete", report)


def _mark_recorded_before(
    reports: Sequence[FileReport],
    records: Sequence[ErrorRecord],
    present: set[tuple[str, str, str]],
) -> None:
    """An interrupted run whose errors.json record was there already (``process`` run again on
    the same file): it says so, rather than that it recorded it."""
    held = {
        r["context"]["file"]
        for r in records
        if r["type"] == "delegation_interrupted" and error_key(r) in present
    }
    for report in reports:
        if report.outcome is Outcome.IN_PROGRESS and report.rel_path in held:
            report.recorded_before = True


def _classify(report: FileReport, report_unparsed: bool, policy: Policy) -> Outcome:
    failure = report.loaded.failure
    if failure is not None and failure.code == "PF105" and _vanished(report):
        return Outcome.GONE
    if failure is not None and failure.code == "PF102" and not report_unparsed:
        return Outcome.DEFERRED
    if report.status is Status.IN_PROGRESS:
        # In-progress files belong to a running (or stuck) agent: tracked, never applied.
        return Outcome.IN_PROGRESS
    if report.valid or _valid_but_for_state(report, policy):
        return Outcome.APPLIED
    return Outcome.INVALID


def _vanished(report: FileReport) -> bool:
    # Only the message says it: PF105 is also "permission denied", which is not gone.
    failure = report.loaded.failure
    return failure is not None and "vanished" in failure.message


def _valid_but_for_state(report: FileReport, policy: Policy) -> bool:
    """A file whose only problem is the project's state.json (PF604) is ready, not invalid."""
    if report.validation is None or report.validation.model is None:
        return False
    others = [f for f in report.findings if f.code != STATE_UNUSABLE]
    return len(others) < len(report.findings) and not policy.fails(others)


def _unusable(report: FileReport) -> Finding:
    hidden = [report.loaded.failure] if report.loaded.failure is not None else []
    if report.validation is not None:
        hidden += [f for f in report.validation.findings if f.severity is Severity.ERROR]
    first = hidden[0] if hidden else finding("PF103", "", "not a metadata document")
    return replace(
        first,
        message=f"{first.message} (not applied: {first.code} is filtered out by --select or "
        "--ignore, but postflight needs a valid document)",
    )


def _unnumbered(report: FileReport) -> Finding:
    task_dir = report.path.parent.name
    return finding(
        "PF104",
        "",
        f"task directory {task_dir!r} is not {{number}}_{{slug}}: postflight needs the task "
        "number to apply the file (PF104 is ignored, so it was only checked)",
    )
