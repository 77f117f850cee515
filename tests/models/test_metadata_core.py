"""The stored pydantic-core schema (``models.metadata_core``) is the models' own, and says what
they say: the same errors, in the same order, on any document."""

from __future__ import annotations

import copy
import importlib.util
import pprint
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers.documents import researched_doc
from helpers.update_mode import rewritten, updating
from postflightd.models import metadata_core, metadata_fields
from postflightd.models.metadata import Metadata, MetadataFile, field_shape, storable_core_schema
from postflightd.models.terms import KNOWN_FIELDS, Status
from postflightd.rules import metadata as rules_metadata
from postflightd.rules.clean import is_clean, object_check
from postflightd.rules.context import TaskContext
from postflightd.rules.quiet_source import metadata_quiet
from postflightd.rules.toolkit import structure, unknown_fields

GENERATED = Path(metadata_core.__file__)
GENERATED_FIELDS = Path(metadata_fields.__file__)
UPDATE_ENV = "POSTFLIGHTD_UPDATE_CORE_SCHEMA"
MARK = "#: Generated from ``models.metadata``"
#: What follows the generated value in each module: kept as it is.
END = "\n\n#: "


def generate(path: Path, name: str, annotation: str, value: Any) -> None:
    """Write ``value`` as ``NAME: ANNOTATION = ...`` after the mark of the generated module
    at ``path``, keeping the module's text before the mark and what follows the value."""
    text = path.read_text(encoding="utf-8")
    start = text.index(MARK)
    after = text.find(END, start)
    tail = "" if after == -1 else text[after:]
    body = pprint.pformat(value, width=96, sort_dicts=False)
    path.write_text(
        f"{text[:start]}{MARK} (see the module's text).\n{name}: {annotation} = {body}\n{tail}",
        encoding="utf-8",
    )
    # Formatted as the rest of src/ is, so that the rewrite's diff is only what changed.
    subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(path)], check=True)


def test_the_stored_schema_is_what_the_models_give() -> None:
    current = storable_core_schema() == metadata_core.SCHEMA
    if updating(UPDATE_ENV) and not current:
        generate(GENERATED, "SCHEMA", "Final[dict[str, Any]]", storable_core_schema())
        rewritten(GENERATED, UPDATE_ENV)
    assert current, f"the metadata models changed: run {UPDATE_ENV}=1 pytest {Path(__file__).name}"


SHAPE_ANNOTATION = "Final[Mapping[str, Mapping[str, tuple[str, bool]]]]"


def test_the_stored_fields_are_what_the_models_give() -> None:
    """The known fields (PF205) and the clean shape come from the models alone."""
    current = field_shape() == metadata_fields.SHAPE
    if updating(UPDATE_ENV) and not current:
        generate(GENERATED_FIELDS, "SHAPE", SHAPE_ANNOTATION, field_shape())
        rewritten(GENERATED_FIELDS, UPDATE_ENV)
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


# --- a field added to a model, and nowhere else ------------------------------------------------


class _ReviewedMetadata(Metadata):
    reviewed_at: str | None = None


class _Reviewed(MetadataFile):
    """The metadata file with two fields more, declared only here."""

    metadata: _ReviewedMetadata
    reviewer: str | None = None


def _generated_copy(source: Path, tmp_path: Path, name: str, value: Any, annotation: str) -> Any:
    """The module at ``source`` generated anew from ``value`` (in ``tmp_path``), imported."""
    path = tmp_path / source.name
    shutil.copyfile(source, path)
    generate(path, name, annotation, value)
    spec = importlib.util.spec_from_file_location(f"_generated_{source.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generated_quiet(tmp_path: Path, shape: Any) -> tuple[str, Any]:
    """The quiet check generated anew from the rules' conditions over ``shape``, written in
    ``tmp_path``, and the function it defines, run among ``rules.metadata``'s names."""
    source = metadata_quiet(shape)
    path = tmp_path / "quiet.py"
    path.write_text(source, encoding="utf-8")
    names = dict(vars(rules_metadata))
    # The generated function is a part of rules.metadata: it runs among that module's names.
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), names)  # noqa: S102
    return source, names["_quiet"]


