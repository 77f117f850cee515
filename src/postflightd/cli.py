"""The command line: argument parsing, and the one place failures become exit codes.

Imports of the pipeline are deferred into the command functions so that ``--version`` and
``--help`` stay fast (SPEC 6: CLI start-up <= 250 ms).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from postflightd import __version__

if TYPE_CHECKING:
    from datetime import datetime

    from postflightd.config import Config
    from postflightd.findings import Policy
    from postflightd.journal import Journal
    from postflightd.pipeline import FileReport, ScanReport

    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

FORMATS = ("text", "json", "github", "sarif")
COLOR_CHOICES = ("auto", "always", "never")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="postflightd",
        description="Validate AI agents' .return-meta.json files and apply their outcome to "
        "specs/state.json and TODO.md.",
    )
    parser.add_argument("--version", action="version", version=f"postflightd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    scan = sub.add_parser("scan", help="validate every metadata file; report stuck agents")
    scan.add_argument(
        "roots",
        nargs="*",
        metavar="ROOT|FILE",
        help="project roots, or metadata files (pre-commit passes these); default: .",
    )
    scan.add_argument("--format", "--output-format", dest="format", choices=FORMATS, default="text")
    scan.add_argument(
        "--select", action="append", default=[], metavar="CODES", help="only these codes"
    )
    scan.add_argument(
        "--ignore", action="append", default=[], metavar="CODES", help="never these codes"
    )
    scan.add_argument("--strict", action="store_true", default=None, help="warnings fail too")
    scan.add_argument("--apply", action="store_true", help="also post-flight valid final files")
    scan.add_argument(
        "--dry-run",
        action="store_true",
        help="with --apply: print the diff of state.json and TODO.md; write nothing",
    )
    scan.add_argument("--statistics", action="store_true", help="counts per code, not findings")
    scan.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even when there are findings"
    )
    scan.add_argument("-q", "--quiet", action="store_true", help="findings only: no summary")
    scan.add_argument("-v", "--verbose", action="store_true", help="name each file applied")
    scan.add_argument("--color", choices=COLOR_CHOICES, default="auto", help="default: auto")
    scan.add_argument("--config", metavar="PATH", help="configuration file (TOML)")

    process = sub.add_parser("process", help="post-flight one metadata file now (hook target)")
    process.add_argument("file", metavar="FILE", help="specs/{N}_{SLUG}/.return-meta.json")
    process.add_argument("--format", choices=("text", "json"), default="text")
    process.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    process.add_argument(
        "--dry-run",
        action="store_true",
        help="print the diff of state.json and TODO.md; write nothing",
    )
    _add_code_filters(process)

    hook = sub.add_parser("hook", help="adapter for an agent runtime's stop hook")
    hook.add_argument(
        "runtime", choices=("claude",), help="the hook protocol spoken on stdin/stdout"
    )
    hook.add_argument("--config", metavar="PATH", help="configuration file (TOML)")

    history = sub.add_parser("history", help="what the journal recorded")
    history.add_argument("--task", type=int, metavar="N")
    history.add_argument("--session", metavar="S")
    history.add_argument("--limit", type=int, default=200, metavar="N")
    history.add_argument("--root", metavar="DIR", help="only this project root")
    history.add_argument(
        "--since",
        metavar="WHEN",
        help="only since then: a duration back (30m, 2h, 7d), a date, or all",
    )
    history.add_argument(
        "--show", action="store_true", help="print the recorded file content of each row"
    )
    history.add_argument("--format", choices=("text", "json"), default="text")
    history.add_argument("--config", metavar="PATH", help="configuration file (TOML)")

    ret = sub.add_parser("check-return", help="validate a subagent's console return")
    ret.add_argument("file", nargs="?", default="-", metavar="FILE", help="default: - (stdin)")
    ret.add_argument(
        "--dialect", choices=("auto", "subagent-return", "agent-output"), default="auto"
    )
    ret.add_argument("--expect-session", metavar="SID", help="the session id delegated")
    ret.add_argument("--root", default=".", metavar="DIR", help="artifact paths are relative to it")
    ret.add_argument("--format", choices=("text", "json", "github"), default="text")
    ret.add_argument("--select", action="append", default=[], metavar="CODES")
    ret.add_argument("--ignore", action="append", default=[], metavar="CODES")
    ret.add_argument("--strict", action="store_true", default=None, help="warnings fail too")
    ret.add_argument(
        "--config", metavar="PATH", help="configuration file (TOML; default: looked up from --root)"
    )

    sub.add_parser("schema", help="print the JSON Schema of the metadata file")
    rules = sub.add_parser("rules", help="list the rule codes, or explain one (rules PF405)")
    rules.add_argument("code", nargs="?", metavar="CODE", help="explain this rule")

    watch = sub.add_parser("watch", help="the daemon: watch roots, post-flight as agents finish")
    watch.add_argument("roots", nargs="*", metavar="ROOT", help="default: [watch] roots, else .")
    watch.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    watch.add_argument("--log-format", choices=("auto", "json", "console"), default=None)
    watch.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default=None)

    status = sub.add_parser("status", help="the runs in flight: stage, phases, elapsed, STUCK")
    status.add_argument("roots", nargs="*", metavar="ROOT", help="default: [watch] roots, else .")
    status.add_argument("--format", choices=("text", "json"), default="text")
    status.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    status.add_argument("--color", choices=COLOR_CHOICES, default="auto", help="default: auto")
    _add_code_filters(status)

    verify = sub.add_parser(
        "verify", help="outcomes the journal recorded that state.json or TODO.md no longer shows"
    )
    verify.add_argument("roots", nargs="*", metavar="ROOT", help="project roots (default: .)")
    verify.add_argument(
        "--since", default="24h", metavar="DURATION", help="90s, 10m, 24h, 7d, all (default 24h)"
    )
    verify.add_argument(
        "--repair", action="store_true", help="re-apply the outcomes lost to non-locking writers"
    )
    verify.add_argument("--format", choices=("text", "json"), default="text")
    verify.add_argument("--config", metavar="PATH", help="configuration file (TOML)")

    # --- issue 13: project set-up and shell completion ---
    init = sub.add_parser("init", help="set a project up: .gitignore, stop hook, config file")
    init.add_argument("root", nargs="?", default=".", metavar="ROOT", help="default: .")
    init.add_argument("-y", "--yes", action="store_true", help="write without asking")
    init.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    completion = sub.add_parser("completion", help="print the shell completion script")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    _add_report_parsers(sub, status)
    return parser


def _add_code_filters(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--select", action="append", default=[], metavar="CODES", help="only these codes"
    )
    command.add_argument(
        "--ignore", action="append", default=[], metavar="CODES", help="never these codes"
    )


def _add_report_parsers(sub: _SubParsers, status: argparse.ArgumentParser) -> None:
    """``report`` and ``status --watch`` (issue 14)."""
    status.add_argument(
        "--watch", action="store_true", help="live view, redrawn in place; Ctrl-C to quit"
    )
    status.add_argument("--interval", default="1s", metavar="SECONDS", help="e.g. 1s, 500ms")
    report = sub.add_parser(
        "report", help="analytics from the journal: outcomes, durations, timeouts, findings"
    )
    report.add_argument("roots", nargs="*", metavar="ROOT", help="default: every root journaled")
    report.add_argument(
        "--since", default="30d", metavar="DURATION", help="30d (default), 12h, 2026-01-31, all"
    )
    report.add_argument("--format", choices=("text", "json", "html"), default="text")
    report.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    report.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def _load_config(explicit: str | None, roots: Sequence[Path]) -> Config:
    from postflightd.config import load_config

    return load_config(explicit, list(roots))


class ScanOutput:
    """How ``scan`` shows its result (the output conventions of ruff and friends).

    A plain class: a dataclass or NamedTuple costs ``--version`` 3-10 ms at import time.
    """

    __slots__ = ("color", "dry_run", "exit_zero", "quiet", "statistics", "verbose")

    def __init__(
        self,
        *,
        statistics: bool = False,
        exit_zero: bool = False,
        quiet: bool = False,
        verbose: bool = False,
        color: str = "auto",
        dry_run: bool = False,
    ) -> None:
        self.statistics = statistics
        self.exit_zero = exit_zero
        self.quiet = quiet
        self.verbose = verbose
        self.color = color
        self.dry_run = dry_run


def cmd_scan(
    roots: Sequence[str],
    fmt: str,
    select: Sequence[str],
    ignore: Sequence[str],
    strict: bool | None,
    apply: bool,
    config_path: str | None,
    output: ScanOutput | None = None,
) -> int:
    import os
    from datetime import UTC, datetime

    from postflightd.errors import ExitCode, UsageError
    from postflightd.inert import inert
    from postflightd.pipeline import Tally, apply_all, scan, scan_files
    from postflightd.reporters import WRITERS, Options, report_statistics, use_color

    out = output or ScanOutput()
    if out.dry_run and not apply:
        raise UsageError("--dry-run goes with --apply (a plain scan never writes anything)")
    if out.dry_run and fmt != "text":
        raise UsageError("--dry-run prints a unified diff: use it with --format text")
    if out.statistics and fmt not in ("text", "json"):
        raise UsageError("--statistics prints counts per code: use --format text or json")
    resolved, only = _scan_targets(roots or ["."], config_path)
    config = _load_config(config_path, resolved)
    policy = _policy(config, select, ignore, strict)
    now = datetime.now(UTC)
    positions = fmt in ("github", "sarif")

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
    if apply:
        # Postflight works on the batch as a whole (and --dry-run previews it): in memory.
        if out.dry_run:
            report = scan(resolved, config, policy, now, only, positions=positions)
        else:
            report = apply_all(resolved, config, policy, _open_journal(config), now, only)
        for text in report.notes:
            note(text)
        tally = report.tally()
        scanned, files = report.roots, iter(report.files)
    else:
        # A plain scan streams: each file is checked, reported and forgotten (flat memory).
        stream = scan_files(resolved, config, policy, now, only, positions=positions)
        tally = Tally(strict=policy.strict)
        scanned, files = stream.roots, map(tally.add, stream.reports(note))
    if out.statistics:
        report_statistics(files, sys.stdout, fmt, options)
    else:
        WRITERS[fmt](scanned, files, tally, sys.stdout, options)
    if report is not None and out.dry_run:
        _print_dry_run(report, config, now, options.cwd)
    code = tally.exit_code
    if out.exit_zero and code is ExitCode.FINDINGS:
        return int(ExitCode.OK)
    return int(code)


def _print_dry_run(report: ScanReport, config: Config, now: datetime, cwd: str) -> None:
    """The unified diff of what ``scan --apply`` would write; nothing is written."""
    from postflightd.pipeline import Project, preview, unified_diff
    from postflightd.reporters import display_path

    by_root: dict[Path, list[FileReport]] = {}
    for file in report.files:
        by_root.setdefault(file.root, []).append(file)
    count = 0
    for root, files in by_root.items():
        project = Project.open(root, config)
        for write in preview(project, files, config, now):
            shown = display_path(write.path, cwd)
            sys.stdout.write(unified_diff(write, shown))
            count += 1
    print(f"dry run: {count} file(s) would change; nothing was written")


def _scan_targets(
    args: Sequence[str], config_path: str | None
) -> tuple[list[Path], dict[Path, frozenset[str]] | None]:
    """Roots to scan, and for roots reached through metadata file arguments, those files.

    pre-commit passes the staged ``specs/*/.return-meta.json`` files; each is mapped to its
    project root as ``process`` does (``ROOT/<specs_dir>/<task>/FILE``).
    """
    from postflightd.errors import UsageError
    from postflightd.loader import META_NAME
    from postflightd.pipeline import resolve_root, root_of

    roots: list[Path] = []
    files: dict[Path, set[str]] = {}
    whole: set[Path] = set()
    for arg in args:
        path = Path(arg).expanduser()
        if path.name == META_NAME and not path.is_dir():
            if not (path.exists() or path.is_symlink()):
                raise UsageError(f"{arg}: no such file")
            absolute = path if path.is_absolute() else Path.cwd() / path
            root, config = root_of(absolute, lambda rs: _load_config(config_path, rs))
            # Named through the root as the scan finds it: a symlinked file stays a symlink.
            name = root / config.specs_dir / absolute.parent.name / META_NAME
            files.setdefault(root, set()).add(str(name))
            if root not in roots:
                roots.append(root)
            continue
        if path.exists() and not path.is_dir():
            raise UsageError(
                f"{arg}: not a project root (a directory) nor a {META_NAME} metadata file"
            )
        root = resolve_root(arg)
        whole.add(root)
        if root not in roots:
            roots.append(root)
    if not files:
        return roots, None
    return roots, {r: frozenset(f) for r, f in files.items() if r not in whole}


def _open_journal(config: Config) -> Journal:
    from postflightd.journal import Journal, journal_path

    return Journal.open(journal_path(config.journal.path))


def _policy(
    config: Config, select: Sequence[str], ignore: Sequence[str], strict: bool | None = None
) -> Policy:
    """The configuration's policy with the command's flags applied; a bad code is exit 2."""
    from postflightd.errors import UsageError
    from postflightd.findings import UnknownCodeError
    from postflightd.pipeline import policy_from

    try:
        return policy_from(config, select, ignore, strict)
    except UnknownCodeError as exc:
        raise UsageError(str(exc)) from None


def cmd_process(
    file: str,
    fmt: str,
    config_path: str | None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    dry_run: bool = False,
) -> int:
    """Run the pipeline on one file now: exit 0 applied, 1 invalid, 3 in progress, 4 PF604/PF606."""
    from datetime import UTC, datetime

    from postflightd.errors import ExitCode, UsageError
    from postflightd.inert import inert, json_text
    from postflightd.loader import META_NAME, MetaFileRef
    from postflightd.pipeline import Outcome, Project, clean_litter, postflight, root_of

    if Path(file).name != META_NAME:
        # Postflight deletes what it applies: only ever a file of that one name (SPEC 7.1).
        raise UsageError(f"{file}: not a metadata file; `process` takes a {META_NAME} file")
    # Lexically normalised: a `..` component must not name a different task directory than
    # the one the file is then opened in (relative to the specs directory, without links).
    path = Path(os.path.abspath(file))  # noqa: PTH100 - lexical; resolve() follows links
    exists = path.exists() or path.is_symlink()
    if not exists and not path.parent.is_dir():
        raise UsageError(f"{file}: no such file")
    root, config = root_of(path, lambda roots: _load_config(config_path, roots))
    policy = _policy(config, select, ignore)
    if dry_run:
        if fmt != "text":
            raise UsageError("--dry-run prints a unified diff: use it with --format text")
        if not exists:
            raise UsageError(f"{file}: no such file")
        return _process_dry_run(root, path, config, policy)
    journal = _open_journal(config)
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
                    project, [ref], config, policy, journal, datetime.now(UTC), interrupted=True
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


def _process_dry_run(root: Path, path: Path, config: Config, policy: Policy) -> int:
    """``process --dry-run``: the diff of state.json and TODO.md it would write; no writes."""
    from datetime import UTC, datetime

    from postflightd.errors import ExitCode
    from postflightd.inert import inert
    from postflightd.loader import MetaFileRef
    from postflightd.models import Status
    from postflightd.pipeline import Project, check_file, preview, unified_diff
    from postflightd.reporters import display_path

    now = datetime.now(UTC)
    project = Project.open(root, config)
    report = check_file(project, MetaFileRef(path, path.parent.name), config, policy, now)
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
    from postflightd.loader import parse_task_dir

    parsed = parse_task_dir(path.parent.name)
    if parsed is None:
        return None
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    row = journal.last_postflighted(root=str(root), file=rel, task=parsed[0], content=content)
    if row is None:
        return None
    return f"recorded {row.ts}" + (f", session {row.session}" if row.session else "")


def _print_process_summary(report: FileReport) -> None:
    from postflightd.inert import inert
    from postflightd.pipeline import Outcome

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


def cmd_hook(config_path: str | None) -> int:
    """Stop-hook adapter: exactly one JSON object on stdout, and never exit 2 (SPEC 4).

    Exit 2 means "block and show stderr to the agent" to the runtime: so malformed stdin is
    exit 1 (one line on stderr), and every problem that is not the metadata's is a
    ``systemMessage`` for the person, exit 0.
    """
    import os

    from postflightd.errors import ExitCode, PostflightError
    from postflightd.hook import (
        HookInputError,
        answer,
        parse_hook_input,
        read_hook_input,
        system_message,
    )
    from postflightd.inert import inert, json_text

    reply: Mapping[str, object]
    try:
        # Descriptor 0 itself: the runtime's pipe, and no AttributeError when sys.stdin is
        # None (started with stdin closed): read_hook_input turns EBADF into HookInputError.
        hook_input = parse_hook_input(read_hook_input(0))
    except HookInputError as exc:
        print(f"postflightd: {inert(str(exc))}", file=sys.stderr)
        print("{}")
        return int(ExitCode.FINDINGS)
    try:
        reply = answer(
            hook_input,
            lambda start: _load_config(config_path, [start]),
            _open_journal,
            os.environ,
        )
    except PostflightError as exc:
        reply = system_message([str(exc)])
    except Exception as exc:  # noqa: BLE001 - the hook must answer the runtime whatever happens
        where = _log_internal_error(exc)
        reply = system_message([f"internal error ({type(exc).__name__}); details in {where}"])
    print(json_text(reply))
    return int(ExitCode.OK)


def cmd_history(
    task: int | None,
    session: str | None,
    limit: int,
    fmt: str,
    config_path: str | None,
    root: str | None = None,
    since: str | None = None,
    show: bool = False,
) -> int:
    """What the journal recorded; ``--show`` adds each row's recorded file content."""
    from dataclasses import asdict
    from datetime import UTC, datetime

    from postflightd.durations import parse_since
    from postflightd.errors import UsageError
    from postflightd.inert import inert, json_text

    since_at = None
    if since is not None:
        try:
            since_at = parse_since(since, datetime.now(UTC))
        except ValueError as exc:
            raise UsageError(f"--since: {exc}") from None
    # The journal records resolved roots: `--root .` matches what the daemon wrote.
    root_s = str(Path(root).expanduser().resolve()) if root is not None else None
    config = _load_config(config_path, [Path.cwd()])
    journal = _open_journal(config)
    try:
        if not journal.enabled:
            raise UsageError(f"the journal cannot be opened: {journal.error}")
        rows = journal.history(task=task, session=session, limit=limit, root=root_s, since=since_at)
        pruned = journal.pruned_before()
    finally:
        journal.close()
    # Showing everything that is left (fewer rows than the limit) of a journal whose older
    # rows were pruned: say so, or a missing run would look like it never happened.
    note = None
    if since_at is not None and pruned is not None:
        from postflightd.journal import format_ts

        if format_ts(since_at) >= pruned:
            pruned = None  # the range asked for starts after the pruned edge
    if pruned is not None and len(rows) < max(limit, 0):
        note = (
            f"note: observations before {pruned} were pruned ([journal] keep_days = "
            f"{config.journal.keep_days:g}); older runs are not shown"
        )
    if fmt == "json":
        # The JSON rows always carry `content` (a fixed shape); --show is for the text form.
        sys.stdout.write(json_text([asdict(r) for r in rows], indent=2) + "\n")
        if note:
            print(note, file=sys.stderr)
        return 0
    if note:
        print(note)
    for r in rows:
        task_s = "-" if r.task is None else str(r.task)
        pruned_content = " (content pruned)" if r.kind == "postflighted" and not r.content else ""
        print(
            f"{inert(r.ts)}  {inert(r.kind):<13} task {task_s:<5} {inert(r.status or '-'):<12} "
            f"{inert(r.session or '-')}  {inert(r.root)}/{inert(r.file)}{pruned_content}"
        )
        if show and r.content is not None:
            # The recorded file, one output line per line of it (splitlines also splits on
            # CR, VT, FF, NEL, U+2028: each piece is then escaped whole).
            for line in r.content.splitlines():
                print(f"    {inert(line)}")
    if not rows:
        filtered = any(x is not None for x in (task, session, root, since))
        print("no observations recorded" + (" for that filter" if filtered else ""))
    return 0


def cmd_schema() -> int:
    import json

    from postflightd.models import json_schema

    json.dump(json_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def cmd_rules(code: str | None = None) -> int:
    """Every rule on one line each, or one rule explained (``rules PF405``), as ruff does."""
    from postflightd.findings import RULES

    if code is not None:
        from postflightd.errors import UsageError
        from postflightd.explanations import explain

        key = code.strip().upper()
        if key not in RULES:
            raise UsageError(f"unknown rule code {code!r} (`postflightd rules` lists them)")
        sys.stdout.write(explain(key))
        return 0
    for rule in RULES.values():
        print(f"{rule.code}  {rule.severity.value:<7}  {rule.summary}")
    return 0


def cmd_check_return(
    file: str,
    dialect: str,
    expect_session: str | None,
    root: str,
    fmt: str,
    select: Sequence[str],
    ignore: Sequence[str],
    strict: bool | None,
    config_path: str | None,
) -> int:
    """check-return with the configuration's severity overrides, select, ignore and strict."""
    from postflightd.returns import check_return

    root_dir = Path(root).expanduser()
    config = _load_config(config_path, [root_dir] if root_dir.is_dir() else [])
    policy = _policy(config, select, ignore, strict)
    return check_return(file, dialect, expect_session, root, fmt, policy=policy)


def _run(argv: Sequence[str] | None) -> int:
    parser = _parser()
    from postflightd.completion import complete_and_exit, completing

    if completing():
        complete_and_exit(parser)
    args = parser.parse_args(argv)
    from postflightd.logs import command_logging

    # Once, for every command, on stderr: structlog's default prints to stdout, where a
    # warning would corrupt a JSON report or the hook's answer.
    with command_logging():
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    match args.command:
        case "scan":
            return cmd_scan(
                args.roots,
                args.format,
                args.select,
                args.ignore,
                args.strict,
                args.apply,
                args.config,
                ScanOutput(
                    statistics=args.statistics,
                    exit_zero=args.exit_zero,
                    quiet=args.quiet,
                    verbose=args.verbose,
                    color=args.color,
                    dry_run=args.dry_run,
                ),
            )
        case "process":
            return cmd_process(
                args.file, args.format, args.config, args.select, args.ignore, args.dry_run
            )
        case "hook":
            return cmd_hook(args.config)
        case "history":
            return cmd_history(
                args.task,
                args.session,
                args.limit,
                args.format,
                args.config,
                args.root,
                args.since,
                args.show,
            )
        case "check-return":
            return cmd_check_return(
                args.file,
                args.dialect,
                args.expect_session,
                args.root,
                args.format,
                args.select,
                args.ignore,
                args.strict,
                args.config,
            )
        case "watch":
            from postflightd.commands.watch import run_watch

            return run_watch(args.roots, args.config, args.log_format, args.log_level)
        case "status" if args.watch:
            from postflightd.live import run_status_watch

            return run_status_watch(
                args.roots, args.interval, args.config, args.format, args.select, args.ignore
            )
        case "status":
            from postflightd.status import run_status

            return run_status(
                args.roots, args.format, args.config, args.select, args.ignore, args.color
            )
        case "verify":
            from postflightd.verify import run_verify

            return run_verify(args.roots, args.since, args.repair, args.format, args.config)
        case "report":
            from postflightd.report_command import run_report

            return run_report(args.roots, args.since, args.format, args.output, args.config)
        case "schema":
            return cmd_schema()
        case "rules":
            return cmd_rules(args.code)
        case "init":
            from postflightd.scaffold import run_init

            return run_init(args.root, args.yes, args.config, sys.stdout)
        case "completion":
            from postflightd.completion import completion_script

            sys.stdout.write(completion_script(args.shell))
            return 0
        case _:
            _parser().print_help(sys.stderr)
            return 2


def _log_internal_error(exc: BaseException) -> str:
    """Write the traceback to a crash log; return where it went."""
    import tempfile
    import traceback
    from datetime import UTC, datetime

    try:
        from platformdirs import user_log_path

        log_dir = user_log_path("postflightd")
        log_dir.mkdir(parents=True, exist_ok=True)
    except Exception:  # noqa: BLE001 - the crash log must be written somewhere
        log_dir = Path(tempfile.gettempdir())
    path = log_dir / "crash.log"
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"--- {datetime.now(UTC).isoformat()} postflightd {__version__}\n")
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:
        return "(the crash log could not be written)"
    return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (SPEC 4)."""
    from postflightd.errors import ExitCode, PostflightError

    try:
        return _run(argv)
    except PostflightError as exc:
        from postflightd.inert import inert

        print(f"postflightd: {inert(str(exc))}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("postflightd: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`postflightd scan | head`): not an error of ours.
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes exit 70
        where = _log_internal_error(exc)
        print(
            f"postflightd: internal error ({type(exc).__name__}); details in {where}",
            file=sys.stderr,
        )
        return int(ExitCode.INTERNAL)
