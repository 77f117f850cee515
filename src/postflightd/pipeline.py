"""The pipeline every command runs: find -> read -> validate (-> postflight -> clean up).

It never prints and never exits: it returns reports, and ``ScanReport.exit_code`` decides.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from postflightd.config import Config
from postflightd.errors import ConfigError, ExitCode, StateUnusableError, UsageError
from postflightd.findings import Finding, Policy, Severity, expand_codes, finding
from postflightd.journal import Journal, TaskChange
from postflightd.loader import (
    LOOP_GUARD_NAME,
    MARKER_NAME,
    FileIdentity,
    Loaded,
    MetaFileRef,
    StateView,
    artifact_probe,
    cached_state,
    find_metadata_files,
    load_state,
    parse_json,
    parse_task_dir,
    read_marker,
    read_metadata,
    remember_state,
    state_shape_problem,
    task_context,
)
from postflightd.models import Status
from postflightd.positions import with_positions
from postflightd.postflight import (
    TodoEdit,
    apply_outcome,
    error_record,
    find_task,
    merge_errors,
    render_state,
    task_index,
)
from postflightd.rules import (
    ArtifactProbe,
    RuleOptions,
    Validation,
    get_object,
    get_str,
    validate,
)
from postflightd.store import (
    Snapshot,
    StoreError,
    atomic_write,
    commit,
    crash_point,
    delete_if_unchanged,
    project_lock,
    read_snapshot,
)
from postflightd.todo import apply_todo_edits


class Outcome(StrEnum):
    """What postflight did with one metadata file."""

    APPLIED = "applied"  # outcome written to state.json, file deleted
    INVALID = "invalid"  # errors: left in place, reported
    IN_PROGRESS = "in_progress"  # the run is still going: left alone
    DEFERRED = "deferred"  # did not parse, may still be being written: nothing recorded yet
    STATE_UNUSABLE = "state_unusable"  # PF604: state.json missing or corrupt; file kept
    REWRITTEN = "rewritten"  # changed while being processed: kept, to be processed again
    GONE = "gone"  # vanished before it was applied (another postflight took it)


@dataclass(slots=True)
class FileReport:
    """What the pipeline found for one metadata file."""

    root: Path
    path: Path
    task: int | None
    findings: list[Finding]
    valid: bool
    loaded: Loaded
    validation: Validation | None = None
    outcome: Outcome | None = None
    #: what postflight noticed that is not a finding (TODO.md has no section for the task, ...)
    notes: list[str] = field(default_factory=list)
    #: the file's "status" and metadata.session_id when they are strings, whatever else is wrong
    raw_status: str | None = None
    session: str | None = None
    stuck: bool = False

    @property
    def rel_path(self) -> str:
        # String slicing, not Path.relative_to: this runs for every file of a 10,000-file scan.
        path, root = str(self.path), str(self.root)
        if path.startswith(root + os.sep):
            return path[len(root) + 1 :].replace(os.sep, "/")
        return path.replace(os.sep, "/")

    @property
    def status(self) -> Status | None:
        return self.validation.status if self.validation else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.rel_path,
            # Which root the path is relative to: `scan A B` lists both roots' specs/ files.
            "root": str(self.root),
            "task": self.task,
            "status": self.raw_status,
            "valid": self.valid,
            "stuck": self.stuck,
            "findings": [f.to_json() for f in self.findings],
        }
        if self.outcome is not None:
            out["outcome"] = self.outcome.value
            if self.notes:
                out["notes"] = list(self.notes)
        return out


@dataclass(slots=True)
class ScanReport:
    roots: list[Path]
    files: list[FileReport] = field(default_factory=list)
    #: notes about a root as a whole (no specs directory, unusable state.json), for stderr.
    notes: list[str] = field(default_factory=list)
    strict: bool = False

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.files for x in f.findings if x.severity is severity)

    def summary(self) -> dict[str, int]:
        valid = sum(1 for f in self.files if f.valid)
        return {
            "files": len(self.files),
            "valid": valid,
            "invalid": len(self.files) - valid,
            "errors": self.count(Severity.ERROR),
            "warnings": self.count(Severity.WARNING),
            "stuck": sum(1 for f in self.files if f.stuck),
        }

    @property
    def exit_code(self) -> ExitCode:
        if any(f.outcome is Outcome.STATE_UNUSABLE for f in self.files):
            return ExitCode.STATE_UNUSABLE
        failing = self.count(Severity.ERROR) or (self.strict and self.count(Severity.WARNING))
        if failing or any(f.stuck for f in self.files):
            return ExitCode.FINDINGS
        return ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "roots": [str(r) for r in self.roots],
            "files": [f.to_json() for f in self.files],
            "summary": self.summary(),
        }


def policy_from(
    config: Config,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    strict: bool | None = None,
) -> Policy:
    """Command flags override the configuration file (SPEC 4.1)."""
    v = config.validation
    chosen = expand_codes(select) or frozenset(v.select)
    return Policy(
        select=chosen,
        ignore=expand_codes(ignore) | frozenset(v.ignore),
        severity=dict(v.severity),
        strict=v.strict if strict is None else strict,
    )


@dataclass(frozen=True, slots=True)
class Project:
    """One project root, with what the pipeline needs to read it."""

    root: Path
    specs_dir: Path
    state: StateView
    probe: ArtifactProbe

    @classmethod
    def open(cls, root: Path, config: Config) -> Project:
        specs = root / config.specs_dir
        state = load_state(specs / config.postflight.state_file)
        return cls(root, specs, state, artifact_probe(root))


def resolve_root(raw: str | Path) -> Path:
    root = Path(raw).expanduser()
    if not root.is_dir():
        raise UsageError(f"{raw}: not a directory (give a project root holding a specs directory)")
    if not os.access(root, os.R_OK | os.X_OK):
        raise UsageError(f"{raw}: permission denied: cannot read this directory")
    return root.resolve()


def check_file(
    project: Project,
    ref: MetaFileRef,
    config: Config,
    policy: Policy,
    now: datetime,
) -> FileReport:
    """Read and validate one metadata file of ``project``."""
    parsed = parse_task_dir(ref.task_dir)
    number = parsed[0] if parsed else None
    if ref.refused is not None:
        loaded = Loaded(ref.path, failure=ref.refused)
    else:
        loaded = read_metadata(ref.path, config.validation.max_file_bytes)
    findings: list[Finding] = []
    validation: Validation | None = None
    if parsed is None:
        findings.append(
            finding(
                "PF104",
                "",
                f"task directory {ref.task_dir!r} is not {{number}}_{{slug}} "
                "(e.g. 259_prove_completeness)",
            )
        )
    if loaded.failure is not None:
        findings.append(loaded.failure)
    else:
        ctx = task_context(os.path.dirname(ref.path), project.state)  # noqa: PTH120 - hot loop
        options = RuleOptions(
            timeouts=config.timeouts.as_mapping(),
            check_artifacts=config.validation.check_artifacts,
        )
        validation = validate(loaded.doc, ctx, now, options, project.probe)
        findings.extend(validation.findings)
    if project.state.exists and not project.state.usable:
        findings.append(
            finding(
                "PF604",
                "",
                f"{project.state.problem}: postflight is impossible until it is fixed "
                "(the metadata file is kept)",
            )
        )
    kept = policy.apply(findings)
    usable = validation is not None and validation.model is not None
    doc = loaded.doc if isinstance(loaded.doc, dict) else {}
    return FileReport(
        root=project.root,
        path=ref.path,
        task=number,
        findings=kept,
        valid=usable and not policy.fails(kept),
        loaded=loaded,
        validation=validation,
        raw_status=get_str(doc, "status"),
        session=get_str(get_object(doc, "metadata"), "session_id"),
        # Being stuck is not filtered by --select (it fails the run whatever is selected), but
        # an explicit `--ignore PF602` (the pre-commit hook's) means "do not judge by the clock".
        stuck=bool(validation and validation.stuck) and "PF602" not in policy.ignore,
    )


#: ``scan FILE ...``: per root, the only metadata files to look at (a root not listed: all)
Only = Mapping[Path, frozenset[str]] | None


def scan(
    roots: Iterable[Path],
    config: Config,
    policy: Policy,
    now: datetime,
    only: Only = None,
    *,
    positions: bool = False,
) -> ScanReport:
    """Validate every metadata file under each root (SPEC 4, ``scan``).

    ``positions``: the output needs findings' lines and columns (github, sarif). Reporters
    find them from the bytes each report keeps; only the files checked in a forked process
    (whose bytes are not sent back) get them here.
    """
    report = ScanReport(roots=list(roots), strict=policy.strict)
    for project, refs in _projects(report, config, only):
        if project.state.exists and not project.state.usable:
            report.notes.append(f"{project.root}: {project.state.problem} (PF604)")
        report.files.extend(_check_all(project, refs, config, policy, now, positions))
    return report


def _projects(
    report: ScanReport, config: Config, only: Only = None
) -> Iterator[tuple[Project, list[MetaFileRef]]]:
    """Each root of ``report`` with its metadata files; a root without specs/ is a note.

    A ``specs_dir`` a configuration file sets that does not exist is a configuration error:
    "nothing to scan" would turn a typo into a green CI run.
    """
    for root in report.roots:
        project = Project.open(root, config)
        if not project.specs_dir.is_dir():
            if "specs_dir" in config.model_fields_set:
                raise ConfigError(
                    f"{config.source or 'configuration'}: specs_dir = {config.specs_dir!r}, "
                    f"but {project.specs_dir} is not a directory"
                )
            report.notes.append(f"{root}: no {config.specs_dir}/ directory; nothing to scan")
            continue
        # Tasks in numerical order (the directory listing puts 100_x before 14_x).
        refs = sorted(find_metadata_files(project.specs_dir), key=_task_order)
        wanted = only.get(root) if only is not None else None
        if wanted is not None:
            refs = [r for r in refs if str(r.path) in wanted]
        yield project, refs


def _task_order(ref: MetaFileRef) -> tuple[int, int, str]:
    parsed = parse_task_dir(ref.task_dir)
    return (0, parsed[0], ref.task_dir) if parsed else (1, 0, ref.task_dir)


#: Below this many files a second process costs more than it saves.
PARALLEL_MIN_FILES = 2000


def _check_all(
    project: Project,
    refs: list[MetaFileRef],
    config: Config,
    policy: Policy,
    now: datetime,
    positions: bool = False,
) -> list[FileReport]:
    """check_file for every ref; a large read-only scan uses a forked second process.

    Validation is CPU-bound Python (about 0.2 ms a file): on the 2-core machines this runs on,
    splitting 10,000 files across two processes is what keeps a scan under 2 s (SPEC 6). The
    child only reads; any failure in it falls back to checking its half here.
    """
    if len(refs) < PARALLEL_MIN_FILES or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        return [check_file(project, ref, config, policy, now) for ref in refs]
    half = len(refs) // 2
    mine, theirs = refs[:half], refs[half:]
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.close(read_fd)
            rows = [
                _row(check_file(project, ref, config, policy, now), positions) for ref in theirs
            ]
            with os.fdopen(write_fd, "wb") as out:
                pickle.dump(rows, out, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    checked = [check_file(project, ref, config, policy, now) for ref in mine]
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    rest: list[FileReport] | None = None
    if os.waitstatus_to_exitcode(status) == 0:
        with contextlib.suppress(pickle.UnpicklingError, EOFError, ValueError, TypeError):
            rows = pickle.loads(data)  # noqa: S301 - our own child's output
            rest = [
                _from_row(project.root, ref, row) for ref, row in zip(theirs, rows, strict=True)
            ]
    if rest is None:
        rest = [check_file(project, ref, config, policy, now) for ref in theirs]
    return checked + rest


_FindingRow = tuple[str, str, str, str, int | None, int | None]
_Row = tuple[int | None, str | None, str | None, bool, bool, list[_FindingRow]]


def _row(report: FileReport, positions: bool = False) -> _Row:
    """What a scan report needs of a file, as plain values: unpickling dataclasses, paths and
    models costs more than checking the files did."""
    if positions:
        # The bytes stay in the child: where each finding is must be found here.
        report.findings = with_positions(report.findings, report.loaded.raw)
    findings = [
        (f.code, f.severity.value, f.location, f.message, f.line, f.col) for f in report.findings
    ]
    return (report.task, report.raw_status, report.session, report.valid, report.stuck, findings)


def _from_row(root: Path, ref: MetaFileRef, row: _Row) -> FileReport:
    task, raw_status, session, valid, stuck, findings = row
    return FileReport(
        root=root,
        path=ref.path,
        task=task,
        findings=[
            Finding(c, Severity(sev), loc, msg, line, col)
            for c, sev, loc, msg, line, col in findings
        ],
        valid=valid,
        loaded=Loaded(ref.path),
        raw_status=raw_status,
        session=session,
        stuck=stuck,
    )


# --- postflight: apply, record, clean up ----------------------------------------------------

#: How long a CLI run waits for another writer's lock before saying who to look for.
LOCK_TIMEOUT_S = 30.0


def root_of(path: Path, load: Callable[[list[Path]], Config]) -> tuple[Path, Config]:
    """The project root and configuration of ``ROOT/<specs_dir>/<task>/<file>`` (SPEC 4)."""
    specs = path.parent.parent.resolve()
    for candidate in path.parent.parents:
        config = load([candidate])
        if (candidate / config.specs_dir).resolve() == specs:
            return candidate.resolve(), config
    raise UsageError(
        f"{path}: not inside a project (expected ROOT/<specs_dir>/<N>_<slug>/{path.name})"
    )


def apply_all(
    roots: Iterable[Path],
    config: Config,
    policy: Policy,
    journal: Journal,
    now: datetime,
    only: Only = None,
) -> ScanReport:
    """``scan --apply``: validate everything, post-flight every valid final file."""
    report = ScanReport(roots=list(roots), strict=policy.strict)
    for project, refs in _projects(report, config, only):
        report.files.extend(postflight(project, refs, config, policy, journal, now))
    return report


def postflight(
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
) -> list[FileReport]:
    """Validate ``refs`` and apply every valid final file in one locked commit (SPEC 3).

    ``report_unparsed=False`` (the watcher, before a file has settled) leaves a file that does
    not parse alone without recording anything. ``interrupted=True`` (``process`` of an
    in_progress file) records a ``delegation_interrupted`` error for it. A lock held by
    another writer past ``lock_timeout_s`` raises LockTimeoutError, nothing applied.
    """
    reports = [check_file(project, ref, config, policy, now) for ref in refs]
    ready: list[FileReport] = []
    # One journal transaction per step, not one per row: a burst of 1,000 files is 3 fsyncs.
    with journal.batch(durable=False):
        for report in reports:
            report.outcome = _classify(report, report_unparsed, policy)
            if report.outcome is Outcome.DEFERRED:
                continue
            _journal(journal, "validated", report)
            if report.outcome is Outcome.APPLIED:
                ready.append(report)
    if not project.state.usable:
        for report in ready:
            report.outcome = Outcome.STATE_UNUSABLE
            if not any(f.code == "PF604" for f in report.findings):
                report.findings.append(
                    finding(
                        "PF604",
                        "",
                        f"{project.state.problem}: postflight needs it (it is never created or "
                        "overwritten); the metadata file is kept",
                    )
                )
        return reports
    records = [
        _invalid_record(r, now, i)
        for i, r in enumerate(reports)
        # A file that never parsed (PF102, past the settle time) is recorded too: it is
        # what an agent that died mid-write leaves behind.
        if r.outcome is Outcome.INVALID and r.raw_status != Status.IN_PROGRESS.value
    ]
    if interrupted:
        records += [
            _interrupted_record(r, now, i)
            for i, r in enumerate(reports)
            if r.outcome is Outcome.IN_PROGRESS
        ]
    if not ready and not records:
        return reports
    try:
        with project_lock(project.specs_dir, lock_timeout_s):
            applied = _commit(project, ready, config, journal, now)
            _append_errors(project, config, records + applied.errors, reports)
            deleted = [r for r in ready if r.outcome is Outcome.APPLIED and _clean_up(r)]
            with journal.batch(durable=False):
                for report in deleted:
                    _journal(journal, "deleted", report)
    except (OSError, StoreError) as exc:
        # Permission denied on the specs directory or state.json, a full disk: nothing was
        # half-written (every write is atomic); say what and where, keep the files.
        problem = _os_problem(exc, f"cannot write in {project.specs_dir}")
        for report in ready:
            if report.outcome is Outcome.APPLIED:
                report.outcome = Outcome.STATE_UNUSABLE
                report.findings.append(finding("PF604", "", f"{problem}; the file is kept"))
    if interrupted:
        with journal.batch(durable=False):
            for report in reports:
                if report.outcome is Outcome.IN_PROGRESS:
                    _journal(journal, "interrupted", report)
    return reports


def _classify(report: FileReport, report_unparsed: bool, policy: Policy) -> Outcome:
    failure = report.loaded.failure
    if failure is not None and failure.code == "PF105" and not report.path.exists():
        return Outcome.GONE
    if failure is not None and failure.code == "PF102" and not report_unparsed:
        return Outcome.DEFERRED
    if report.status is Status.IN_PROGRESS:
        # In-progress files belong to a running (or stuck) agent: tracked, never applied.
        return Outcome.IN_PROGRESS
    if report.valid or _valid_but_for_state(report, policy):
        return Outcome.APPLIED
    return Outcome.INVALID


def _valid_but_for_state(report: FileReport, policy: Policy) -> bool:
    """A file whose only problem is the project's state.json (PF604) is ready, not invalid."""
    if report.validation is None or report.validation.model is None:
        return False
    others = [f for f in report.findings if f.code != "PF604"]
    return len(others) < len(report.findings) and not policy.fails(others)


