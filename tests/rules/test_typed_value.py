"""The typed value a valid document gets for postflight (``Validation.model``) is built by the
models' stored schema (``models.metadata_core``), or for a clean document by ``rules.typed``,
without pydantic: the outcome it applies, and the artifacts ``process`` reports, are the very
ones the models give, for any document."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.documents import researched_doc, task_entry
from postflightd.models.metadata import MetadataFile
from postflightd.models.metadata_core import validator
from postflightd.pipeline.results import artifact_json
from postflightd.postflight.transform import apply_outcome
from postflightd.rules.clean import is_clean
from postflightd.rules.context import TaskContext
from postflightd.rules.metadata import RuleOptions, validate
from postflightd.rules.typed import typed_value

TASK_DIR = "259_prove_completeness"
FILE = f"specs/{TASK_DIR}/.return-meta.json"
NOW = datetime(2026, 1, 8, 15, 0, tzinfo=UTC)
FINAL = ["researched", "planned", "implemented", "partial", "failed", "blocked"]

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
_text = st.none() | st.text(max_size=12)
_own_keys = st.dictionaries(st.sampled_from(["extra", "note", "x"]), _json, max_size=2)
_artifact = st.one_of(
    st.sampled_from([f"specs/{TASK_DIR}/reports/r.md", f"specs/{TASK_DIR}/plans/p.md", "src/a.py"]),
    st.builds(
        lambda path, kind, summary, own: {"path": path, "type": kind, "summary": summary, **own},
        st.sampled_from(["src/a.py", "src/b.py", f"specs/{TASK_DIR}/summaries/s.md"]),
        st.none() | st.sampled_from(["report", "plan", "summary", "implementation", "other"]),
        _text,
        _own_keys,
    ),
)
_error = st.builds(
    lambda message, kind, recoverable, recommendation: {
        "message": message,
        "type": kind,
        "recoverable": recoverable,
        "recommendation": recommendation,
    },
    st.text(max_size=12),
    _text,
    st.none() | st.booleans(),
    _text,
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    doc = researched_doc(TASK_DIR)
    doc["status"] = draw(st.sampled_from(FINAL))
    doc["artifacts"] = draw(st.lists(_artifact, max_size=3))
    doc["next_steps"] = draw(_text)
    doc["metadata"]["phases_completed"] = draw(st.none() | st.integers(0, 9))
    if draw(st.booleans()):
        doc["partial_progress"] = {
            "stage": "phase_2",
            "details": draw(st.text(max_size=8)),
            "phases_completed": draw(st.none() | st.integers(0, 9)),
        }
    if draw(st.booleans()):
        doc["completion_data"] = {
            "completion_summary": draw(st.text(max_size=8)),
            "roadmap_items": draw(st.none() | st.lists(st.text(max_size=5), max_size=2)),
            "claudemd_suggestions": draw(_text),
        }
    if draw(st.booleans()):
        doc["errors"] = draw(st.lists(_error, max_size=2))
    doc.update(draw(st.dictionaries(st.sampled_from(["own_key", "zz"]), _json, max_size=1)))
    return doc


def _state() -> dict[str, Any]:
    return {
        "active_projects": [
            task_entry(1, "other_task", status="planned"),
            task_entry(259, "prove_completeness", status="planning"),
        ]
    }


@settings(max_examples=300, deadline=None, database=None)
@given(documents())
def test_the_stored_schemas_value_applies_the_models_outcome(doc: dict[str, Any]) -> None:
    checker = validator()
    assert checker is not None  # the pinned pydantic-core builds it
    built = checker.validate_python(doc)
    model = MetadataFile.model_validate(doc)
    assert not isinstance(built, MetadataFile)
    state = _state()
    kwargs: dict[str, Any] = {
        "task": 259,
        "file": FILE,
        "now": NOW,
        "status_map": {"implemented": "completed"},
    }
    assert apply_outcome(state, built, **kwargs) == apply_outcome(state, model, **kwargs)
    assert [artifact_json(a) for a in built.artifacts] == [
        a.model_dump(mode="json", exclude_none=True) for a in model.artifacts
    ]


def test_a_valid_documents_value_is_built_without_the_models() -> None:
    """What validation hands postflight: the stored schema's value, whose fields postflight
    reads as it reads the model's."""
    doc = researched_doc(TASK_DIR)
    ctx = TaskContext(dir_name=TASK_DIR, number=259, slug="prove_completeness")
    found = validate(doc, ctx, NOW, RuleOptions(timeouts={"default": 3600}, check_artifacts=False))
    assert found.model is not None
    assert not isinstance(found.model, MetadataFile)
    assert found.model.status.value == "researched"
    assert found.model.metadata.session_id == doc["metadata"]["session_id"]


