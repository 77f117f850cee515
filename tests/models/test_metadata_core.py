"""The stored pydantic-core schema (``models.metadata_core``) is the models' own, and says what
they say: the same errors, in the same order, on any document."""

from __future__ import annotations

import copy
import pprint
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers.documents import researched_doc
from helpers.update_mode import rewritten, updating
from postflightd.models import metadata_core
from postflightd.models.metadata import MetadataFile, storable_core_schema
from postflightd.rules.toolkit import structure

GENERATED = Path(metadata_core.__file__)
UPDATE_ENV = "POSTFLIGHTD_UPDATE_CORE_SCHEMA"
MARK = "#: Generated from ``models.metadata``"


def _rewrite() -> None:
    text = GENERATED.read_text(encoding="utf-8")
    head = text[: text.index(MARK)]
    body = pprint.pformat(storable_core_schema(), width=96, sort_dicts=False)
    GENERATED.write_text(
        f"{head}{MARK} (see the module's text).\nSCHEMA: Final[dict[str, Any]] = {body}\n",
        encoding="utf-8",
    )
    # Formatted as the rest of src/ is, so that the rewrite's diff is only what changed.
    subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(GENERATED)], check=True)


def test_the_stored_schema_is_what_the_models_give() -> None:
    current = storable_core_schema() == metadata_core.SCHEMA
    if updating(UPDATE_ENV) and not current:
        _rewrite()
        rewritten(GENERATED, UPDATE_ENV)
    assert current, f"the metadata models changed: run {UPDATE_ENV}=1 pytest {Path(__file__).name}"


def test_this_pydantic_core_builds_it() -> None:
    assert metadata_core.validator() is not None


def _errors(validate: Any, doc: Any) -> list[dict[str, Any]] | None:
    try:
        validate(doc)
    except ValidationError as exc:
        return exc.errors(include_url=False)
    return None


def _same(doc: Any) -> None:
    checker = metadata_core.validator()
    assert checker is not None
    assert _errors(checker.validate_python, doc) == _errors(MetadataFile.model_validate, doc)
    if isinstance(doc, dict):
        assert (
            structure(checker.validate_python, doc, "the document", quote_hint=True)[0]
            == structure(MetadataFile.model_validate, doc, "the document", quote_hint=True)[0]
        )


BAD = [
    {},
    {"status": 5, "artifacts": "x", "metadata": {"session_id": 1, "delegation_depth": "1"}},
    {"status": "completed", "artifacts": [None, "specs/1_x/reports/r.md"], "metadata": []},
    {"status": "researched", "artifacts": [{"path": 1, "type": 2}], "metadata": {}},
    {"status": "in_progress", "artifacts": [], "metadata": {"session_id": "s"}, "errors": [{}]},
    {
        "status": "implemented",
        "artifacts": [],
        "metadata": {"session_id": "s", "delegation_path": [1, None], "duration_seconds": "9"},
        "completion_data": {"roadmap_items": "x"},
        "partial_progress": {"stage": None, "phases_total": 1.5},
    },
]


@pytest.mark.parametrize("doc", BAD)
def test_the_same_errors_as_the_models(doc: dict[str, Any]) -> None:
    assert _errors(MetadataFile.model_validate, doc) is not None
    _same(doc)


KEYS = (
    *("status", "artifacts", "metadata", "session_id", "path", "type", "summary", "errors"),
    *("message", "recoverable", "stage", "details", "phases_total", "completion_data"),
    *("completion_summary", "roadmap_items", "x"),
)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False),
        st.text(max_size=8),
        st.sampled_from(("researched", "completed", "in_progress", "specs/1_x/plans/p.md")),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(KEYS),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=16,
)


@st.composite
def near_valid(draw: st.DrawFn) -> Any:
    """A valid document with a few of its values replaced by anything."""
    doc: dict[str, Any] = copy.deepcopy(researched_doc())
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        holder: Any = doc
        key = draw(st.sampled_from(sorted(doc)))
        if isinstance(doc[key], dict) and draw(st.booleans()):
            holder = doc[key]
            key = draw(st.sampled_from(sorted(holder) or ["x"]))
        holder[key] = draw(json_values)
    return doc


@settings(max_examples=400, deadline=None, database=None)
@given(doc=st.one_of(near_valid(), json_values))
def test_the_same_errors_as_the_models_on_any_document(doc: Any) -> None:
    _same(doc)