@dataclass(slots=True)
class _Committed:
    errors: list[dict[str, Any]] = field(default_factory=list)


def _commit(
    project: Project,
    ready: list[FileReport],
    config: Config,
    journal: Journal,
    now: datetime,
) -> _Committed:
    """One read-modify-write of state.json for every ready file (group commit), then TODO.md."""
    out = _Committed()
    # Under the lock: a file another postflight took or an agent rewrote since it was read is
    # not applied from the stale copy.
    for report in ready:
        if not _same_file(report):
            report.outcome = Outcome.GONE if not report.path.exists() else Outcome.REWRITTEN
    todo_edits: list[TodoEdit] = []
    # The last state.json the transform made: its bytes and its document.
    written_bytes: bytes | None = None
    written_doc: dict[str, Any] | None = None
    # The document read under the lock and the one folded from it, with its task index: what
    # each task's entry was and became, for the journal (issue 10: ``verify`` and the healer).
    folded: tuple[dict[str, Any], dict[str, Any], dict[int, int]] | None = None

    def transform(snapshot: Snapshot) -> bytes | None:
        nonlocal written_bytes, written_doc, folded
        written_bytes = written_doc = folded = None
        todo_edits.clear()
        out.errors.clear()
        if snapshot.raw is None:
            raise StateUnusableError(f"{snapshot.path}: does not exist (PF604)")
        text = snapshot.raw.decode("utf-8", errors="strict")
        cached = cached_state(snapshot.path, snapshot.raw)
        if cached is not None and cached.doc is not None:
            doc = cached.doc
        else:
            doc = json.loads(text)
            problem = state_shape_problem(doc)
            if problem is not None:
                raise StateUnusableError(f"{snapshot.path}: {problem} (PF604)")
        new = doc
        # Built once from the document read under the lock: outcomes never add or move tasks.
        index = task_index(doc)
        status_map = config.postflight.status_map.model_dump()
        for report in ready:
            if report.outcome is not Outcome.APPLIED:
                continue
            assert report.validation is not None and report.validation.model is not None
            assert report.task is not None
            try:
                result = apply_outcome(
                    new,
                    report.validation.model,
                    task=report.task,
                    file=report.rel_path,
                    now=now,
                    status_map=status_map,
                    index=index,
                )
            except KeyError:
                report.outcome = Outcome.INVALID
                report.findings.append(
                    finding("PF600", "", f"task {report.task} is not in state.json active_projects")
                )
                continue
            new = result.state
            if result.todo is not None:
                todo_edits.append(result.todo)
            out.errors.extend(result.errors)
        folded = (doc, new, index)
        if new == doc:
            return None
        written_bytes, written_doc = render_state(text, doc, new).encode("utf-8"), new
        return written_bytes

    live = [r for r in ready if r.outcome is Outcome.APPLIED]
    if not live:
        return out
    crash_point("before-state-write")
    try:
        commit(project.state.path, transform, crash_label="state")
    except (UnicodeDecodeError, json.JSONDecodeError, StateUnusableError) as exc:
        # state.json went bad between the first read and the lock: never overwrite it.
        problem = str(exc) if isinstance(exc, StateUnusableError) else f"not valid JSON ({exc})"
        for report in live:
            report.outcome = Outcome.STATE_UNUSABLE
            report.findings.append(finding("PF604", "", f"{problem}; the metadata file is kept"))
        out.errors.clear()
        return out
    crash_point("after-state-write")
    if written_bytes is not None and written_doc is not None:
        # The next read of state.json (the next agent's postflight) finds these bytes and
        # skips the parse.
        remember_state(project.state.path, written_bytes, written_doc)
    live = [r for r in live if r.outcome is Outcome.APPLIED]
    changes = _task_changes(folded, live, todo_edits if config.postflight.sync_todo else [])
    # The journal rows are what let the files be deleted without losing what the agents said:
    # the files go only once this batch is durably committed.
    with journal.batch() as batch:
        for report in live:
            change = changes.get(report.task) if report.task is not None else None
            _journal(journal, "postflighted", report, content=True, change=change)
    if not batch.committed:
        for report in live:
            report.notes.append(_NO_JOURNAL)
    if config.postflight.sync_todo and todo_edits:
        _sync_todo(project, config, todo_edits, live)
    crash_point("after-todo-write")
    return out


