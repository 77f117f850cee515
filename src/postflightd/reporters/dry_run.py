"""What ``--dry-run`` prints (``scan --apply``, ``process``): the unified diffs of the writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from postflightd.inert import inert
from postflightd.reporters.style import display_path

if TYPE_CHECKING:
    from postflightd.pipeline.dry_run import PlannedWrite
    from postflightd.pipeline.results import FileReport


def write_diffs(writes: Sequence[PlannedWrite], out: TextIO, cwd: str) -> None:
    """Each planned write as a unified diff, labelled with the path shown from ``cwd``."""
    from postflightd.pipeline.dry_run import unified_diff

    for write in writes:
        out.write(unified_diff(write, display_path(write.path, cwd)))


def report_scan_dry_run(writes: Sequence[PlannedWrite], out: TextIO, cwd: str) -> None:
    write_diffs(writes, out, cwd)
    out.write(f"dry run: {len(writes)} file(s) would change; nothing was written\n")


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
        out.write(f"{inert(display_path(report.path, cwd))}:{finding_line(f)}\n")
    if refusal is not None:
        out.write(f"dry run: {refusal}: nothing would be applied\n")
        return
    write_diffs(writes, out, cwd)
    out.write(
        f"dry run: would apply ({report.raw_status}) to task {report.task}, changing "
        f"{len(writes)} file(s), and delete the metadata file; nothing was written\n"
    )
