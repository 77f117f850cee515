"""The metadata-file models and the JSON Schema generated from them (`postflightd schema`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from helpers.documents import researched_doc
from helpers.needs import require_module
from helpers.paths import FIXTURES
from postflightd.cli import main
from postflightd.models.metadata import MetadataFile, json_schema
from postflightd.models.terms import SUCCESS_STATUSES, Status

METADATA_EXAMPLES = FIXTURES / "metadata_examples"


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` (and a nullable ``anyOf``) to the object schema it names."""
    if "anyOf" in node:
        node = next(n for n in node["anyOf"] if n.get("type") != "null")
    ref = node.get("$ref")
    if ref is None:
        return node
    name = ref.removeprefix("#/$defs/")
    resolved: dict[str, Any] = schema["$defs"][name]
    return resolved


def test_schema_declares_draft_2020_12() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].startswith("https://")
    assert schema["type"] == "object"


def test_top_level_required_fields() -> None:
    assert set(json_schema()["required"]) >= {"status", "artifacts", "metadata"}


def test_metadata_requires_the_schema_fields_postflight_can_spare() -> None:
    """agent_type and delegation_* are optional in the model but required in the schema."""
    schema = json_schema()
    metadata = _resolve(schema, schema["properties"]["metadata"])
    assert set(metadata["required"]) >= {
        "session_id",
        "agent_type",
        "delegation_depth",
        "delegation_path",
    }


@pytest.mark.parametrize(
    ("field", "required"),
    [
        ("artifacts", {"type", "path", "summary"}),
        ("errors", {"type", "message", "recoverable", "recommendation"}),
    ],
)
def test_list_items_require_their_fields(field: str, required: set[str]) -> None:
    schema = json_schema()
    prop = schema["properties"][field]
    if "anyOf" in prop:
        prop = next(n for n in prop["anyOf"] if n.get("type") == "array")
    items = _resolve(schema, prop["items"])
    assert set(items["required"]) >= required


def test_nested_objects_require_their_fields() -> None:
    schema = json_schema()
    progress = _resolve(schema, schema["properties"]["partial_progress"])
    completion = _resolve(schema, schema["properties"]["completion_data"])
    assert set(progress["required"]) >= {"stage", "details"}
    assert "completion_summary" in completion["required"]


def test_status_enumerates_the_seven_statuses_and_not_completed() -> None:
    schema = json_schema()
    status = _resolve(schema, schema["properties"]["status"])
    assert set(status["enum"]) == {s.value for s in Status}
    assert "completed" not in status["enum"]


def test_schema_allows_unknown_keys_everywhere() -> None:
    """Newer agent systems add fields: the schema never sets additionalProperties false."""
    text = json.dumps(json_schema())
    assert '"additionalProperties": false' not in text


def test_schema_command_prints_the_same_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == json_schema()


def test_model_keeps_unknown_keys() -> None:
    doc = researched_doc()
    doc["reviewer"] = {"name": "x"}
    doc["metadata"]["phase_count"] = 4
    doc["artifacts"][0]["lines"] = 12
    model = MetadataFile.model_validate(doc)
    assert model.model_extra == {"reviewer": {"name": "x"}}
    assert model.metadata.model_extra == {"phase_count": 4}
    assert model.artifacts[0].model_extra == {"lines": 12}
    dumped = model.model_dump(exclude_none=True)
    assert dumped["reviewer"] == {"name": "x"}
    assert dumped["metadata"]["phase_count"] == 4


def test_model_is_strict_about_types() -> None:
    doc = researched_doc()
    doc["metadata"]["delegation_depth"] = "1"
    with pytest.raises(ValidationError):
        MetadataFile.model_validate(doc)


def test_status_helpers() -> None:
    assert {s for s in Status if s.is_success} == SUCCESS_STATUSES
    assert not Status.IN_PROGRESS.is_final
    assert all(s.is_final for s in Status if s is not Status.IN_PROGRESS)


def test_the_metadata_examples_validate_against_the_generated_schema() -> None:
    jsonschema = require_module("jsonschema", "the independent validator (a dev extra)")

    validator = jsonschema.Draft202012Validator(json_schema())
    examples = sorted(METADATA_EXAMPLES.glob("*.json"))
    assert examples
    for path in examples:
        errors = list(validator.iter_errors(json.loads(path.read_text(encoding="utf-8"))))
        assert errors == [], path.name


def test_plain_string_artifacts_are_read_with_their_folder_type() -> None:
    """`"artifacts": ["specs/..."]` parses (PF208 says so): type from the folder, else none."""
    doc = researched_doc()
    doc["artifacts"] = [
        "specs/14_x/reports/r.md",
        "specs/14_x/plans/p.md",
        "specs/14_x/summaries/s.md",
        "src/main.py",
        {"type": "plan", "path": "specs/14_x/plans/q.md", "summary": "Q"},
    ]
    model = MetadataFile.model_validate(doc)
    assert [(a.path, a.type, a.summary) for a in model.artifacts] == [
        ("specs/14_x/reports/r.md", "report", None),
        ("specs/14_x/plans/p.md", "plan", None),
        ("specs/14_x/summaries/s.md", "summary", None),
        ("src/main.py", None, None),
        ("specs/14_x/plans/q.md", "plan", "Q"),
    ]
    for bad in (3, None, ["x"], True):
        doc["artifacts"] = [bad]
        with pytest.raises(ValidationError):
            MetadataFile.model_validate(doc)


def test_schema_accepts_plain_string_artifacts_and_nothing_else() -> None:
    """The schema accepts what the model accepts: objects or path strings, not numbers."""
    jsonschema = require_module("jsonschema", "the independent validator (a dev extra)")

    validator = jsonschema.Draft202012Validator(json_schema())
    doc = researched_doc()
    doc["artifacts"] = ["specs/14_x/reports/r.md", doc["artifacts"][0]]
    assert list(validator.iter_errors(doc)) == []
    doc["artifacts"] = [3]
    assert list(validator.iter_errors(doc)) != []
    doc["artifacts"] = [{"type": "report", "summary": "no path"}]
    assert list(validator.iter_errors(doc)) != []
