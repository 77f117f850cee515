"""``postflightd scan``: validate every metadata file under the roots; ``--apply`` post-flights."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from postflightd.commands.arguments import COLOR_CHOICES, add_code_filters, add_format, policy
from postflightd.config import Config, load_config, load_configs
from postflightd.errors import ExitCode, UsageError
from postflightd.inert import inert
from postflightd.models.files import META_NAME
from postflightd.pipeline.check import state_report
from postflightd.pipeline.results import FileReport
from postflightd.pipeline.stream import scan_files
from postflightd.pipeline.summaries import ScanReport, Tally
from postflightd.project.root import (
    Project,
    find_project,
    require_own_project,
    require_project,
    root_of,
)
from postflightd.reporters.scan import REPORTERS, Scanned, report_statistics
from postflightd.reporters.style import Options, use_color
from postflightd.rules.findings import STATE_UNUSABLE, Policy

if TYPE_CHECKING:
    from postflightd.pipeline.dry_run import Plan


@dataclass(frozen=True, slots=True)
class ScanOutput:
    """How ``scan`` shows its result (the output conventions of ruff and friends)."""

    statistics: bool = False
    exit_zero: bool = False
    quiet: bool = False
    verbose: bool = False
    color: str = "auto"
    dry_run: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``scan``'s options."""
    parser.add_argument(
        "roots",
        nargs="*",
        metavar="ROOT|FILE",
        help="project roots, or metadata files (pre-commit passes these); default: the "
        "project the current directory is in",
    )
    add_format(parser, REPORTERS, "--output-format")
    add_code_filters(parser)
    parser.add_argument("--strict", action="store_true", default=None, help="warnings fail too")
    parser.add_argument("--apply", action="store_true", help="also post-flight valid final files")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="with --apply: print the diff of state.json and TODO.md and which metadata files "
        "would be deleted (applied) or kept; write nothing",
    )
    parser.add_argument("--statistics", action="store_true", help="counts per code, not findings")
    parser.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even when there are findings"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="findings only: no summary")
    parser.add_argument("-v", "--verbose", action="store_true", help="name each file applied")
    parser.add_argument("--color", choices=COLOR_CHOICES, default="auto", help="default: auto")
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def without_effect(args: argparse.Namespace) -> str | None:
    """``--verbose`` without ``--apply``: said, rather than silently ignored."""
    if args.verbose and not args.apply:
        return "--verbose names each file --apply applied: give --apply, or drop --verbose"
    return None


def run(args: argparse.Namespace) -> int:
    return run_scan(
        roots=args.roots,
        fmt=args.format,
        select=args.select,
        ignore=args.ignore,
        strict=args.strict,
        apply=args.apply,
        config_path=args.config,
        output=ScanOutput(
            statistics=args.statistics,
            exit_zero=args.exit_zero,
            quiet=args.quiet,
            verbose=args.verbose,
            color=args.color,
            dry_run=args.dry_run,
        ),
    )


def run_scan(
    *,
    roots: Sequence[str],
    fmt: str,
    select: Sequence[str],
    ignore: Sequence[str],
    strict: bool | None,
    apply: bool,
    config_path: str | None,
    output: ScanOutput | None = None,
) -> int:
    """Exit 0 clean, 1 findings (or a stuck run), 4 a state.json or specs/ refused."""
    out = output or ScanOutput()
    if out.dry_run and not apply:
        raise UsageError("--dry-run goes with --apply (a plain scan never writes anything)")
    if out.dry_run and fmt != "text":
        raise UsageError("--dry-run prints a unified diff: use it with --format text")
    if out.statistics and fmt not in ("text", "json"):
        raise UsageError("--statistics prints counts per code: use --format text or json")
    resolved, only = scan_targets(roots, config_path)
    # Each root is checked under its own configuration: one project's file never decides
    # another's findings or outcomes.
    configs = load_configs(config_path, resolved)
    policies = {root: policy(configs[root], select, ignore, strict) for root in resolved}
    strict_any = any(p.strict for p in policies.values())
    now = datetime.now(UTC)
    positions = not out.statistics  # every format shows where each finding points

    def note(text: str) -> None:
        if not out.quiet:
            print(f"postflightd: {inert(text)}", file=sys.stderr)

    options = Options(
        color=use_color(out.color, sys.stdout, os.environ),
        quiet=out.quiet,
        verbose=out.verbose,
        cwd=str(Path.cwd()),
    )
    report: ScanReport | None = None
    files: Iterable[FileReport]
    if apply:
        # Imported here: a plain scan never writes, and the writing half of the pipeline
        # (the journal, the group commit, TODO.md editing) is a fifth of its start-up.
        from postflightd.commands.arguments import open_journal
        from postflightd.pipeline.apply import apply_all, scan

        # Postflight works on the batch as a whole (and --dry-run previews it): in memory.
        report = ScanReport(roots=list(resolved), strict=strict_any)
        if not out.dry_run:
            for root in resolved:
                require_own_project(root, configs[root])
        journal = None if out.dry_run else open_journal(load_config(config_path))
        try:
            for root in resolved:
                config, chosen = configs[root], policies[root]
                if journal is None:
                    one = scan([root], config, chosen, now, only, positions=positions)
                else:
                    one = apply_all([root], config, chosen, journal, now, only)
                report.files.extend(one.files)
                report.notes.extend(one.notes)
                report.refused |= one.refused
        finally:
            if journal is not None:
                journal.close()
        for text in report.notes:
            note(text)
        shown = list(state_once(report.files, configs, policies))
        tally = Tally(strict=strict_any, project_problem=report.refused)
        scanned, files = report.roots, map(tally.add, shown)
    else:
        # A plain scan streams: each file is checked, reported and forgotten (flat memory).
        # Every root's specs_dir is checked before anything is printed (scan_files raises).
        streams = [
            scan_files(
                [root], configs[root], policies[root], now, only, positions=positions, model=False
            )
            for root in resolved
        ]
        tally = Tally(strict=strict_any)
        reports = chain.from_iterable(stream.reports(note) for stream in streams)
        scanned, files = list(resolved), map(tally.add, state_once(reports, configs, policies))
    if out.statistics:
        report_statistics(files, sys.stdout, fmt, options)
    else:
        REPORTERS[fmt](Scanned(scanned, files, tally), sys.stdout, options)
    if report is not None and out.dry_run:
        from postflightd.reporters.dry_run import report_scan_dry_run

        report_scan_dry_run(_plan(report, configs, now), report.files, sys.stdout, options.cwd)
    code = tally.exit_code
    if out.exit_zero and code is ExitCode.FINDINGS:
        return int(ExitCode.OK)
    return int(code)


