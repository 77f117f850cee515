"""``postflightd process FILE``: post-flight one metadata file now (a hook's target)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from postflightd.commands.arguments import add_code_filters, add_format, open_journal, policy
from postflightd.config import Config, load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.journal.database import Journal, content_text
from postflightd.journal.rows import Observation
from postflightd.models.files import META_NAME
from postflightd.models.terms import Status
from postflightd.pipeline.apply import apply_files
from postflightd.pipeline.check import check_file
from postflightd.pipeline.cleanup import clean_litter
from postflightd.pipeline.dry_run import preview
from postflightd.pipeline.results import Outcome
from postflightd.pipeline.summaries import Processed
from postflightd.project.metafiles import MetaFileRef, parse_task_dir
from postflightd.project.root import Project, require_own_project, root_of
from postflightd.reporters.dry_run import report_process_dry_run
from postflightd.reporters.process import REPORTERS
from postflightd.reporters.style import Options
from postflightd.rules.findings import Policy, state_unusable_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``process``'s options."""
    parser.add_argument("file", metavar="FILE", help="specs/{N}_{SLUG}/.return-meta.json")
    add_format(parser, REPORTERS)
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the diff of state.json and TODO.md; write nothing",
    )
    add_code_filters(parser)


def run(args: argparse.Namespace) -> int:
    return run_process(
        file=args.file,
        fmt=args.format,
        config_path=args.config,
        select=args.select,
        ignore=args.ignore,
        dry_run=args.dry_run,
    )


def run_process(
    *,
    file: str,
    fmt: str,
    config_path: str | None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    dry_run: bool = False,
) -> int:
    """Run the pipeline on one file now: exit 0 applied, 1 invalid, 3 in progress, 4 PF604/PF606."""
    if Path(file).name != META_NAME:
        # Postflight deletes what it applies: only ever a file of that one name, so no
        # argument can make it delete another file.
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
    require_own_project(root, config)
    journal = open_journal(config)
    try:
        # A deletion of this file that a crash interrupted is finished (or undone) first.
        with Project.open(root, config) as project:
            for note in clean_litter(project, config, journal, [path.parent.name]):
                print(f"postflightd: {note}", file=sys.stderr)
        exists = path.exists() or path.is_symlink()
        if not exists:
            row = _already_postflighted(journal, root, path, None)
            if row is None:
                raise UsageError(f"{file}: no such file")
            # A daemon, hook or concurrent `process` took it first: the outcome is applied.
            gone = Processed(
                file=file,
                report=None,
                already=_when(row),
                root=str(root),
                path=row.file,
                status=row.status,
            )
            result = _described(gone, root, config, path, fmt)
            REPORTERS[fmt](result, sys.stdout, Options())
            return int(result.exit_code)
        # A file the agent rewrites while it is being applied is read and applied again.
        for _ in range(3):
            with Project.open(root, config) as project:
                project.require_specs()
                ref = MetaFileRef.at(project.specs_dir / path.parent.name / META_NAME)
                (report,) = apply_files(
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
            content = content_text(raw) if raw is not None else None
            row = _already_postflighted(journal, root, path, content)
            done = _when(row) if row is not None else None
    finally:
        journal.close()
    result = _described(Processed(file=file, report=report, already=done), root, config, path, fmt)
    REPORTERS[fmt](result, sys.stdout, Options())
    return int(result.exit_code)


def _described(result: Processed, root: Path, config: Config, path: Path, fmt: str) -> Processed:
    """``result`` with its task's number and name, and for ``--format json`` the task's
    state.json entry as the run left it (what a workflow's next stage reads)."""
    parsed = parse_task_dir(path.parent.name)
    if parsed is None:
        return result
    entry = None
    if fmt == "json":
        with Project.open(root, config) as project:
            entry = project.state.tasks.get(parsed[0])
    return replace(result, task=parsed[0], task_name=parsed[1], state_entry=entry)


def _process_dry_run(root: Path, path: Path, config: Config, chosen: Policy) -> int:
    """``process --dry-run``: the diff of state.json and TODO.md it would write; no writes."""
    now = datetime.now(UTC)
    with Project.open(root, config) as project:
        report = check_file(project, MetaFileRef.at(path), config, chosen, now)
        refusal, code = None, ExitCode.OK
        if not project.state.usable:
            refusal = state_unusable_text("state.json is unusable")
            code = ExitCode.STATE_UNUSABLE
        elif report.status is Status.IN_PROGRESS:
            refusal, code = "the file is still in_progress", ExitCode.IN_PROGRESS
        elif not report.valid:
            refusal, code = "the file is invalid", ExitCode.FINDINGS
        writes = preview(project, [report], config, now) if refusal is None else []
    report_process_dry_run(report, writes, refusal, sys.stdout, str(Path.cwd()))
    return int(code)


def _already_postflighted(
    journal: Journal, root: Path, path: Path, content: str | None
) -> Observation | None:
    """The journal's row of this file as post-flighted (with ``content``, when known)."""
    parsed = parse_task_dir(path.parent.name)
    if parsed is None:
        return None
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    return journal.last_postflighted(root=str(root), file=rel, task=parsed[0], content=content)


def _when(row: Observation) -> str:
    """When the run that applied the file recorded it, and its session."""
    return f"recorded {row.ts}" + (f", session {row.session}" if row.session else "")
