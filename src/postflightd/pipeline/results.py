"""What the pipeline returns for each file: an outcome and a report (what a command makes of
them all, a tally, a scan's report, process's result, is ``pipeline.summaries``).

Errors inside a run are values: a file's findings and its ``Outcome`` are collected here, and
``Tally.exit_code`` (or ``ScanReport.exit_code``) decides how the command exits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from postflightd.models.terms import Status
from postflightd.project.meta_file import Loaded
from postflightd.rules.findings import Finding
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


#: Outcomes that are a project file's problem, not the metadata's: exit 4.
PROJECT_FILE_PROBLEMS: Final = frozenset({Outcome.STATE_UNUSABLE, Outcome.INCOMPLETE})


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


def artifact_json(artifact: object) -> dict[str, Any]:
    """An artifact of a typed document as JSON, its None fields left out: its fields, then
    the keys of its own it kept. By attribute alone: the stored schema's validator builds
    plain objects (``rules.metadata.Validation.model``), the models pydantic ones."""
    fields = {k: v for k, v in vars(artifact).items() if not k.startswith("__pydantic")}
    kept = getattr(artifact, "__pydantic_extra__", None) or {}
    return {k: v for k, v in {**fields, **kept}.items() if v is not None}
