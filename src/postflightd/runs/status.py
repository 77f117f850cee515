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
    #: for a ``waiting`` file: why it is not applied yet (``waiting_reason``), and since when
    #: it has been final (its last write, ISO 8601): a leftover's age, not a run's duration.
    waiting: str | None = None
    waiting_since: str | None = None


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
    #: when the watching daemon started (its pid file's last write, ISO 8601).
    daemon_since: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "daemon": {
                "running": self.daemon_pid is not None,
                "pid": self.daemon_pid or None,
                "since": self.daemon_since,
            },
            "note": self.note,
            "runs": [asdict(r) for r in self.runs],
            "healing": self.healing,
        }


#: Why a final, valid file is not applied yet, first match first (``waiting_reason``).
SETTLING = "settling"
STATE_UNUSABLE = "state.json unusable"
ERRORS_UNUSABLE = "errors.json unusable"
LOCK_BUSY = "lock busy"
NO_DAEMON = "no daemon"
QUEUED = "queued"
NOT_APPLIED = "not applied"


@dataclass(frozen=True, slots=True)
class RootFacts:
    """What decides why a root's final files wait, read once per root."""

    root: str
    specs_dir: str
    daemon_pid: int | None
    settle_s: float
    #: why state.json cannot be written, or None
    state_problem: str | None = None
    #: why errors.json cannot be written (not a JSON array ...), or None
    errors_problem: str | None = None
    #: another writer holds the project lock now
    lock_busy: bool = False
    #: the daemon's periodic rescan: a file older than two of them was seen and not applied
    rescan_s: float = 30.0


def waiting_reason(facts: RootFacts, *, age_s: float, needs_errors: bool) -> tuple[str, str]:
    """(kind, sentence) for a final, valid file ``age_s`` seconds after its last write, that
    writes errors.json records when ``needs_errors``: what keeps it from being applied."""
    if age_s < facts.settle_s:
        return SETTLING, (
            f"still settling: written {age_s:.1f} s ago, applied once quiet for "
            f"{facts.settle_s:g} s ([watch] settle_ms)"
        )
    if facts.state_problem is not None:
        return STATE_UNUSABLE, f"state.json is unusable ({facts.state_problem}): fix it"
    if needs_errors and facts.errors_problem is not None:
        return ERRORS_UNUSABLE, (
            f"errors.json is unusable ({facts.errors_problem}): its records cannot be "
            "written, so the file is kept; fix or move errors.json away"
        )
    if facts.lock_busy:
        return LOCK_BUSY, (
            f"the project lock is busy: another writer holds it (find it with "
            f"`fuser -v {facts.specs_dir}/.state.lock`)"
        )
    if facts.daemon_pid is None:
        return NO_DAEMON, (
            f"no daemon watches this root: start one with `postflightd watch {facts.root}` "
            "(or let the stop hook or `postflightd scan --apply` apply it)"
        )
    pid = f" (pid {facts.daemon_pid})" if facts.daemon_pid else ""
    if age_s < 2 * facts.rescan_s:
        return QUEUED, f"queued: the daemon{pid} applies it at its next look"
    return NOT_APPLIED, (
        f"the daemon{pid} has looked at it and not applied it: its log says why "
        "(`journalctl --user -u postflightd`, or the terminal running `postflightd watch`)"
    )


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
