"""The words of the metadata file that the rules, the reports and the postflight use without
its models: the status values, the artifact types, the field names each kind of object
knows, the delegation limit.

Plain data, so that a command that reads no metadata file (a scan of a project with none, a
stop hook with nothing to do) does not import pydantic: ``models.metadata`` builds the models
from these. ``KNOWN_FIELDS`` is not written here: it is generated from the models
(``models.metadata_fields``), so a field added to a model is known with no other edit.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any, Final

from postflightd.models.metadata_fields import KNOWN_FIELDS

__all__ = ["KNOWN_FIELDS"]  # re-exported: the rules read the known fields with the other words


class Dialect(StrEnum):
    """The two forms of a console return ``check-return`` reads (``models.console_return``)."""

    SUBAGENT_RETURN = "subagent-return"
    AGENT_OUTPUT = "agent-output"


class Status(StrEnum):
    IN_PROGRESS = "in_progress"
    RESEARCHED = "researched"
    PLANNED = "planned"
    IMPLEMENTED = "implemented"
    PARTIAL = "partial"
    FAILED = "failed"
    BLOCKED = "blocked"

    @property
    def is_success(self) -> bool:
        return self in SUCCESS_STATUSES

    @property
    def is_final(self) -> bool:
        return self is not Status.IN_PROGRESS


SUCCESS_STATUSES: Final = frozenset({Status.RESEARCHED, Status.PLANNED, Status.IMPLEMENTED})
TROUBLE_STATUSES: Final = frozenset({Status.PARTIAL, Status.FAILED, Status.BLOCKED})

ARTIFACT_TYPES: Final = ("report", "plan", "summary", "implementation")
MAX_DELEGATION_DEPTH: Final = 3

#: The folder an artifact given as a plain path string lies in -> its type (PF208).
TYPE_BY_FOLDER: Final = {"reports": "report", "plans": "plan", "summaries": "summary"}


def type_from_folder(path: str) -> str | None:
    """The type of a plain-string artifact: ``specs/14_x/reports/r.md`` -> ``report``."""
    return TYPE_BY_FOLDER.get(PurePosixPath(path.replace("\\", "/")).parent.name)


def artifact_from_path(value: Any) -> Any:
    """A plain path string read as ``{"path": ..., "type": <from its folder>}`` (PF208)."""
    if not isinstance(value, str):
        return value
    kind = type_from_folder(value)
    return {"path": value} if kind is None else {"path": value, "type": kind}
