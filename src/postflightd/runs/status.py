"""``postflightd status``: the runs in flight under each root, read from the files themselves.

It needs no daemon (it reads the metadata files with the same ``check_file`` every command
uses), and says whether one is watching the root (the daemon's instance lock).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from postflightd.config import Config
from postflightd.daemon.notes import daemon_note
from postflightd.errors import ExitCode
from postflightd.fs.locks import lock_holder
from postflightd.pipeline.check import check_file
from postflightd.pipeline.results import FileReport
from postflightd.project.metafiles import find_metadata_files
from postflightd.project.root import Project
from postflightd.rules.findings import Policy
from postflightd.runs.lifecycle import IN_PROGRESS, Sighting


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


def add_healing(statuses: Sequence[RootStatus], config: Config, now: datetime) -> None:
    """What the daemon's healer did (issue 10), from the journal: it runs in another process."""
    from postflightd.daemon.healer import healing_counts
    from postflightd.journal.database import Journal, journal_path

    with Journal.open(journal_path(config.journal.path)) as journal:
        if not journal.enabled:
            return
        for entry in statuses:
            entry.healing = healing_counts(journal, entry.root, now)


def status_exit_code(statuses: Sequence[RootStatus]) -> ExitCode:
    """4 when a specs directory was refused (as for every command), 1 when a run is stuck
    (as ``scan`` does), else 0."""
    if any(s.refused for s in statuses):
        return ExitCode.STATE_UNUSABLE
    if any(r.stuck for s in statuses for r in s.runs):
        return ExitCode.FINDINGS
    return ExitCode.OK
