"""Reporters for ``process``: what happened to the one file, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from postflightd.inert import inert, json_text
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options

if TYPE_CHECKING:
    from postflightd.pipeline.results import FileReport
    from postflightd.pipeline.summaries import Processed


def report_text(result: Processed, out: TextIO, options: Options | None = None) -> None:
    """One line for the outcome, then its findings and notes, indented."""
    del options  # one shape
    if result.already is not None:
        out.write(
            f"{inert(result.file)}: already post-flighted ({result.already}); nothing to do\n"
        )
        return
    report = result.report
    if report is None:
        return
    out.write(f"{inert(report.rel_path)}: {_outcome_text(report)}\n")
    for f in report.findings:
        out.write(f"  {f.code} {f.severity.value}: {inert(f.message)}\n")
    for note in report.notes:
        out.write(f"  note: {inert(note)}\n")


def _outcome_text(report: FileReport) -> str:
    from postflightd.pipeline.results import Outcome

    what = {
        Outcome.APPLIED: f"applied to task {report.task} as {inert(report.raw_status or '')}; "
        + ("file kept" if report.path.exists() else "file deleted"),
        Outcome.GONE: "the file vanished before it could be applied (another run took it; "
        "this journal has no record of it)",
        Outcome.INCOMPLETE: "applied to state.json, but not every file of the outcome could be "
        "written (see below); the file is kept: run again once fixed",
        Outcome.IN_PROGRESS: "still in_progress: the run was interrupted; "
        + ("already recorded" if report.recorded_before else "recorded")
        + " in errors.json, task status left as it was",
        # The PF604 finding below says why, and where: the code is not repeated here.
        Outcome.STATE_UNUSABLE: "not applied: a project file is unusable; the file is kept",
        Outcome.REWRITTEN: "not applied: the file kept changing while it was processed; run again",
        Outcome.INVALID: "not applied: the file is invalid; it is kept until it is fixed",
    }
    if report.outcome is None:  # check_file's report: postflight always sets one
        return "not applied"
    return what.get(report.outcome, report.outcome.value)


def report_json(result: Processed, out: TextIO, options: Options | None = None) -> None:
    """The file's report, with ``already_postflighted`` when another run applied it, the task,
    the artifacts and the task's state.json entry after the run (``Processed.to_json``)."""
    del options
    doc = result.to_json()
    out.write(json_text(doc, indent=2) + "\n")


REPORTERS: dict[str, Reporter[Processed]] = {
    "text": report_text,
    "json": report_json,
}
