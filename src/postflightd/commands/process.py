"""``postflightd process FILE``: post-flight one metadata file now (a hook's target)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from postflightd.commands.arguments import open_journal, policy
from postflightd.config import Config, load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.findings import Policy
from postflightd.inert import inert, json_text
from postflightd.journal import Journal
from postflightd.loader import META_NAME, MetaFileRef, parse_task_dir
from postflightd.models import Status
from postflightd.pipeline import (
    FileReport,
    Outcome,
    Project,
    check_file,
    clean_litter,
    postflight,
    preview,
    root_of,
    unified_diff,
)
from postflightd.reporters import display_path


def run_process(
    file: str,
    fmt: str,
    config_path: str | None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    dry_run: bool = False,
) -> int:
    """Run the pipeline on one file now: exit 0 applied, 1 invalid, 3 in progress, 4 PF604/PF606."""
    if Path(file).name != META_NAME:
        # Postflight deletes what it applies: only ever a file of that one name (SPEC 7.1).
        raise UsageError(f"{file}: not a metadata file; `process` takes a {META_NAME} file")
    # Lexically normalised: a `..` component must not name a different task directory than
    # the one the file is then opened in (relative to the specs directory, without links).
    path = Path(os.path.abspath(file))  # noqa: PTH100 - lexical; resolve() follows links
    exists = path.exists() or path.is_symlink()
    if not exists and not path.parent.is_dir():
        raise UsageError(f"{file}: no such file")
    root, config = root_of(path, lambda roots: load_config(config_path, roots))
    chosen = policy(config, select, ignore)
    if dry_run:
        if fmt != "text":
            raise UsageError("--dry-run prints a unified diff: use it with --format text")
        if not exists:
            raise UsageError(f"{file}: no such file")
        return _process_dry_run(root, path, config, chosen)
    journal = open_journal(config)
    try:
        project = Project.open(root, config)
        # A deletion of this file that a crash interrupted is finished (or undone) first.
        for note in clean_litter(project, config, journal, [path.parent.name]):
            print(f"postflightd: {note}", file=sys.stderr)
        exists = path.exists() or path.is_symlink()
        if not exists:
            done = _already_postflighted(journal, root, path, None)
            if done is None:
                raise UsageError(f"{file}: no such file")
            # A daemon, hook or concurrent `process` took it first: the outcome is applied.
            print(f"{inert(file)}: already post-flighted ({done}); nothing to do")
            return int(ExitCode.OK)
        # A file the agent rewrites while it is being applied is read and applied again.
        for _ in range(3):
            with Project.open(root, config) as project:
                project.require_specs()
                ref = MetaFileRef(
                    project.specs_dir / path.parent.name / META_NAME, path.parent.name
                )
                (report,) = postflight(
                    project, [ref], config, chosen, journal, datetime.now(UTC), interrupted=True
                )
            if report.outcome is not Outcome.REWRITTEN:
                break
        done = None
        if report.outcome is Outcome.GONE:
            # It vanished between our read and our lock, or before our read: another run
            # applied it when the journal holds its content (the delete row may not be written
            # yet: a batch journals its deletions last).
            raw = report.loaded.raw
            content = raw.decode("utf-8", errors="replace") if raw is not None else None
            done = _already_postflighted(journal, root, path, content)
    finally:
        journal.close()
    if fmt == "json":
        out = report.to_json()
        if done is not None:
            out["already_postflighted"] = done
        sys.stdout.write(json_text(out, indent=2) + "\n")
    elif done is not None:
        print(f"{inert(file)}: already post-flighted ({done}); nothing to do")
    else:
        _print_process_summary(report)
    codes = {
        Outcome.APPLIED: ExitCode.OK,
        Outcome.GONE: ExitCode.OK,
        Outcome.IN_PROGRESS: ExitCode.IN_PROGRESS,
        Outcome.STATE_UNUSABLE: ExitCode.STATE_UNUSABLE,
        Outcome.INCOMPLETE: ExitCode.STATE_UNUSABLE,
    }
    assert report.outcome is not None
    return int(codes.get(report.outcome, ExitCode.FINDINGS))


def _process_dry_run(root: Path, path: Path, config: Config, chosen: Policy) -> int:
    """``process --dry-run``: the diff of state.json and TODO.md it would write; no writes."""
    now = datetime.now(UTC)
    project = Project.open(root, config)
    report = check_file(project, MetaFileRef(path, path.parent.name), config, chosen, now)
    cwd = str(Path.cwd())
    for f in report.findings:
        print(
            f"{inert(display_path(report.path, cwd))}:{f.code} {f.severity.value}: "
            f"{inert(f.message)}"
        )
    if not project.state.usable:
        print("dry run: state.json is unusable (PF604): nothing would be applied")
        return int(ExitCode.STATE_UNUSABLE)
    if report.status is Status.IN_PROGRESS:
        print("dry run: the file is still in_progress: nothing would be applied")
        return int(ExitCode.IN_PROGRESS)
    if not report.valid:
        print("dry run: invalid: nothing would be applied")
        return int(ExitCode.FINDINGS)
    writes = preview(project, [report], config, now)
    for write in writes:
        sys.stdout.write(unified_diff(write, display_path(write.path, cwd)))
    print(
        f"dry run: would apply ({report.raw_status}) to task {report.task}, changing "
        f"{len(writes)} file(s), and delete the metadata file; nothing was written"
    )
    return int(ExitCode.OK)


def _already_postflighted(
    journal: Journal, root: Path, path: Path, content: str | None
) -> str | None:
    """When the journal holds this file as post-flighted (with ``content``, when known): when."""
    parsed = parse_task_dir(path.parent.name)
    if parsed is None:
        return None
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    row = journal.last_postflighted(root=str(root), file=rel, task=parsed[0], content=content)
    if row is None:
        return None
    return f"recorded {row.ts}" + (f", session {row.session}" if row.session else "")


def _print_process_summary(report: FileReport) -> None:
    what = {
        Outcome.APPLIED: f"applied ({inert(report.raw_status or '')}) to task {report.task}; "
        + ("file kept" if report.path.exists() else "file deleted"),
        Outcome.GONE: "the file vanished before it could be applied (another run took it; "
        "this journal has no record of it)",
        Outcome.INCOMPLETE: "applied to state.json, but not every file of the outcome could be "
        "written (see below); the file is kept: run again once fixed",
        Outcome.IN_PROGRESS: "still in_progress: the run was interrupted; recorded in "
        "errors.json, task status left as it was",
        Outcome.STATE_UNUSABLE: "not applied: state.json is unusable (PF604); the file is kept",
        Outcome.REWRITTEN: "not applied: the file kept changing while it was processed; run again",
        Outcome.INVALID: "not applied: invalid; the file is kept",
    }
    assert report.outcome is not None
    print(f"{inert(report.rel_path)}: {what.get(report.outcome, report.outcome.value)}")
    for f in report.findings:
        print(f"  {f.code} {f.severity.value}: {inert(f.message)}")
    for note in report.notes:
        print(f"  note: {inert(note)}")
