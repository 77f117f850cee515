"""The metadata file's validator as pydantic-core schema data, without pydantic.

``SCHEMA`` is what pydantic builds from the models in ``models.metadata``, stored as plain
data (``metadata.storable_core_schema``): a scan checks a file that is not clean
(``rules.clean``) with ``validator()``, a pydantic-core validator built from it, and meets
the very errors the models would give, without importing pydantic and building the models
(about 90 ms of a scan's start; pydantic-core alone is about 35). Applying a valid file
uses it too: what it builds has the models' fields and values, read by attribute as the
postflight reads them (instances of plain classes of the models' names, without pydantic's
methods), so that the stop hook, ``process`` and the daemon apply without pydantic.

Generated: do not edit ``SCHEMA``. ``tests/models/test_metadata_core.py`` fails when it
differs from what the models give and rewrites it with ``POSTFLIGHTD_UPDATE_CORE_SCHEMA=1``.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, Final

from postflightd.models.terms import Status, artifact_from_path

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator

_FUNCTIONS: Final = {"artifact_from_path": artifact_from_path}
_ENUMS: Final = {"Status": Status}


@cache
def validator() -> SchemaValidator | None:
    """The validator of ``SCHEMA``; None when this pydantic-core cannot build it (another
    version than the one it was generated with): the caller then uses the models."""
    from pydantic_core import SchemaError, SchemaValidator

    classes: dict[str, type] = {}

    def live(value: Any) -> Any:
        if isinstance(value, dict):
            if "$class" in value:
                # What a model schema builds: an instance of a plain class of the model's name
                # (the name is in some messages), which no caller reads.
                name = value["$class"]
                return classes.setdefault(name, type(name, (), {"__module__": __name__}))
            if "$enum" in value:
                return _ENUMS[value["$enum"]]
            if "$member" in value:
                return Status(value["$member"])
            if "$function" in value:
                return _FUNCTIONS[value["$function"]]
            return {key: live(item) for key, item in value.items()}
        if isinstance(value, list):
            return [live(item) for item in value]
        return value

    try:
        return SchemaValidator(live(SCHEMA))
    except (SchemaError, KeyError, TypeError, ValueError):
        return None


#: Generated from ``models.metadata`` (see the module's text).
SCHEMA: Final[dict[str, Any]] = {
    "type": "model",
    "cls": {"$class": "MetadataFile"},
    "schema": {
        "type": "model-fields",
        "fields": {
            "status": {
                "type": "model-field",
                "schema": {
                    "type": "enum",
                    "cls": {"$enum": "Status"},
                    "members": [
                        {"$member": "in_progress"},
                        {"$member": "researched"},
                        {"$member": "planned"},
                        {"$member": "implemented"},
                        {"$member": "partial"},
                        {"$member": "failed"},
                        {"$member": "blocked"},
                    ],
                    "sub_type": "str",
                    "strict": False,
                },
            },
            "artifacts": {
                "type": "model-field",
                "schema": {
                    "type": "list",
                    "items_schema": {
                        "type": "function-before",
                        "function": {
                            "type": "no-info",
                            "function": {"$function": "artifact_from_path"},
                        },
                        "schema": {
                            "type": "model",
                            "cls": {"$class": "Artifact"},
                            "schema": {
                                "type": "model-fields",
                                "fields": {
                                    "path": {"type": "model-field", "schema": {"type": "str"}},
                                    "type": {
                                        "type": "model-field",
                                        "schema": {
                                            "type": "default",
                                            "schema": {
                                                "type": "nullable",
                                                "schema": {"type": "str"},
                                            },
                                            "default": None,
                                        },
                                    },
                                    "summary": {
                                        "type": "model-field",
                                        "schema": {
                                            "type": "default",
                                            "schema": {
                                                "type": "nullable",
                                                "schema": {"type": "str"},
                                            },
                                            "default": None,
                                        },
                                    },
                                },
                                "model_name": "Artifact",
                                "computed_fields": [],
                            },
                            "custom_init": False,
                            "root_model": False,
                            "config": {
                                "extra_fields_behavior": "allow",
                                "strict": True,
                                "title": "Artifact",
                            },
                        },
                    },
                },
            },
            "metadata": {
                "type": "model-field",
                "schema": {
                    "type": "model",
                    "cls": {"$class": "Metadata"},
                    "schema": {
                        "type": "model-fields",
                        "fields": {
                            "session_id": {"type": "model-field", "schema": {"type": "str"}},
                            "agent_type": {
                                "type": "model-field",
                                "schema": {
                                    "type": "default",
                                    "schema": {"type": "nullable", "schema": {"type": "str"}},
                                    "default": None,
                                },
                            },
                            "delegation_depth": {
                                "type": "model-field",
                                "schema": {
                                    "type": "default",
                                    "schema": {"type": "nullable", "schema": {"type": "int"}},
                                    "default": None,
                                },
                            },
                            "delegation_path": {
                                "type": "model-field",
                                "schema": {
                                    "type": "default",
                                    "schema": {
                                        "type": "nullable",
                                        "schema": {"type": "list", "items_schema": {"type": "str"}},
                                    },
                                    "default": None,
                                },
                            },
                            "duration_seconds": {
                                "type": "model-field",
                                "schema": {
                                    "type": "default",
                                    "schema": {"type": "nullable", "schema": {"type": "float"}},
                                    "default": None,
                                },
                            },
                            "findings_count": {
                                "type": "model-field",
                                "schema": {
                                    "type": "default",
                                    "schema": {"type": "nullable", "schema": {"type": "int"}},
                                    "default": None,
                                },
                            },
                            "phases_completed": {
                                "type": "model-field",
                                "schema": {
                                    "type": "default",
                                    "schema": {"type": "nullable", "schema": {"type": "int"}},
                                    "default": None,
                                },
                            },
                            "phases_total": {
                                "type": "model-field",
                                "schema": {
                                    "type": "default",
                                    "schema": {"type": "nullable", "schema": {"type": "int"}},
                                    "default": None,
                                },
                            },
                        },
                        "model_name": "Metadata",
                        "computed_fields": [],
                    },
                    "custom_init": False,
                    "root_model": False,
                    "config": {
                        "extra_fields_behavior": "allow",
                        "strict": True,
                        "title": "Metadata",
                    },
                },
            },
            "next_steps": {
                "type": "model-field",
                "schema": {
                    "type": "default",
                    "schema": {"type": "nullable", "schema": {"type": "str"}},
                    "default": None,
                },
            },
            "started_at": {
                "type": "model-field",
                "schema": {
                    "type": "default",
                    "schema": {"type": "nullable", "schema": {"type": "str"}},
                    "default": None,
                },
            },
            "partial_progress": {
                "type": "model-field",
                "schema": {
                    "type": "default",
                    "schema": {
                        "type": "nullable",
                        "schema": {
                            "type": "model",
                            "cls": {"$class": "PartialProgress"},
                            "schema": {
                                "type": "model-fields",
                                "fields": {
                                    "stage": {"type": "model-field", "schema": {"type": "str"}},
                                    "details": {"type": "model-field", "schema": {"type": "str"}},
                                    "phases_completed": {
                                        "type": "model-field",
                                        "schema": {
                                            "type": "default",
                                            "schema": {
                                                "type": "nullable",
                                                "schema": {"type": "int"},
                                            },
                                            "default": None,
                                        },
                                    },
                                    "phases_total": {
                                        "type": "model-field",
                                        "schema": {
                                            "type": "default",
                                            "schema": {
                                                "type": "nullable",
                                                "schema": {"type": "int"},
                                            },
                                            "default": None,
                                        },
                                    },
                                },
                                "model_name": "PartialProgress",
                                "computed_fields": [],
                            },
                            "custom_init": False,
                            "root_model": False,
                            "config": {
                                "extra_fields_behavior": "allow",
                                "strict": True,
                                "title": "PartialProgress",
                            },
                        },
                    },
                    "default": None,
                },
            },
            "completion_data": {
                "type": "model-field",
                "schema": {
                    "type": "default",
                    "schema": {
                        "type": "nullable",
                        "schema": {
                            "type": "model",
                            "cls": {"$class": "CompletionData"},
                            "schema": {
                                "type": "model-fields",
                                "fields": {
                                    "completion_summary": {
                                        "type": "model-field",
                                        "schema": {"type": "str"},
                                    },
                                    "roadmap_items": {
                                        "type": "model-field",
                                        "schema": {
                                            "type": "default",
                                            "schema": {
                                                "type": "nullable",
                                                "schema": {
                                                    "type": "list",
                                                    "items_schema": {"type": "str"},
                                                },
                                            },
                                            "default": None,
                                        },
                                    },
                                    "claudemd_suggestions": {
                                        "type": "model-field",
                                        "schema": {
                                            "type": "default",
                                            "schema": {
                                                "type": "nullable",
                                                "schema": {"type": "str"},
                                            },
                                            "default": None,
                                        },
                                    },
                                },
                                "model_name": "CompletionData",
                                "computed_fields": [],
                            },
                            "custom_init": False,
                            "root_model": False,
                            "config": {
                                "extra_fields_behavior": "allow",
                                "strict": True,
                                "title": "CompletionData",
                            },
                        },
                    },
                    "default": None,
                },
            },
            "errors": {
                "type": "model-field",
                "schema": {
                    "type": "default",
                    "schema": {
                        "type": "nullable",
                        "schema": {
                            "type": "list",
                            "items_schema": {
                                "type": "model",
                                "cls": {"$class": "ReportedError"},
                                "schema": {
                                    "type": "model-fields",
                                    "fields": {
                                        "message": {
                                            "type": "model-field",
                                            "schema": {"type": "str"},
                                        },
                                        "type": {
                                            "type": "model-field",
                                            "schema": {
                                                "type": "default",
                                                "schema": {
                                                    "type": "nullable",
                                                    "schema": {"type": "str"},
                                                },
                                                "default": None,
                                            },
                                        },
                                        "recoverable": {
                                            "type": "model-field",
                                            "schema": {
                                                "type": "default",
                                                "schema": {
                                                    "type": "nullable",
                                                    "schema": {"type": "bool"},
                                                },
                                                "default": None,
                                            },
                                        },
                                        "recommendation": {
                                            "type": "model-field",
                                            "schema": {
                                                "type": "default",
                                                "schema": {
                                                    "type": "nullable",
                                                    "schema": {"type": "str"},
                                                },
                                                "default": None,
                                            },
                                        },
                                    },
                                    "model_name": "ReportedError",
                                    "computed_fields": [],
                                },
                                "custom_init": False,
                                "root_model": False,
                                "config": {
                                    "extra_fields_behavior": "allow",
                                    "strict": True,
                                    "title": "ReportedError",
                                },
                            },
                        },
                    },
                    "default": None,
                },
            },
        },
        "model_name": "MetadataFile",
        "computed_fields": [],
    },
    "custom_init": False,
    "root_model": False,
    "config": {
        "extra_fields_behavior": "allow",
        "strict": True,
        "title": "postflightd .return-meta.json",
    },
}