def _task_changes(
    folded: tuple[dict[str, Any], dict[str, Any], dict[int, int]] | None,
    live: list[FileReport],
    todo_edits: list[TodoEdit],
) -> dict[int, TaskChange]:
    """Each applied task's entry before and after this commit, and its TODO.md edits.

    Per commit, not per file: several files for one task in one group commit are one change
    from the entry read to the entry written, which is what a writer that read before the
    commit would put back.
    """
    if folded is None:
        return {}
    before_doc, after_doc, index = folded
    changes: dict[int, TaskChange] = {}
    for report in live:
        task = report.task
        if task is None or task in changes:
            continue
        try:
            position = find_task(before_doc, task, index)
        except KeyError:
            continue
        changes[task] = TaskChange(
            before=before_doc["active_projects"][position],
            after=after_doc["active_projects"][position],
            todo=[e.to_json() for e in todo_edits if e.task == task],
        )
    return changes


_NO_JOURNAL = "the journal is unavailable, so the file is kept (its content would be lost)"


def _same_file(report: FileReport) -> bool:
    try:
        return FileIdentity.of(os.lstat(report.path)) == report.loaded.identity
    except OSError:
        return False


def _sync_todo(
    project: Project, config: Config, edits: list[TodoEdit], live: list[FileReport]
) -> None:
    path = project.specs_dir / config.postflight.todo_file
    snapshot = read_snapshot(path)
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
    new, missing = apply_todo_edits(text, edits)
    for task in missing:
        for report in live:
            if report.task == task:
                report.notes.append(
                    f"{path.name} has no section for task {task}; state.json was updated"
                )
    if new != text:
        try:
            atomic_write(path, new.encode("utf-8"), crash_label="todo")
        except (OSError, StoreError) as exc:
            for report in live:
                report.notes.append(_os_problem(exc, f"{path.name} could not be written"))


