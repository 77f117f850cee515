"""``postflightd status [--watch]``: the runs in flight under each root, read from the files
themselves.

It needs no daemon (it reads the metadata files with the same ``check_file`` every command
uses), and says whether one is watching the root (the daemon's instance lock) and what its
healer did (the journal). What it shows is ``runs.status``'s; ``reporters.status`` and
``reporters.live`` draw it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from postflightd.commands.arguments import (
    COLOR_CHOICES,
    add_code_filters,
    add_format,
    parse_interval,
    policy,
)
from postflightd.config import Config, load_config, load_configs
from postflightd.daemon.notes import daemon_note, stalled_roots
from postflightd.errors import ExitCode, UsageError
from postflightd.fs.atomic import read_snapshot
from postflightd.fs.directory import Directory, StoreError
from postflightd.fs.locks import PID_FILE_NAME, lock_holder, project_lock_busy
from postflightd.models.files import parse_json
from postflightd.pipeline.check import check_file
from postflightd.pipeline.results import FileReport
from postflightd.postflight.transform import ERROR_STATUSES
from postflightd.project.metafiles import find_metadata_files
from postflightd.project.root import Project, find_project, require_project, resolve_root
from postflightd.reporters.live import HIDE_CURSOR, SHOW_CURSOR, LiveView, draw
from postflightd.reporters.status import REPORTERS
from postflightd.reporters.style import Options, use_color
from postflightd.rules.findings import STATE_UNUSABLE, Finding, Policy, Severity
from postflightd.runs.lifecycle import IN_PROGRESS
from postflightd.runs.status import (
    WRITING,
    RootFacts,
    RootStatus,
    RunStatus,
    status_exit_code,
    waiting_reason,
)
from postflightd.runs.table import Sighting

#: A run in progress past its operation's timeout: the run's state, not a fault of its file.
STUCK_CODE = "PF602"


def _being_written(report: FileReport, now: datetime, settle_s: float) -> bool:
    failure, identity = report.loaded.failure, report.loaded.identity
    if failure is None or failure.code != "PF102" or identity is None:
        return False
    return now.timestamp() - identity.mtime_ns / 1e9 < settle_s


def _state(status: str | None, report: FileReport) -> str:
    """stuck before invalid: a stuck run needs a person whatever its file says; an in_progress
    file that breaks the format is flagged, not shown as a normal running row. A final file
    whose only error is the project's state.json waits for it, as postflight judges it."""
    if status == IN_PROGRESS and report.stuck:
        return "stuck"
    if not report.valid and not _only_state_unusable(report):
        return "invalid"
    return "running" if status == IN_PROGRESS else "waiting"


def _only_state_unusable(report: FileReport) -> bool:
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    return bool(errors) and all(f.code == STATE_UNUSABLE for f in errors)


def _format_findings(state: str, report: FileReport, policy: Policy) -> list[Finding]:
    """What makes a file break the format: an invalid file's findings; a stuck run's only when
    those beside PF602 fail it (being stuck is the run's, shown in its row, not the file's)."""
    if state == "invalid":
        return report.findings
    if state != "stuck":
        return []
    beside = [f for f in report.findings if f.code != STUCK_CODE]
    return beside if beside and policy.fails(beside) else []


def _errors_problem(specs: Directory, name: str) -> str | None:
    """Why errors.json cannot take records (postflight never overwrites such a file)."""
    try:
        snapshot = read_snapshot(specs, name)
    except StoreError as exc:
        return str(exc)
    if snapshot.raw is None:
        return None
    doc, problem = parse_json(snapshot.raw, name)
    if problem is not None:
        return problem
    return None if isinstance(doc, list) else "not a JSON array"


def _since(st_mtime_ns: int) -> str:
    return datetime.fromtimestamp(st_mtime_ns / 1e9, UTC).isoformat()


class Facts:
    """A root's ``RootFacts``, read at the first waiting file only (a lock probe, errors.json)."""

    def __init__(self, project: Project, config: Config, daemon_pid: int | None) -> None:
        self._project, self._config, self._pid = project, config, daemon_pid
        self._facts: RootFacts | None = None
        self._errors_read = False

    def get(self, needs_errors: bool) -> RootFacts:
        project, config = self._project, self._config
        if self._facts is None:
            self._facts = RootFacts(
                root=str(project.root),
                specs_dir=str(project.specs_dir),
                daemon_pid=self._pid,
                settle_s=config.watch.settle_ms / 1000,
                state_problem=project.state.problem if project.state.exists else None,
                lock_busy=project_lock_busy(project.specs),
                rescan_s=float(config.watch.rescan_interval_s),
            )
        if needs_errors and not self._errors_read and project.specs is not None:
            self._errors_read = True
            problem = _errors_problem(project.specs, config.postflight.errors_file)
            self._facts = dataclasses.replace(self._facts, errors_problem=problem)
        return self._facts


