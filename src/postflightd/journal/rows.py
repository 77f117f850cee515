"""The journal's rows as its readers get them: an observation, a recorded change, and what a
pruning removed.

Apart from ``journal.database``, which imports them where it makes them: a stop that applies
a file writes the journal and reads none of these, and each record's class made at start-up
is about 4.5 million instructions of that stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from postflightd.journal.changes import TaskChange


@dataclass(slots=True)
class PruneResult:
    """What one ``Journal.prune`` removed."""

    rows: int = 0
    contents: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    """One journal row."""

    id: int
    ts: str
    kind: str
    root: str
    file: str
    task: int | None
    session: str | None
    status: str | None
    findings: list[dict[str, str]] | None
    content: str | None
    #: the file's ``metadata.agent_type`` (journal version 3), on rows without content too
    agent: str | None = None
    #: the file was a leftover (PF607, journal version 5): its run has no known duration
    leftover: bool = False
    #: a leftover's outcome time, as its task entry got it (when its agent wrote the file)
    outcome_ts: str | None = None


@dataclass(frozen=True, slots=True)
class RecordedChange:
    """A ``postflighted`` row that recorded its ``TaskChange`` (schema version 2)."""

    id: int
    ts: str
    root: str
    file: str
    task: int
    session: str | None
    status: str | None
    change: TaskChange
