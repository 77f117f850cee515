"""The fields of the metadata file's objects as plain data, without pydantic: for each kind of
object, each field's value kind and whether a clean document has it (``SHAPE``, read by
``rules.clean``), and the names alone (``KNOWN_FIELDS``, read by the unknown-field rule
through ``models.terms``).

Generated from the models of ``models.metadata`` (``metadata.field_shape``), so that a field
added to a model reaches these with no other edit: do not edit ``SHAPE``.
``tests/models/test_metadata_core.py`` fails when it differs from what the models give and
rewrites it with ``POSTFLIGHTD_UPDATE_CORE_SCHEMA=1``, with ``models.metadata_core``.

A module of its own, not beside the stored core schema: that one takes about 2 ms to load,
which a scan of clean files and the stop hook never pay; this one is a few small tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

#: Generated from ``models.metadata`` (see the module's text).
SHAPE: Final[Mapping[str, Mapping[str, tuple[str, bool]]]] = {
    "": {
        "status": ("status", True),
        "artifacts": ("list:artifacts[]", True),
        "metadata": ("obj:metadata", True),
        "next_steps": ("text", False),
        "started_at": ("text", False),
        "partial_progress": ("obj:partial_progress", False),
        "completion_data": ("obj:completion_data", False),
        "errors": ("list:errors[]", False),
    },
    "artifacts[]": {"path": ("text", True), "type": ("text", True), "summary": ("text", True)},
    "metadata": {
        "session_id": ("text", True),
        "agent_type": ("text", True),
        "delegation_depth": ("int", True),
        "delegation_path": ("texts", True),
        "duration_seconds": ("number", False),
        "findings_count": ("int", False),
        "phases_completed": ("int", False),
        "phases_total": ("int", False),
    },
    "partial_progress": {
        "stage": ("text", True),
        "details": ("text", True),
        "phases_completed": ("int", False),
        "phases_total": ("int", False),
    },
    "completion_data": {
        "completion_summary": ("text", True),
        "roadmap_items": ("texts", False),
        "claudemd_suggestions": ("text", False),
    },
    "errors[]": {
        "message": ("text", True),
        "type": ("text", True),
        "recoverable": ("bool", True),
        "recommendation": ("text", True),
    },
}


#: Known field names per kind, for unknown-field (PF205) reporting.
KNOWN_FIELDS: Final[dict[str, frozenset[str]]] = {
    kind: frozenset(fields) for kind, fields in SHAPE.items()
}
