"""The metadata file (``.return-meta.json``) as pydantic models, and its JSON Schema.

The models are strict about types (``"1"`` is not an integer) and keep unknown keys. Fields
that the schema requires but postflight does not need are optional here and marked required
in the generated JSON Schema: a missing one is a PF207 warning, not a parse failure.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from postflightd import project_url
from postflightd.models.terms import ARTIFACT_TYPES, Status, artifact_from_path


def _schema_requires(*names: str) -> Any:
    """json_schema_extra that adds schema-required fields the model keeps optional."""

    def extra(schema: dict[str, Any]) -> None:
        required = list(schema.get("required", []))
        schema["required"] = required + [n for n in names if n not in required]

    return extra


class _Open(BaseModel):
    # strict: a JSON string is never coerced to a number or a bool.
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


class Artifact(_Open):
    model_config = ConfigDict(json_schema_extra=_schema_requires("type", "summary"))

    path: str = Field(description="Path relative to the project root.")
    type: str | None = Field(
        default=None,
        description="One of report, plan, summary, implementation (research is read as report).",
        json_schema_extra={"examples": list(ARTIFACT_TYPES)},
    )
    summary: str | None = Field(default=None, description="Brief one-sentence description.")


class Metadata(_Open):
    model_config = ConfigDict(
        json_schema_extra=_schema_requires("agent_type", "delegation_depth", "delegation_path")
    )

    session_id: str = Field(description="sess_{unix seconds}_{6 lower-case letters or digits}")
    agent_type: str | None = None
    delegation_depth: int | None = None
    delegation_path: list[str] | None = None
    duration_seconds: float | None = None
    findings_count: int | None = None
    phases_completed: int | None = None
    phases_total: int | None = None


class PartialProgress(_Open):
    stage: str
    details: str
    phases_completed: int | None = None
    phases_total: int | None = None


class CompletionData(_Open):
    completion_summary: str
    roadmap_items: list[str] | None = None
    claudemd_suggestions: str | None = None


class ReportedError(_Open):
    model_config = ConfigDict(
        json_schema_extra=_schema_requires("type", "recoverable", "recommendation")
    )

    message: str
    type: str | None = None
    recoverable: bool | None = None
    recommendation: str | None = None


def _artifacts_schema(schema: dict[str, Any]) -> None:
    """The schema accepts what the model accepts: an artifact object or a plain path string."""
    schema["required"] = list(schema.get("required", []))
    artifacts = schema.get("properties", {}).get("artifacts")
    if isinstance(artifacts, dict) and "items" in artifacts:
        artifacts["items"] = {
            "anyOf": [
                artifacts["items"],
                {
                    "type": "string",
                    "description": (
                        "A plain path, read as {path} with its type from its folder "
                        "(reports/, plans/, summaries/); reported as PF208. Prefer the object."
                    ),
                },
            ]
        }


class MetadataFile(_Open):
    """``specs/{N}_{SLUG}/.return-meta.json``."""

    model_config = ConfigDict(
        title="postflightd .return-meta.json",
        json_schema_extra=_artifacts_schema,
    )

    # Lax on this one field only: strict mode would want a Status instance, not the JSON string.
    status: Status = Field(strict=False)
    artifacts: list[Annotated[Artifact, BeforeValidator(artifact_from_path)]]
    metadata: Metadata
    next_steps: str | None = None
    started_at: str | None = Field(default=None, description="ISO 8601; required for in_progress")
    partial_progress: PartialProgress | None = None
    completion_data: CompletionData | None = None
    errors: list[ReportedError] | None = None


#: The schema's ``$id``, under the project's URL (``postflightd.project_url()``).
SCHEMA_PATH: Final = "/schema/return-meta.json"


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the metadata file, generated from the models."""
    schema = MetadataFile.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": project_url() + SCHEMA_PATH,
        **schema,
        "description": (
            "Metadata an AI coding agent writes to specs/{N}_{SLUG}/.return-meta.json: "
            "in_progress when it starts, the outcome when it ends. Unknown keys are allowed."
        ),
    }