def _append_errors(
    project: Project,
    config: Config,
    records: list[dict[str, Any]],
    reports: list[FileReport],
) -> int:
    """Add records to errors.json, de-duplicated; the number added (-1: file unusable)."""
    if not records:
        return 0
    path = project.specs_dir / config.postflight.errors_file
    count = 0

    def transform(snapshot: Snapshot) -> bytes | None:
        nonlocal count
        existing: list[Any] = []
        if snapshot.raw is not None:
            doc, problem = parse_json(snapshot.raw)
            if problem is not None or not isinstance(doc, list):
                raise _ErrorsFileUnusableError(problem or "not a JSON array")
            existing = doc
        merged, count = merge_errors(existing, records)
        if not count:
            return None
        return (json.dumps(merged, indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    try:
        commit(path, transform, crash_label="errors")
    except (OSError, StoreError) as exc:
        for report in reports:
            report.notes.append(_os_problem(exc, f"{path.name} could not be written"))
        return -1
    except _ErrorsFileUnusableError as exc:
        note = f"{path.name} is not usable ({exc}); it was not overwritten and no error was logged"
        for report in reports:
            report.notes.append(note)
        return -1
    return count


class _ErrorsFileUnusableError(Exception):
    """errors.json is not a JSON array: it is never overwritten."""


def _os_problem(exc: OSError | StoreError, what: str) -> str:
    if isinstance(exc, OSError):
        return f"{what}: {exc.strerror or exc}"
    return f"{what}: {exc}"


def _clean_up(report: FileReport) -> bool:
    """Delete the metadata file if it is still what was processed, then the markers."""
    if _NO_JOURNAL in report.notes:
        return False
    assert report.loaded.identity is not None
    crash_point("before-delete")
    try:
        deleted = delete_if_unchanged(report.path, report.loaded.identity)
    except (OSError, StoreError) as exc:
        report.notes.append(
            _os_problem(exc, "applied, but the file could not be deleted")
            + "; applying it again is harmless"
        )
        return False
    if not deleted:
        report.outcome = Outcome.REWRITTEN if report.path.exists() else Outcome.GONE
        return False
    task_dir = report.path.parent
    marker = read_marker(task_dir)
    if marker is None or marker.session_id in (None, report.session):
        for name in (MARKER_NAME, LOOP_GUARD_NAME):
            # A marker that cannot be removed is harmless: it only names a session.
            with contextlib.suppress(OSError):
                (task_dir / name).unlink()
    crash_point("after-delete")
    return True


def _journal(
    journal: Journal,
    kind: str,
    report: FileReport,
    *,
    content: bool = False,
    change: TaskChange | None = None,
) -> bool:
    raw = report.loaded.raw
    return journal.record(
        kind,
        root=str(report.root),
        file=report.rel_path,
        task=report.task,
        session=report.session,
        status=report.raw_status,
        findings=[f.to_json() for f in report.findings] if kind == "validated" else None,
        content=raw.decode("utf-8", errors="replace") if content and raw is not None else None,
        change=change,
    )


def _record_for(
    report: FileReport,
    kind: str,
    message: str,
    action: str,
    now: datetime,
    n: int,
    recoverable: bool = True,
) -> dict[str, Any]:
    doc: dict[str, Any] = report.loaded.doc if isinstance(report.loaded.doc, dict) else {}
    raw_meta = doc.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    path = meta.get("delegation_path")
    agent = meta.get("agent_type")
    return error_record(
        kind,
        message,
        session=report.session,
        task=report.task,
        agent_type=agent if isinstance(agent, str) else None,
        file=report.rel_path,
        delegation_path=[p for p in path if isinstance(p, str)] if isinstance(path, list) else None,
        now=now,
        n=n,
        recoverable=recoverable,
        suggested_action=action,
    )


def _invalid_record(report: FileReport, now: datetime, n: int) -> dict[str, Any]:
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


def _interrupted_record(report: FileReport, now: datetime, n: int) -> dict[str, Any]:
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
    with project_lock(project.specs_dir, lock_timeout_s):
        added = _append_errors(project, config, [record], [report])
    _journal(journal, "stuck", report)
    return added > 0


# --- --dry-run: what postflight would write ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    """A file postflight would replace, with its text before and after."""

    path: Path
    old: str
    new: str


def preview(
    project: Project, reports: Sequence[FileReport], config: Config, now: datetime
) -> list[PlannedWrite]:
    """What applying the valid final ``reports`` would write to state.json and TODO.md.

    The same pure transformation ``_commit`` runs, on the files as they are now; nothing is
    locked, journaled, written or deleted (``scan --apply --dry-run``, ``process --dry-run``).
    """
    ready = [
        r
        for r in reports
        if r.valid
        and r.status is not Status.IN_PROGRESS
        and r.validation is not None
        and r.validation.model is not None
        and r.task is not None
    ]
    if not ready or not project.state.usable:
        return []
    snapshot = read_snapshot(project.state.path)
    if snapshot.raw is None:
        return []
    try:
        text = snapshot.raw.decode("utf-8")
        doc = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return []
    if state_shape_problem(doc) is not None:
        return []
    new = doc
    index = task_index(doc)
    status_map = config.postflight.status_map.model_dump()
    edits: list[TodoEdit] = []
    for report in ready:
        assert report.validation is not None and report.validation.model is not None
        assert report.task is not None
        try:
            result = apply_outcome(
                new,
                report.validation.model,
                task=report.task,
                file=report.rel_path,
                now=now,
                status_map=status_map,
                index=index,
            )
        except KeyError:
            continue  # PF600: the task is not in state.json; nothing would be written for it
        new = result.state
        if result.todo is not None:
            edits.append(result.todo)
    planned: list[PlannedWrite] = []
    if new != doc:
        planned.append(PlannedWrite(project.state.path, text, render_state(text, doc, new)))
    if config.postflight.sync_todo and edits:
        todo = read_snapshot(project.specs_dir / config.postflight.todo_file)
        if todo.raw is not None:
            try:
                todo_text = todo.raw.decode("utf-8")
            except UnicodeDecodeError:
                return planned
            new_todo, _missing = apply_todo_edits(todo_text, edits)
            if new_todo != todo_text:
                planned.append(PlannedWrite(todo.path, todo_text, new_todo))
    return planned


def unified_diff(write: PlannedWrite, shown_as: str) -> str:
    """``write`` as a unified diff, labelled with the path the user sees."""
    import difflib

    lines = difflib.unified_diff(
        write.old.splitlines(keepends=True),
        write.new.splitlines(keepends=True),
        f"a/{shown_as}",
        f"b/{shown_as}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
