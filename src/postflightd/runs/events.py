"""What the daemon logs when a run changes: a pure function from a transition to a log event.

``lifecycle.RunTable`` says what changed (a run started, progressed, was replaced by another
session, got stuck, finished, ended); ``transition_event`` says what line that makes, so the
wording, level and fields are tested without a daemon; ``emit`` writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from postflightd.logs import get_logger
from postflightd.models.files import META_NAME
from postflightd.runs.table import Change, Transition

log = get_logger()

Level = Literal["info", "warning", "error"]


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One structured log line: its level, its event name and its fields, in order."""

    level: Level
    event: str
    fields: Mapping[str, Any]


def transition_event(t: Transition, specs_dir: str, wall: float) -> LogEvent:
    """The log line for a run's transition (started, progress, replaced, stuck, finished ...).

    ``specs_dir`` as configured (relative to the root); ``wall``: now, for a stuck run's age.
    """
    s = t.run.sighting
    ctx: dict[str, Any] = {
        "root": s.root,
        "task": s.task,
        "session": s.session,
        "file": f"{specs_dir}/{s.task_dir}/{META_NAME}",
        "status": s.status,
    }
    if t.change is Change.REPLACED and t.previous is not None:
        previous = t.previous.sighting.session
        return LogEvent(
            "warning",
            t.change.value,
            {
                **ctx,
                "code": "PF603",
                "replaced_session": previous,
                "message": (
                    f"session {s.session} replaced the unfinished in_progress run of session "
                    f"{previous}"
                ),
            },
        )
    if t.change is Change.STUCK:
        elapsed = wall - s.started_at.timestamp() if s.started_at is not None else None
        return LogEvent(
            "error",
            t.change.value,
            {
                **ctx,
                "code": "PF602",
                "operation": s.operation,
                "elapsed_s": round(elapsed, 1) if elapsed is not None else None,
                "timeout_s": s.timeout_s,
            },
        )
    return LogEvent(
        "info",
        t.change.value,
        {
            **ctx,
            "agent": s.agent,
            "stage": s.stage,
            "phases_completed": s.phases_completed,
            "phases_total": s.phases_total,
        },
    )


def emit(event: LogEvent) -> None:
    """Write ``event`` to the log."""
    write = {"info": log.info, "warning": log.warning, "error": log.error}[event.level]
    write(event.event, **event.fields)
