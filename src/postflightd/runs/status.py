"""What ``postflightd status`` shows: each root's runs in flight, and its exit code.

Data only: ``commands.status`` fills these from the files themselves (it needs no daemon);
``reporters.status`` and ``reporters.live`` draw them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from postflightd.errors import ExitCode


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
    #: outcomes re-applied / found overwritten in the last 24 h (``daemon.healer.healing_counts``);
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
#: is still writing it, as the daemon judges it, not an invalid file.
WRITING = "writing"


def status_exit_code(statuses: Sequence[RootStatus]) -> ExitCode:
    """4 when a specs directory was refused (as for every command), 1 when a run is stuck
    (as ``scan`` does), else 0."""
    if any(s.refused for s in statuses):
        return ExitCode.STATE_UNUSABLE
    if any(r.stuck for s in statuses for r in s.runs):
        return ExitCode.FINDINGS
    return ExitCode.OK