def collect_status(
    roots: Iterable[Path],
    configs: Mapping[Path, tuple[Config, Policy]],
    now: datetime,
    findings: dict[tuple[str, str], list[Finding]] | None = None,
) -> list[RootStatus]:
    """Every metadata file under each root, with what its run is doing, each root judged by
    its own configuration and policy (``configs``); ``findings``, when given, gets the
    findings of each file that breaks the format by (root, file): each invalid file, and each
    stuck run whose file would be invalid without PF602 (``_format_findings``)."""
    out: list[RootStatus] = []
    for root in roots:
        config, policy = configs[root]
        with Project.open(root, config) as project:
            entry = RootStatus(root, lock_holder(project.specs))
            entry.note = daemon_note(root, entry.daemon_pid)
            out.append(entry)
            if project.specs is None:
                entry.note = project.specs_problem or f"no {config.specs_dir}/ directory"
                entry.refused = project.specs_problem is not None
                continue
            if entry.daemon_pid is not None:
                pid_file = project.specs.lstat(PID_FILE_NAME)
                entry.daemon_since = _since(pid_file.st_mtime_ns) if pid_file else None
            facts = Facts(project, config, entry.daemon_pid)
            for ref in find_metadata_files(project.specs):
                report = check_file(project, ref, config, policy, now)
                run = file_status(report, ref.task_dir, config, now, facts)
                shown = _format_findings(run.state, report, policy) if findings is not None else []
                if findings is not None and shown:
                    findings[(str(root), report.rel_path)] = shown
                entry.runs.append(run)
            # Tasks in numerical order (the directory listing puts 100_x before 14_x).
            entry.runs.sort(key=lambda r: (r.task is None, r.task or 0, r.file))
    return out


def file_status(
    report: FileReport, task_dir: str, config: Config, now: datetime, facts: Facts
) -> RunStatus:
    """One checked metadata file (``check_file``'s report) as ``status`` shows it: what its
    run is doing, and for a final file, why it waits and since when."""
    v = report.validation
    s = Sighting.from_doc(
        str(report.root),
        task_dir,
        report.task,
        report.loaded.doc,
        operation=v.operation if v else None,
        started_at=v.started_at if v else None,
        timeout_s=v.timeout_s if v else None,
    )
    elapsed = (now - s.started_at).total_seconds() if s.started_at else None
    state = _state(s.status, report)
    if _being_written(report, now, config.watch.settle_ms / 1000):
        state = WRITING
    waiting = since = None
    identity = report.loaded.identity
    if state == "waiting" and identity is not None:
        age = now.timestamp() - identity.mtime_ns / 1e9
        needs_errors = s.status in ERROR_STATUSES
        _, waiting = waiting_reason(facts.get(needs_errors), age_s=age, needs_errors=needs_errors)
        since = _since(identity.mtime_ns)
    return RunStatus(
        file=report.rel_path,
        task=report.task,
        status=s.status,
        state=state,
        valid=report.valid,
        stuck=report.stuck,
        agent=s.agent,
        session=s.session,
        operation=s.operation,
        stage=s.stage,
        phases_completed=s.phases_completed,
        phases_total=s.phases_total,
        started_at=s.started_at.isoformat() if s.started_at else None,
        elapsed_s=round(elapsed, 1) if elapsed is not None else None,
        timeout_s=s.timeout_s,
        waiting=waiting,
        waiting_since=since,
    )


def add_healing(statuses: Sequence[RootStatus], config: Config, now: datetime) -> None:
    """What the daemon's healer did, from the journal: the healer runs in another process."""
    from postflightd.daemon.healer import healing_counts
    from postflightd.journal.database import Journal, journal_path

    with Journal.open(journal_path(config.journal.path)) as journal:
        if not journal.enabled:
            return
        for entry in statuses:
            entry.healing = healing_counts(journal, entry.root, now)


def status_target(
    roots: Sequence[str], config_path: str | None, select: Sequence[str], ignore: Sequence[str]
) -> tuple[list[Path], Config, dict[Path, tuple[Config, Policy]]]:
    """The roots ``status`` looks at (the arguments, else the user's ``[watch] roots``, else the
    project the current directory is in), the user's configuration (the journal), and each
    root's own configuration with its code filter."""

    def load(paths: list[Path]) -> Config:
        return load_config(config_path, paths)

    user = load_config(config_path)
    if roots:
        resolved = [require_project(r, load) for r in roots]
    elif user.watch.roots:
        resolved = [resolve_root(r) for r in user.watch.roots]
    else:
        resolved = [find_project(load)]
    configs = load_configs(config_path, resolved)
    return resolved, user, {r: (c, policy(c, select, ignore)) for r, c in configs.items()}


