"""What validation is told about the project: the task a document belongs to
(``TaskContext``; what an artifact path is on disk is ``rules.probe``'s).

Data only. Reading the project fills it (``project.meta_file.task_context``); the rules read
it. Both sides import this module, so reading never imports validation logic and validation
never imports reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from postflightd.rules.findings import Finding


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What the project knows of the task a metadata file belongs to."""

    dir_name: str
    number: int | None = None
    slug: str | None = None
    #: state.json was read and has the expected shape (checks that need it run).
    state_known: bool = False
    #: the task's entry in state.json active_projects, when found.
    task: Mapping[str, Any] | None = None
    #: session named by the .postflight-pending marker, if any.
    marker_session: str | None = None
    marker_operation: str | None = None
    marker_findings: tuple[Finding, ...] = ()
    #: the specs directory, relative to the project root (where fixes put a task's files).
    specs_dir: str = "specs"
    #: when the metadata file was last written (its modification time), and when postflightd
    #: first saw it (None: now, as for ``scan``, ``process`` and the hook): a final file
    #: written longer than its operation's timeout before it was first seen is a leftover
    #: (PF607).
    written: datetime | None = None
    first_seen: datetime | None = None

    @property
    def is_meta(self) -> bool | None:
        """True for a meta task, None when the task's language is unknown."""
        if self.task is None:
            return None
        return self.task.get("language") == "meta"

    @property
    def expected_session(self) -> tuple[str, str] | None:
        """(session, where it came from): the marker's, else state.json's (what PF405 checks)."""
        if self.marker_session:
            return self.marker_session, ".postflight-pending"
        if self.task is not None:
            sid = self.task.get("session_id")
            if isinstance(sid, str) and sid:
                return sid, "state.json"
        return None
