"""What the pipeline returns: an outcome and a report per file, a tally, a scan's report.

Errors inside a run are values: a file's findings and its ``Outcome`` are collected here, and
``Tally.exit_code`` (or ``ScanReport.exit_code``) decides how the command exits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from postflightd.errors import ExitCode
from postflightd.models.terms import Status
from postflightd.project.metadata import Loaded
from postflightd.rules.findings import Finding, Severity
from postflightd.rules.metadata import Validation

if TYPE_CHECKING:
    from postflightd.models.metadata import MetadataFile


class Outcome(StrEnum):
    """What postflight did with one metadata file."""

    APPLIED = "applied"  # outcome written to state.json, file deleted
    INVALID = "invalid"  # errors: left in place, reported
    IN_PROGRESS = "in_progress"  # the run is still going: left alone
    DEFERRED = "deferred"  # did not parse, may still be being written: nothing recorded yet
    STATE_UNUSABLE = "state_unusable"  # PF604: state.json missing or corrupt; file kept
    REWRITTEN = "rewritten"  # changed while being processed: kept, to be processed again
    GONE = "gone"  # vanished before it was applied (another postflight took it)
    #: in state.json and the journal, but TODO.md or errors.json could not be written: the
    #: file is kept and applying it again completes the job (PF606)
    INCOMPLETE = "incomplete"


_PROJECT_FILE_PROBLEMS: Final = frozenset({Outcome.STATE_UNUSABLE, Outcome.INCOMPLETE})


@dataclass(slots=True)
class FileReport:
    """What the pipeline found for one metadata file."""

    root: Path
    #: the metadata file's path as text (``path`` builds the ``Path``: a JSON scan needs none)
    path_text: str
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
    #: an interrupted run's errors.json record was there already: this run added none
    recorded_before: bool = False
    #: the report is of the project's state.json, not of a metadata file: its findings are
    #: counted, it is not (``scan`` reports an unusable state.json once, not once per file)
    project_file: bool = False

    @property
    def path(self) -> Path:
        """The metadata file's path, built when asked."""
        return Path(self.path_text)

    @property
    def rel_path(self) -> str:
        # String slicing, not Path.relative_to: this runs for every file of a 10,000-file scan.
        path, root = self.path_text, str(self.root)
        if path.startswith(root + os.sep):
            return path[len(root) + 1 :].replace(os.sep, "/")
        return path.replace(os.sep, "/")

    @property
    def status(self) -> Status | None:
        return self.validation.status if self.validation else None

    def ready(self) -> Ready | None:
        """What applying the file needs (its model, its task number), or None without them."""
        model = self.validation.model if self.validation is not None else None
        if model is None or not model.status.is_final or self.task is None:
            return None
        return Ready(self, model, self.task)

    def drop(self, problem: Finding) -> None:
        """Take the file out of its batch with the finding saying why; it is kept and reported."""
        self.findings.append(problem)
        self.valid = False
        if self.outcome is Outcome.APPLIED:
            self.outcome = Outcome.INVALID

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.rel_path,
            # Which root the path is relative to: `scan A B` lists both roots' specs/ files.
            "root": str(self.root),
            "task": self.task,
            "status": self.raw_status,
            "valid": self.valid,
            "stuck": self.stuck,
            "findings": [f.to_json() for f in self.findings] if self.findings else [],
        }
        if self.outcome is not None:
            out["outcome"] = self.outcome.value
            if self.notes:
                out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True, slots=True)
class Ready:
    """A file postflight can apply: its report, its final metadata and its task number."""

    report: FileReport
    meta: MetadataFile
    task: int


@dataclass(slots=True)
class Tally:
    """What a scan's summary and exit code need, counted as the files go by.

    A streamed scan keeps this, not the files: its memory does not grow with them.
    """

    strict: bool = False
    files: int = 0
    valid: int = 0
    errors: int = 0
    warnings: int = 0
    stuck: int = 0
    #: some file has an outcome (``scan --apply``): the text summary says how many applied
    postflighted: bool = False
    applied: int = 0
    #: a project file could not be read or written (Outcome in _PROJECT_FILE_PROBLEMS)
    project_problem: bool = False

    def add(self, file: FileReport) -> FileReport:
        if not file.project_file:
            self.files += 1
            self.valid += file.valid
        self.stuck += file.stuck
        for f in file.findings:
            if f.severity is Severity.ERROR:
                self.errors += 1
            else:
                self.warnings += 1
        if file.outcome is not None:
            self.postflighted = True
            self.applied += file.outcome is Outcome.APPLIED
            self.project_problem |= file.outcome in _PROJECT_FILE_PROBLEMS
        return file

    def summary(self) -> dict[str, int]:
        return {
            "files": self.files,
            "valid": self.valid,
            "invalid": self.files - self.valid,
            "errors": self.errors,
            "warnings": self.warnings,
            "stuck": self.stuck,
        }

    @property
    def exit_code(self) -> ExitCode:
        # A project file that cannot be read or written (state.json, TODO.md, errors.json):
        # the metadata is fine, the files are kept, a run after the fix completes the job.
        if self.project_problem:
            return ExitCode.STATE_UNUSABLE
        failing = self.errors or (self.strict and self.warnings)
        if failing or self.stuck:
            return ExitCode.FINDINGS
        return ExitCode.OK