#: What ``storable_core_schema`` drops: JSON Schema hooks, serializers and the refs pydantic
#: names by memory address; none of them changes what validation accepts or says.
_NOT_STORED: Final = frozenset({"metadata", "serialization", "ref"})


def storable_core_schema(model: type[BaseModel] = MetadataFile) -> dict[str, Any]:
    """``model``'s (by default ``MetadataFile``'s) pydantic-core schema as plain data
    (``models.metadata_core``): the model classes, the status enum and its members, and the
    artifact function as ``{"$class": name}``, ``{"$enum": name}``, ``{"$member": value}``,
    ``{"$function": name}``."""

    def plain(value: Any, names: bool = False) -> Any:
        # names: a mapping of field names (``fields``), whose keys are never dropped.
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key in _NOT_STORED and not names:
                    continue
                if key == "cls":
                    tag = "$enum" if issubclass(item, Status) else "$class"
                    out[key] = {tag: item.__name__}
                elif key == "function" and callable(item):
                    out[key] = {"$function": item.__name__}
                else:
                    out[key] = plain(item, names=key == "fields" and not names)
            return out
        if isinstance(value, list | tuple):
            return [plain(item) for item in value]
        if isinstance(value, Status):
            return {"$member": value.value}
        if value is None or isinstance(value, str | int | float | bool):
            return value
        raise TypeError(f"cannot store {value!r} in the core schema")

    result: dict[str, Any] = plain(model.__pydantic_core_schema__)
    return result


#: Value kinds of ``field_shape`` (read by ``rules.clean``, which checks a value of each):
#: text, an integer (not a boolean), a number, a boolean, one of the statuses, a list of
#: text, an object of a kind (``obj:KIND``) or a list of them (``list:KIND``).
_SCALAR_KINDS: Final[dict[Any, str]] = {
    str: "text",
    int: "int",
    float: "number",
    bool: "bool",
    Status: "status",
}


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _unwrapped(annotation: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    while True:
        origin = typing.get_origin(annotation)
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if (origin in (typing.Union, types.UnionType) and len(args) == 1) or origin is Annotated:
            annotation = args[0]
        else:
            return annotation


def field_shape(model: type[BaseModel] = MetadataFile) -> dict[str, dict[str, tuple[str, bool]]]:
    """Each kind of object of ``model``'s document -> field -> (value kind, required), in the
    models' field order: the table ``rules.clean`` checks a clean document by and whose keys
    are the known fields (PF205), stored in ``models.metadata_fields``.

    A kind is named as ``models.terms.KNOWN_FIELDS`` names it: ``""`` the document, a field's
    name for the object it holds, ``name[]`` for the objects of a list. Required: what the
    model needs plus what the schema asks for (a missing one is a PF207 warning)."""
    shape: dict[str, dict[str, tuple[str, bool]]] = {}

    def walk(kind: str, cls: type[BaseModel]) -> None:
        if kind in shape:
            raise ValueError(f"two kinds of object named {kind!r}")
        fields: dict[str, tuple[str, bool]] = {}
        shape[kind] = fields
        asked = set(cls.model_json_schema(mode="validation").get("required", []))
        nested: list[tuple[str, type[BaseModel]]] = []
        for name, info in cls.model_fields.items():
            annotation = _unwrapped(info.annotation)
            inner = _nested_model(annotation)
            if inner is not None:
                value_kind = f"obj:{name}"
                nested.append((name, inner))
            elif typing.get_origin(annotation) is list:
                (item,) = typing.get_args(annotation)
                item = _unwrapped(item)
                inner = _nested_model(item)
                if inner is not None:
                    value_kind = f"list:{name}[]"
                    nested.append((f"{name}[]", inner))
                elif item is str:
                    value_kind = "texts"
                else:
                    raise TypeError(f"{cls.__name__}.{name}: no value kind for a list of {item}")
            elif annotation in _SCALAR_KINDS:
                value_kind = _SCALAR_KINDS[annotation]
            else:
                raise TypeError(f"{cls.__name__}.{name}: no value kind for {annotation}")
            fields[name] = (value_kind, info.is_required() or name in asked)
        for name, inner in nested:
            walk(name, inner)

    walk("", model)
    return shape
