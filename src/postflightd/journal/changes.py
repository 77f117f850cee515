"""What one postflight did to its task (``TaskChange``): the journal records it with the
outcome, and its readers get it back in a ``journal.rows.RecordedChange``.

A module of its own so that both sides import it: the writer (a stop that applies a file)
without the readers' records, each of which is about 4.5 million instructions to make.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TaskChange:
    """What one postflight did to its task: the state.json entry before and after, exactly,
    and the TODO.md edits made for it (each ``{"marker", "links", "completed"}``)."""

    before: Any
    after: Any
    todo: Sequence[Mapping[str, Any]] = ()
