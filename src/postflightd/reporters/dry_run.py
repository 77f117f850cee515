"""What ``--dry-run`` prints (``scan --apply``, ``process``): the unified diffs of the writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from postflightd.inert import inert
from postflightd.reporters.style import display_path
from postflightd.words import counted, joined

#: past this many metadata files, the list of what would be deleted or kept ends "and N more"
LISTED_FILES = 50

if TYPE_CHECKING:
    from postflightd.pipeline.dry_run import Plan, PlannedWrite
    from postflightd.pipeline.results import FileReport


def write_diffs(writes: Sequence[PlannedWrite], out: TextIO, cwd: str) -> None:
    """Each planned write as a unified diff, labelled with the path shown from ``cwd``."""
    from postflightd.pipeline.dry_run import unified_diff

    for write in writes:
        out.write(unified_diff(write, display_path(write.path, cwd)))


def _named(writes: Sequence[PlannedWrite], cwd: str) -> str:
    """The files the writes change, by name (``specs/state.json and specs/TODO.md``)."""
    return joined([inert(display_path(w.path, cwd)) for w in writes])


def _kept_because(file: FileReport) -> str:
    """Why applying would keep ``file``: stuck, invalid (with its error codes), in progress."""
    from postflightd.rules.findings import Severity

    codes = list(dict.fromkeys(f.code for f in file.findings if f.severity is Severity.ERROR))
    listed = f": {', '.join(codes)}" if codes else ""
    if file.stuck:
        return f"stuck{listed}"
    if not file.valid:
        return f"invalid{listed}"
    if file.ready() is None:
        return "in progress"
    return f"not applied{listed}"


def _fates(files: Sequence[FileReport], applied: Sequence[FileReport], cwd: str) -> list[str]:
    """One line per metadata file: deleted (applied) first, then kept, with why."""
    chosen = {id(f) for f in applied}
    lines = [
        f"would delete {inert(display_path(f.path_text, cwd))} "
        f"(applied to task {f.task} as {inert(f.raw_status or '')})"
        for f in applied
    ]
    lines += [
        f"would keep {inert(display_path(f.path_text, cwd))} ({_kept_because(f)})"
        for f in files
        if id(f) not in chosen and not f.project_file
    ]
    if len(lines) > LISTED_FILES:
        more = len(lines) - LISTED_FILES
        lines = [*lines[:LISTED_FILES], f"and {more} more"]
    return lines


def report_scan_dry_run(plan: Plan, files: Sequence[FileReport], out: TextIO, cwd: str) -> None:
    """The diffs of the writes, then which metadata files would be deleted and which kept."""
    writes = plan.writes
    write_diffs(writes, out, cwd)
    for line in _fates(files, plan.applied, cwd):
        out.write(f"{line}\n")
    done = []
    if writes:
        done.append(f"write {_named(writes, cwd)}")
    if plan.applied:
        done.append(f"delete {counted(len(plan.applied), 'metadata file')}")
    if not done:
        out.write("dry run: nothing would change\n")
        return
    out.write(f"dry run: would {' and '.join(done)}; nothing was written\n")


def report_process_dry_run(
    report: FileReport,
    writes: Sequence[PlannedWrite],
    refusal: str | None,
    out: TextIO,
    cwd: str,
) -> None:
    """The file's findings, then why nothing would be applied (``refusal``) or the diffs."""
    from postflightd.reporters.scan import finding_line, positioned

    for f in positioned(report):
        out.write(f"{inert(display_path(report.path_text, cwd))}:{finding_line(f)}\n")
    if refusal is not None:
        out.write(f"dry run: {refusal}, so nothing would be applied\n")
        return
    write_diffs(writes, out, cwd)
    writing = f"write {_named(writes, cwd)}" if writes else "change no file (already applied)"
    out.write(
        f"dry run: would apply to task {report.task} as {inert(report.raw_status or '')}, "
        f"{writing} and delete the metadata file; nothing was written\n"
    )