_word = st.text(alphabet="abc xyz/._-", min_size=1, max_size=8).filter(lambda t: t.strip() != "")


def _some(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with any of ``fields``."""
    return st.fixed_dictionaries({}, optional=fields)


@st.composite
def clean_documents(draw: st.DrawFn) -> dict[str, Any]:
    """Documents ``clean.is_clean`` accepts, of every final status, optional parts or not."""
    artifact = st.fixed_dictionaries(
        {
            "path": st.sampled_from(["src/a.py", f"specs/{TASK_DIR}/reports/r.md"]),
            "type": st.sampled_from(["report", "plan", "summary", "implementation", "other"]),
            "summary": _word,
        }
    )
    doc: dict[str, Any] = {
        "status": draw(st.sampled_from(FINAL)),
        "artifacts": draw(st.lists(artifact, max_size=3)),
        "metadata": {
            "session_id": "sess_1736640000_abc123",
            "agent_type": draw(_word),
            "delegation_depth": draw(st.integers(0, 3)),
            "delegation_path": draw(st.lists(_word, max_size=3)),
            **draw(
                _some({"phases_completed": st.integers(0, 9), "duration_seconds": st.floats(0, 9)})
            ),
        },
    }
    doc.update(
        draw(
            _some(
                {
                    "next_steps": _word,
                    "started_at": st.just("2026-01-08T14:00:00Z"),
                    "partial_progress": st.fixed_dictionaries(
                        {"stage": _word, "details": _word},
                        optional={"phases_completed": st.integers(0, 9)},
                    ),
                    "completion_data": st.fixed_dictionaries(
                        {"completion_summary": _word},
                        optional={
                            "roadmap_items": st.lists(_word, max_size=2),
                            "claudemd_suggestions": _word,
                        },
                    ),
                    "errors": st.lists(
                        st.fixed_dictionaries(
                            {
                                "message": _word,
                                "type": _word,
                                "recoverable": st.booleans(),
                                "recommendation": _word,
                            }
                        ),
                        max_size=2,
                    ),
                }
            )
        )
    )
    return doc


@settings(max_examples=300, deadline=None, database=None)
@given(clean_documents())
def test_a_clean_documents_value_applies_the_models_outcome(doc: dict[str, Any]) -> None:
    assert is_clean(doc)
    built = typed_value(doc)
    model = MetadataFile.model_validate(doc)
    state = _state()
    kwargs: dict[str, Any] = {
        "task": 259,
        "file": FILE,
        "now": NOW,
        "status_map": {"implemented": "completed"},
    }
    assert apply_outcome(state, built, **kwargs) == apply_outcome(state, model, **kwargs)
    assert [artifact_json(a) for a in built.artifacts] == [
        a.model_dump(mode="json", exclude_none=True) for a in model.artifacts
    ]
    # every field, at every depth, as the models have it
    assert _plain(built) == _plain(model)


def _plain(value: Any) -> Any:
    """A typed value's fields as plain data, whoever built it."""
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, str | int | float | dict):  # Status is a str
        return value
    if hasattr(value, "__dict__"):
        fields = {k: v for k, v in vars(value).items() if not k.startswith("__pydantic")}
        return {k: _plain(v) for k, v in fields.items()}
    return value