QUIET_CONTEXT = TaskContext(dir_name="259_prove_completeness")
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def test_a_field_added_to_the_model_reaches_the_schema_the_known_fields_and_the_shape(
    tmp_path: Path,
) -> None:
    """One edit, the model's: the stored schema, the known fields (PF205), the clean shape
    and the quiet check that the generators write from it all have the new fields."""
    core = _generated_copy(
        GENERATED, tmp_path, "SCHEMA", storable_core_schema(_Reviewed), "Final[dict[str, Any]]"
    )
    fields = _generated_copy(
        GENERATED_FIELDS, tmp_path, "SHAPE", field_shape(_Reviewed), SHAPE_ANNOTATION
    )
    assert "reviewer" in fields.KNOWN_FIELDS[""]
    assert "reviewed_at" in fields.KNOWN_FIELDS["metadata"]
    assert fields.SHAPE[""]["reviewer"] == ("text", False)
    assert fields.SHAPE["metadata"]["reviewed_at"] == ("text", False)
    # What the real modules say is unchanged: the new fields are this test's own.
    assert "reviewer" not in metadata_fields.KNOWN_FIELDS[""]

    doc = researched_doc()
    doc["reviewer"] = "someone"
    doc["metadata"]["reviewed_at"] = "2026-11-26T12:00:00Z"
    # Clean under the generated shape (nothing to report), not under the real one (unknown).
    assert object_check("", shape=fields.SHAPE)(doc)
    assert not is_clean(doc)
    assert list(unknown_fields(doc, fields.KNOWN_FIELDS, "kept")) == []
    assert [f.location for f in unknown_fields(doc, KNOWN_FIELDS, "kept")] == [
        "reviewer",
        "metadata.reviewed_at",
    ]
    # The stored schema checks the new fields' types, as the model does.
    checker = core.validator()
    assert checker is not None
    doc["reviewer"] = 5
    found, _ = structure(checker.validate_python, doc, "the document")
    assert [(f.code, f.location) for f in found] == [("PF201", "reviewer")]
    assert found == structure(_Reviewed.model_validate, doc, "the document")[0]
    assert not object_check("", shape=fields.SHAPE)(doc)

    # The quiet check written from the new shape: the clean document with the new fields is
    # quiet (no rule has anything to say), as the one without them is under the real check.
    doc["reviewer"] = "someone"
    source, quiet = _generated_quiet(tmp_path, fields.SHAPE)
    assert quiet(doc, Status.RESEARCHED, QUIET_CONTEXT, NOW, None) is None
    assert (
        rules_metadata._quiet(researched_doc(), Status.RESEARCHED, QUIET_CONTEXT, NOW, None) is None
    )
    # ... and still asks every rule: a negative duration is not quiet.
    doc["metadata"]["duration_seconds"] = -1
    assert quiet(doc, Status.RESEARCHED, QUIET_CONTEXT, NOW, None) is False
    assert source == metadata_quiet()  # no condition reads the new fields: the same check


class _TimedMetadata(Metadata):
    duration_seconds: float  # required here, optional in the real model


class _Timed(MetadataFile):
    """The metadata file whose run length is required, declared only here."""

    metadata: _TimedMetadata


def test_the_quiet_check_reads_each_field_as_the_model_declares_it(tmp_path: Path) -> None:
    """The quiet check reads a field the model requires by index, with no test for its
    absence, and an optional one with ``get``: made required in the model alone, the run's
    length is read so, and a document without it is no longer clean."""
    real = metadata_quiet()
    assert "metadata.get('duration_seconds')" in real
    assert "metadata_duration_seconds is not None" in real

    shape = field_shape(_Timed)
    source, quiet = _generated_quiet(tmp_path, shape)
    assert "metadata['duration_seconds']" in source
    assert "metadata_duration_seconds is not None" not in source
    doc = researched_doc()
    assert quiet(doc, Status.RESEARCHED, QUIET_CONTEXT, NOW, None) is None
    doc["metadata"]["duration_seconds"] = -5
    assert quiet(doc, Status.RESEARCHED, QUIET_CONTEXT, NOW, None) is False
    del doc["metadata"]["duration_seconds"]
    assert not object_check("", shape=shape)(doc)