def _stalled(roots: Sequence[str]) -> dict[str, RootStatus]:
    """The named roots a live daemon reports stalled, answered from its note alone: their
    filesystem does not answer, and reading them (even their lock file) would hang ``status``
    as it hung the daemon's worker."""
    stalled = stalled_roots() if roots else {}
    out: dict[str, RootStatus] = {}
    for arg in roots:
        key = str(Path(arg).expanduser().absolute())  # no lookup: it could hang
        if key in stalled:
            pid, note = stalled[key]
            out[arg] = RootStatus(Path(key), pid, note=f"{note}: not read (its filesystem hangs)")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``status``'s options."""
    parser.add_argument(
        "roots", nargs="*", metavar="ROOT", help="default: [watch] roots, else the project here"
    )
    add_format(parser, REPORTERS)
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    parser.add_argument("--color", choices=COLOR_CHOICES, default="auto", help="default: auto")
    add_code_filters(parser)
    parser.add_argument(
        "--watch", action="store_true", help="live view, redrawn in place; Ctrl-C to quit"
    )
    parser.add_argument(
        "--interval", metavar="SECONDS", help="with --watch: e.g. 1s (default), 500ms"
    )


def without_effect(args: argparse.Namespace) -> str | None:
    """``--interval`` without ``--watch``: said, rather than silently ignored."""
    if args.interval is not None and not args.watch:
        return "--interval sets how often --watch redraws: give --watch, or drop --interval"
    return None


def run(args: argparse.Namespace) -> int:
    if args.watch:
        return run_status_watch(
            roots=args.roots,
            interval_text=args.interval or "1s",
            config_path=args.config,
            fmt=args.format,
            select=args.select,
            ignore=args.ignore,
        )
    return run_status(
        roots=args.roots,
        fmt=args.format,
        config_path=args.config,
        select=args.select,
        ignore=args.ignore,
        color=args.color,
    )


def run_status(
    *,
    roots: Sequence[str],
    fmt: str,
    config_path: str | None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    color: str = "auto",
) -> int:
    """Exit 1 when a run is stuck (as ``scan`` does), 4 when a specs directory is refused."""
    hung = _stalled(roots)
    now = datetime.now(UTC)
    rest = [r for r in roots if r not in hung]
    if hung and not rest:
        user, statuses = load_config(config_path), list(hung.values())
    else:
        resolved, user, configs = status_target(rest, config_path, select, ignore)
        collected = iter(collect_status(resolved, configs, now))
        # In the order given: a stalled root's answer where it was named.
        statuses = [hung[r] if r in hung else next(collected) for r in roots] + list(collected)
    add_healing(statuses, user, now)
    REPORTERS[fmt](statuses, sys.stdout, Options(color=use_color(color, sys.stdout, os.environ)))
    return int(status_exit_code(statuses))


def run_status_watch(
    *,
    roots: Sequence[str],
    interval_text: str,
    config_path: str | None,
    fmt: str = "text",
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
) -> int:
    """``status --watch``: refresh every ``--interval`` until Ctrl-C (exit 0)."""
    if fmt != "text":
        raise UsageError("--watch shows the text table; for JSON, run `status --format json`")
    interval = parse_interval(interval_text)
    resolved, _, configs = status_target(roots, config_path, select, ignore)
    out = sys.stdout
    ansi = out.isatty()
    view = LiveView(hold_s=max(2 * interval, 3.0))
    try:
        if ansi:
            out.write(HIDE_CURSOR)
        while True:
            now = datetime.now(UTC)
            statuses = collect_status(resolved, configs, now)
            clock = now.astimezone().strftime("%H:%M:%S")
            changed = view.update(statuses, time.monotonic(), clock)
            header = f"postflightd status --watch  every {interval:g}s  {clock}  (Ctrl-C quits)"
            if ansi:
                width = shutil.get_terminal_size((100, 24)).columns
                draw(out, view.lines(statuses, header, width, ansi=True), view.frames == 1)
            elif changed or view.frames == 1:
                out.write("\n".join(view.lines(statuses, header, 10_000, ansi=False)) + "\n\n")
                out.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        if ansi:
            out.write(SHOW_CURSOR)
            out.flush()
    return int(ExitCode.OK)  # leaving a live view is not a failure
