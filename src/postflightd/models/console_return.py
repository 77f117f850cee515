"""The two console return dialects of ``check-return`` as pydantic models.

The *subagent return* (``status`` completed|partial|failed|blocked, ``summary``,
``artifacts``, ``metadata`` with session and delegation, ``errors``, ``next_steps``) and the
*agent output* (``meta.agent_name``/``status``/
``execution_time_ms``, artifacts with ``key_points``, a ``next_steps`` list, an ``error``
object). Strict about types, unknown keys kept, like ``models.py`` for the metadata file.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict

from postflightd.models.terms import Dialect

SUBAGENT_STATUSES: Final = ("completed", "partial", "failed", "blocked")
OUTPUT_STATUSES: Final = ("complete", "partial", "error")
#: plan|report|summary|implementation|documentation, and research, which delegation-aware
#: orchestrators added.
SUBAGENT_ARTIFACT_TYPES: Final = (
    "plan",
    "report",
    "research",
    "summary",
    "implementation",
    "documentation",
)
OUTPUT_ARTIFACT_TYPES: Final = ("document", "code", "data")


# --- the two dialects as models (strict types, unknown keys kept) ---------------------------


class _Open(BaseModel):
    # strict: a JSON string is never coerced to a number or a bool.
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


class ReturnArtifact(_Open):
    path: str
    type: str | None = None
    summary: str | None = None


class ReturnMetadata(_Open):
    # The required-fields step requires all four; the contract lists the optional ones below.
    session_id: str
    agent_type: str
    delegation_depth: int
    delegation_path: list[str]
    duration_seconds: float | None = None
    phase_count: int | None = None
    estimated_hours: float | None = None
    findings_count: int | None = None


class ReturnError(_Open):
    message: str
    type: str | None = None
    code: str | None = None
    recoverable: bool | None = None
    recommendation: str | None = None


class SubagentReturn(_Open):
    """The subagent-return contract: what a subagent returns to the orchestrator."""

    status: str
    summary: str
    artifacts: list[ReturnArtifact]
    metadata: ReturnMetadata
    errors: list[ReturnError] | None = None
    next_steps: str | None = None


class OutputMeta(_Open):
    agent_name: str
    status: str
    execution_time_ms: float | None = None


class OutputArtifact(_Open):
    path: str
    type: str | None = None
    summary: str | None = None
    key_points: list[str] | None = None


class OutputError(_Open):
    message: str
    code: str | None = None
    details: str | None = None


class AgentOutput(_Open):
    """The agent-output contract."""

    meta: OutputMeta
    artifacts: list[OutputArtifact]
    next_steps: list[str]
    error: OutputError | None = None


#: Known field names per kind, for unknown-field (PF205) reporting.
KNOWN_FIELDS: Final[dict[Dialect, dict[str, frozenset[str]]]] = {
    Dialect.SUBAGENT_RETURN: {
        "": frozenset(SubagentReturn.model_fields),
        "metadata": frozenset(ReturnMetadata.model_fields),
        "artifacts[]": frozenset(ReturnArtifact.model_fields),
        "errors[]": frozenset(ReturnError.model_fields),
    },
    Dialect.AGENT_OUTPUT: {
        "": frozenset(AgentOutput.model_fields),
        "meta": frozenset(OutputMeta.model_fields),
        "artifacts[]": frozenset(OutputArtifact.model_fields),
        "error": frozenset(OutputError.model_fields),
    },
}
