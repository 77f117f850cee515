"""The metadata file's words kept as plain data (``models.terms``) agree with its models."""

from __future__ import annotations

from postflightd.models.metadata import (
    Artifact,
    CompletionData,
    Metadata,
    MetadataFile,
    PartialProgress,
    ReportedError,
)
from postflightd.models.terms import KNOWN_FIELDS, Status


def test_known_fields_are_the_fields_the_models_declare() -> None:
    """PF205 reads KNOWN_FIELDS without the models: a field added to a model and not there
    would be reported as unknown in every file that uses it."""
    declared = {
        "": frozenset(MetadataFile.model_fields),
        "metadata": frozenset(Metadata.model_fields),
        "artifacts[]": frozenset(Artifact.model_fields),
        "errors[]": frozenset(ReportedError.model_fields),
        "partial_progress": frozenset(PartialProgress.model_fields),
        "completion_data": frozenset(CompletionData.model_fields),
    }
    assert declared == KNOWN_FIELDS


def test_the_models_status_is_the_plain_status() -> None:
    assert MetadataFile.model_fields["status"].annotation is Status
