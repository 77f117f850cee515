"""The run lifecycle: which operation a run performs, its timeout, and when it is stuck.

Pure: the clock is an argument. The daemon's table of runs is ``runs.table``: a scan needs
these rules, not the table (its classes cost a scan's start-up 2 ms).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final

#: Operation names are the keys of the ``[timeouts]`` table.
OPERATIONS: Final = ("research", "planning", "implementation", "simple")
DEFAULT_OPERATION: Final = "default"

# Words an agent system uses for each operation, in delegation_path[1], agent_type or the
# marker's "operation" (e.g. "research", "/plan", "implement-command", "neovim-research-agent").
_OPERATION_WORDS: Final = (
    ("research", "research"),
    ("plan", "planning"),
    ("implement", "implementation"),
    ("simple", "simple"),
)


def operation_from_words(text: str | None) -> str | None:
    """The operation a word like ``research`` or ``neovim-implementation-agent`` names."""
    if not text:
        return None
    lowered = text.lower()
    for word, operation in _OPERATION_WORDS:
        if word in lowered:
            return operation
    return None


def operation_of(
    delegation_path: object, agent_type: object, marker_operation: object = None
) -> str:
    """delegation_path[1], else words in agent_type, else the marker's operation."""
    if isinstance(delegation_path, list) and len(delegation_path) > 1:
        step = delegation_path[1]
        found = operation_from_words(step) if isinstance(step, str) else None
        if found:
            return found
    for text in (agent_type, marker_operation):
        found = operation_from_words(text) if isinstance(text, str) else None
        if found:
            return found
    return DEFAULT_OPERATION


def timeout_for(operation: str, timeouts: Mapping[str, float]) -> float:
    """Seconds a run of this operation may take before it counts as stuck."""
    return timeouts.get(operation, timeouts[DEFAULT_OPERATION])


def stuck_deadline(started_at: datetime, timeout_s: float) -> float:
    """The POSIX time after which a run that started at ``started_at`` is stuck."""
    return started_at.timestamp() + timeout_s


#: The status of a run still going (what the run table and ``status`` follow).
IN_PROGRESS: Final = "in_progress"