def state_once(
    files: Iterable[FileReport], configs: Mapping[Path, Config], policies: Mapping[Path, Policy]
) -> Iterator[FileReport]:
    """``files`` with an unusable state.json reported once per root, not once per file.

    Every file of a root whose state.json is unusable carries the same PF604 (the pipeline
    needs it on each: it decides each file's outcome). Shown, it is one finding, at
    state.json's own path and the place of the problem, just before the first file that
    carried it; each file is shown without it, and judged valid or not by its own findings.
    """
    reported: set[Path] = set()
    for file in files:
        shared = [f for f in file.findings if f.code == STATE_UNUSABLE]
        if not shared:
            yield file
            continue
        root = file.root
        config = configs.get(root) or Config()
        if root not in reported:
            reported.add(root)
            yield state_report(root, config, shared[0])
        own = [f for f in file.findings if f.code != STATE_UNUSABLE]
        chosen = policies.get(root)
        valid = not own or chosen is None or not chosen.fails(own)
        yield replace(file, findings=own, valid=valid)


def _plan(report: ScanReport, configs: Mapping[Path, Config], now: datetime) -> Plan:
    """What ``scan --apply`` would write and apply, root by root; nothing is written."""
    from postflightd.pipeline.dry_run import Plan, plan

    by_root: dict[Path, list[FileReport]] = {}
    for file in report.files:
        by_root.setdefault(file.root, []).append(file)
    whole = Plan([], [])
    for root, files in by_root.items():
        with Project.open(root, configs[root]) as project:
            one = plan(project, files, configs[root], now)
        whole.writes.extend(one.writes)
        whole.applied.extend(one.applied)
    return whole


def scan_targets(
    args: Sequence[str], config_path: str | None
) -> tuple[list[Path], dict[Path, frozenset[str]] | None]:
    """Roots to scan, and for roots reached through metadata file arguments, those files.

    No argument: the project the current directory is in (``find_project``).

    pre-commit passes the staged ``specs/*/.return-meta.json`` files; each is mapped to its
    project root as ``process`` does (``ROOT/<specs_dir>/<task>/FILE``).
    """

    def load(paths: list[Path]) -> Config:
        return load_config(config_path, paths)

    if not args:
        return [find_project(load)], None
    roots: list[Path] = []
    files: dict[Path, set[str]] = {}
    whole: set[Path] = set()
    for arg in args:
        path = Path(arg).expanduser()
        if path.name == META_NAME and not path.is_dir():
            if not (path.exists() or path.is_symlink()):
                raise UsageError(f"{arg}: no such file")
            absolute = path if path.is_absolute() else Path.cwd() / path
            root, config = root_of(absolute, load)
            # Named through the root as the scan finds it: a symlinked file stays a symlink.
            name = root / config.specs_dir / absolute.parent.name / META_NAME
            files.setdefault(root, set()).add(str(name))
            if root not in roots:
                roots.append(root)
            continue
        if path.exists() and not path.is_dir():
            raise UsageError(
                f"{arg}: is a file, but neither a project root (a directory) nor a "
                f"{META_NAME} metadata file"
            )
        root = require_project(arg, load)
        whole.add(root)
        if root not in roots:
            roots.append(root)
    if not files:
        return roots, None
    return roots, {r: frozenset(f) for r, f in files.items() if r not in whole}