@dataclass(slots=True)
class ScanReport:
    """Every file of a scan, in memory: ``scan --apply`` and the library's callers."""

    roots: list[Path]
    files: list[FileReport] = field(default_factory=list)
    #: notes about a root as a whole (no specs directory, unusable state.json), for stderr.
    notes: list[str] = field(default_factory=list)
    strict: bool = False
    #: a root whose specs directory was refused (a link, not a directory): exit 4.
    refused: bool = False

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.files for x in f.findings if x.severity is severity)

    def tally(self) -> Tally:
        # A refused specs directory (a link) is a project problem: exit 4, as for state.json.
        tally = Tally(strict=self.strict, project_problem=self.refused)
        for file in self.files:
            tally.add(file)
        return tally

    def summary(self) -> dict[str, int]:
        return self.tally().summary()

    @property
    def exit_code(self) -> ExitCode:
        return self.tally().exit_code

    def to_json(self) -> dict[str, Any]:
        return {
            "roots": [str(r) for r in self.roots],
            "files": [f.to_json() for f in self.files],
            "summary": self.summary(),
        }


#: ``process``'s exit code for each outcome; any other outcome is the file's fault: exit 1.
EXIT_CODES: Final[Mapping[Outcome, ExitCode]] = {
    Outcome.APPLIED: ExitCode.OK,
    Outcome.GONE: ExitCode.OK,
    Outcome.IN_PROGRESS: ExitCode.IN_PROGRESS,
    Outcome.STATE_UNUSABLE: ExitCode.STATE_UNUSABLE,
    Outcome.INCOMPLETE: ExitCode.STATE_UNUSABLE,
}


@dataclass(frozen=True, slots=True)
class Processed:
    """What ``process`` did with the file named ``file``: its report (None when the file was
    already gone), and when the journal shows another run applied it first, when."""

    file: str
    report: FileReport | None
    already: str | None
    #: the task's number and name, from the file's task directory (``259_prove_completeness``)
    task: int | None = None
    task_name: str | None = None
    #: the task's state.json entry as it is after the run, when asked for (``--format json``)
    state_entry: Mapping[str, Any] | None = None
    #: when the file was already gone: its root, its path relative to it, and the status the
    #: run that applied it recorded, so that the JSON has the keys of every other outcome
    root: str | None = None
    path: str | None = None
    status: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Everything a workflow's later stage needs of the run: the file's report, the task,
        the status, the artifacts with their summaries, and the task's state.json entry."""
        doc: dict[str, Any] = (
            self.report.to_json()
            if self.report is not None
            else {
                "path": self.path or self.file,
                "root": self.root,
                "task": self.task,
                "status": self.status,
                "valid": True,
                "stuck": False,
                "findings": [],
            }
        )
        if self.already is not None:
            if self.report is None:
                doc["outcome"] = "already_postflighted"
            doc["already_postflighted"] = self.already
        doc["task"] = self.task if self.report is None else self.report.task
        doc["task_name"] = self.task_name
        model = self.report.validation.model if self.report and self.report.validation else None
        doc["artifacts"] = (
            [artifact_json(a) for a in model.artifacts] if model is not None else None
        )
        doc["state_entry"] = dict(self.state_entry) if self.state_entry is not None else None
        return doc

    @property
    def exit_code(self) -> ExitCode:
        if self.report is None:
            return ExitCode.OK  # gone before we looked: another run applied it
        if self.report.outcome is None:
            return ExitCode.FINDINGS  # not post-flighted (postflight always sets an outcome)
        return EXIT_CODES.get(self.report.outcome, ExitCode.FINDINGS)


def artifact_json(artifact: object) -> dict[str, Any]:
    """An artifact of a typed document as JSON, its None fields left out: its fields, then
    the keys of its own it kept. By attribute alone: the stored schema's validator builds
    plain objects (``rules.metadata.Validation.model``), the models pydantic ones."""
    fields = {k: v for k, v in vars(artifact).items() if not k.startswith("__pydantic")}
    kept = getattr(artifact, "__pydantic_extra__", None) or {}
    return {k: v for k, v in {**fields, **kept}.items() if v is not None}
