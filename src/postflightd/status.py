"""``postflightd status``: the runs in flight under each root, read from the files themselves.

It needs no daemon (it reads the metadata files with the same ``check_file`` every command
uses), and says whether one is watching the root (the daemon's instance lock).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TextIO

from postflightd.config import Config
from postflightd.daemon_notes import daemon_note
from postflightd.durations import format_duration
from postflightd.findings import Policy
from postflightd.inert import inert, json_text
from postflightd.lifecycle import IN_PROGRESS, Sighting
from postflightd.loader import find_metadata_files
from postflightd.pipeline import FileReport, Project, check_file
from postflightd.store import lock_holder


@dataclass(frozen=True, slots=True)
class RunStatus:
    """One metadata file as ``status`` shows it."""

    file: str
    task: int | None
    status: str | None
    #: running | stuck | waiting (final, valid: postflight pending) | invalid | writing
    state: str
    valid: bool
    stuck: bool
    agent: str | None
    session: str | None
    operation: str | None
    stage: str | None
    phases_completed: int | None
    phases_total: int | None
    started_at: str | None
    elapsed_s: float | None
    timeout_s: float | None


@dataclass(slots=True)
class RootStatus:
    root: Path
    #: pid of the daemon watching this root; 0 when one holds the lock but wrote no pid.
    daemon_pid: int | None
    runs: list[RunStatus] = field(default_factory=list)
    note: str | None = None
    #: outcomes re-applied / found overwritten in the last 24 h (``verify.healing_counts``);
    #: None when the journal cannot be read.
    healing: dict[str, Any] | None = None
    #: the specs directory was refused (a link): exit 4, as for every command.
    refused: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "daemon": {"running": self.daemon_pid is not None, "pid": self.daemon_pid or None},
            "note": self.note,
            "runs": [asdict(r) for r in self.runs],
            "healing": self.healing,
        }


#: The state of a file that does not parse yet and changed within the settle window: an agent
#: is still writing it, as the daemon judges it (SPEC 4.2), not an invalid file.
WRITING = "writing"


def _being_written(report: FileReport, now: datetime, settle_s: float) -> bool:
    failure, identity = report.loaded.failure, report.loaded.identity
    if failure is None or failure.code != "PF102" or identity is None:
        return False
    return now.timestamp() - identity.mtime_ns / 1e9 < settle_s


def _state(status: str | None, valid: bool, stuck: bool) -> str:
    if status == IN_PROGRESS:
        return "stuck" if stuck else "running"
    return "waiting" if valid else "invalid"


def collect_status(
    roots: Iterable[Path], config: Config, policy: Policy, now: datetime
) -> list[RootStatus]:
    """Every metadata file under each root, with what its run is doing."""
    out: list[RootStatus] = []
    for root in roots:
        project = Project.open(root, config)
        entry = RootStatus(root, lock_holder(project.specs))
        entry.note = daemon_note(root, entry.daemon_pid)
        out.append(entry)
        if project.specs is None:
            entry.note = project.specs_problem or f"no {config.specs_dir}/ directory"
            entry.refused = project.specs_problem is not None
            continue
        for ref in find_metadata_files(project.specs):
            report = check_file(project, ref, config, policy, now)
            v = report.validation
            s = Sighting.from_doc(
                str(root),
                ref.task_dir,
                report.task,
                report.loaded.doc,
                operation=v.operation if v else None,
                started_at=v.started_at if v else None,
                timeout_s=v.timeout_s if v else None,
            )
            elapsed = (now - s.started_at).total_seconds() if s.started_at else None
            state = _state(s.status, report.valid, report.stuck)
            if _being_written(report, now, config.watch.settle_ms / 1000):
                state = WRITING
            entry.runs.append(
                RunStatus(
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
                )
            )
        # Tasks in numerical order (the directory listing puts 100_x before 14_x).
        entry.runs.sort(key=lambda r: (r.task is None, r.task or 0, r.file))
    return out


def _phases(run: RunStatus) -> str:
    if run.phases_completed is None and run.phases_total is None:
        return "-"
    done = "?" if run.phases_completed is None else str(run.phases_completed)
    total = "?" if run.phases_total is None else str(run.phases_total)
    return f"{done}/{total}"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    rows = [[inert(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


_MARK_STYLE: Final = {"STUCK": "error", "INVALID": "error", "WAITING": "warning"}


def report_status_text(statuses: Sequence[RootStatus], out: TextIO, color: bool = False) -> None:
    for entry in statuses:
        if entry.daemon_pid is None:
            daemon = "no daemon"
        else:
            daemon = f"daemon pid {entry.daemon_pid}" if entry.daemon_pid else "daemon running"
        out.write(f"{inert(str(entry.root))}  ({daemon})\n")
        healing = entry.healing or {}
        if healing.get("reapplied") or healing.get("overwritten"):
            out.write(
                f"  healed: {healing.get('reapplied', 0)} outcome(s) re-applied after writes "
                f"that ignored the lock, {healing.get('overwritten', 0)} edited since "
                "(last 24 h; `postflightd verify` lists them)\n"
            )
        if entry.note:
            out.write(f"  {inert(entry.note)}\n")
            continue
        if not entry.runs:
            out.write("  no runs in flight\n")
            continue
        rows = [["TASK", "STATUS", "AGENT", "STAGE", "PHASES", "ELAPSED / TIMEOUT", ""]]
        for run in entry.runs:
            rows.append(
                [
                    str(run.task) if run.task is not None else run.file,
                    run.status or "?",
                    run.agent or "-",
                    run.stage or "-",
                    _phases(run),
                    f"{format_duration(run.elapsed_s)} / {format_duration(run.timeout_s)}",
                    {"stuck": "STUCK", "invalid": "INVALID", "waiting": "WAITING"}.get(
                        run.state, ""
                    ),
                ]
            )
        for line in _table(rows):
            mark = line.rsplit(" ", 1)[-1]
            if color and mark in _MARK_STYLE:
                # Coloured after padding: escape codes would throw the column widths off.
                from postflightd.reporters import paint

                line = line[: -len(mark)] + paint(mark, _MARK_STYLE[mark], on=True)  # noqa: PLW2901
            out.write(f"  {line}\n")
    runs = [r for e in statuses for r in e.runs]
    stuck = sum(1 for r in runs if r.stuck)
    running = sum(1 for r in runs if r.state == "running")
    out.write(f"{running} running, {stuck} stuck, {len(runs) - running - stuck} other\n")


def report_status_json(statuses: Sequence[RootStatus], out: TextIO) -> None:
    out.write(json_text({"roots": [s.to_json() for s in statuses]}, indent=2) + "\n")


STATUS_REPORTERS: dict[str, Callable[[Sequence[RootStatus], TextIO], None]] = {
    "text": report_status_text,
    "json": report_status_json,
}


def add_healing(statuses: Sequence[RootStatus], config: Config, now: datetime) -> None:
    """What the daemon's healer did (issue 10), from the journal: it runs in another process."""
    from postflightd.journal import Journal, journal_path
    from postflightd.verify import healing_counts

    with Journal.open(journal_path(config.journal.path)) as journal:
        if not journal.enabled:
            return
        for entry in statuses:
            entry.healing = healing_counts(journal, entry.root, now)
