"""What a command makes of its files' reports: a scan's tally and report, process's result.

Apart from ``pipeline.results``: the stop hook applies files without any of these, and each
class made at start-up is about 4.5 million instructions of every stop that applies a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from postflightd.errors import ExitCode
from postflightd.pipeline.results import (
    PROJECT_FILE_PROBLEMS,
    FileReport,
    Outcome,
    artifact_json,
)
from postflightd.rules.findings import Severity


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
    #: a project file could not be read or written (Outcome in PROJECT_FILE_PROBLEMS)
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
            self.project_problem |= file.outcome in PROJECT_FILE_PROBLEMS
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
