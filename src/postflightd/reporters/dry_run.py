"""What ``--dry-run`` prints (``scan --apply``, ``process``): the unified diffs of the writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from postflightd.inert import inert
from postflightd.reporters.style import display_path
from postflightd.words import joined

if TYPE_CHECKING:
    from postflightd.pipeline.dry_run import PlannedWrite
    from postflightd.pipeline.results import FileReport


def write_diffs(writes: Sequence[PlannedWrite], out: TextIO, cwd: str) -> None:
    """Each planned write as a unified diff, labelled with the path shown from ``cwd``."""
    from postflightd.pipeline.dry_run import unified_diff

    for write in writes:
        out.write(unified_diff(write, display_path(write.path, cwd)))


def _named(writes: Sequence[PlannedWrite], cwd: str) -> str:
    """The files the writes change, by name (``specs/state.json and specs/TODO.md``)."""
    return joined([inert(display_path(w.path, cwd)) for w in writes])


def report_scan_dry_run(writes: Sequence[PlannedWrite], out: TextIO, cwd: str) -> None:
    write_diffs(writes, out, cwd)
    if not writes:
        out.write("dry run: nothing would change\n")
        return
    out.write(f"dry run: would write {_named(writes, cwd)}; nothing was written\n")


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
