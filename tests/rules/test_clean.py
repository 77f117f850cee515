"""A clean document (``rules.clean``): what it accepts, the model and the field passes accept too.

The shortcut is only safe if ``SHAPE`` says what the models say and no clean document would
have got a finding from the passes it skips: both are checked here, the first field by field
against the pydantic models, the second on the examples, on each single fault that must make
a document unclean, and on random and mutated documents.
"""

from __future__ import annotations

import copy
import json
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from helpers.documents import json_paths
from helpers.paths import FIXTURES
from postflightd.models.metadata import (
    Artifact,
    CompletionData,
    Metadata,
    MetadataFile,
    PartialProgress,
    ReportedError,
)
from postflightd.models.terms import KNOWN_FIELDS, Status
from postflightd.rules import metadata as rules
from postflightd.rules.clean import SHAPE, STATUSES, is_clean, is_clean_but_for_extras
from postflightd.rules.toolkit import structure, unknown_fields

MODELS: dict[str, type[BaseModel]] = {
    "": MetadataFile,
    "metadata": Metadata,
    "artifacts[]": Artifact,
    "partial_progress": PartialProgress,
    "completion_data": CompletionData,
    "errors[]": ReportedError,
}
KIND_OF_MODEL = {model: kind for kind, model in MODELS.items()}
SCALAR_KINDS = {str: "text", int: "int", float: "number", bool: "bool", Status: "status"}

EXAMPLES = {
    p.name: json.loads(p.read_text(encoding="utf-8"))
    for p in sorted((FIXTURES / "metadata_examples").glob("*.json"))
}
#: The one example with keys the contract does not know (phase_count, estimated_hours).
EXTRAS_EXAMPLE = "planning_success.json"
#: Every other example is clean. Chosen by name, not by ``is_clean``: the random documents are
#: built from these, and must not shrink to nothing with the function they test.
CLEAN_EXAMPLES = [doc for name, doc in EXAMPLES.items() if name != EXTRAS_EXAMPLE]


def _value_kind(annotation: Any) -> str:
    """What SHAPE must say of a field of this annotation (``X | None``: of X)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        assert len(args) == 1, annotation
        return _value_kind(args[0])
    if origin is typing.Annotated:
        return _value_kind(args[0])
    if origin is list:
        (item,) = args
        if typing.get_origin(item) is typing.Annotated:
            item = typing.get_args(item)[0]
        if item is str:
            return "texts"
        return f"list:{KIND_OF_MODEL[item]}"
    if annotation in KIND_OF_MODEL:
        return f"obj:{KIND_OF_MODEL[annotation]}"
    return SCALAR_KINDS[annotation]


@pytest.mark.parametrize("kind", list(MODELS))
def test_shape_says_what_the_model_says(kind: str) -> None:
    model = MODELS[kind]
    schema_required = set(model.model_json_schema().get("required", []))
    assert set(SHAPE[kind]) == set(model.model_fields), "a field added to the model: add it"
    for name, info in model.model_fields.items():
        value_kind, required = SHAPE[kind][name]
        assert value_kind == _value_kind(info.annotation), f"{kind}.{name}"
        # Required in a clean document: what the model needs and what the contract asks for.
        assert required == (info.is_required() or name in schema_required), f"{kind}.{name}"


def test_statuses_are_the_models() -> None:
    assert {s.value for s in Status} == STATUSES


def test_shape_names_the_known_fields() -> None:
    assert {kind: frozenset(fields) for kind, fields in SHAPE.items()} == KNOWN_FIELDS


def test_most_examples_are_clean() -> None:
    assert len(CLEAN_EXAMPLES) == len(EXAMPLES) - 1
    assert all(is_clean(doc) for doc in CLEAN_EXAMPLES)
    planning = EXAMPLES[EXTRAS_EXAMPLE]
    assert not is_clean(planning)
    assert is_clean_but_for_extras(planning)
    assert all(is_clean_but_for_extras(doc) for doc in CLEAN_EXAMPLES)


def _research() -> dict[str, Any]:
    return copy.deepcopy(EXAMPLES["research_success.json"])


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    holder = doc
    for part in path[:-1]:
        holder = holder[part]
    holder[path[-1]] = value
    return doc


def _drop(doc: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    holder = doc
    for part in path[:-1]:
        holder = holder[part]
    del holder[path[-1]]
    return doc


#: One fault each, every one of which a field pass reports (or the model refuses).
UNCLEAN = {
    "unknown top-level key": _set(_research(), ("reviewer",), "someone"),
    "unknown metadata key": _set(_research(), ("metadata", "phase_count"), 4),
    "blank session": _set(_research(), ("metadata", "session_id"), "  "),
    "blank next_steps": _set(_research(), ("next_steps",), "\t"),
    "blank by str.strip only": _set(_research(), ("next_steps",), "\x1c\u3000"),
    "null next_steps": _set(_research(), ("next_steps",), None),
    "depth as a string": _set(_research(), ("metadata", "delegation_depth"), "1"),
    "depth as a boolean": _set(_research(), ("metadata", "delegation_depth"), True),
    "duration as a boolean": _set(_research(), ("metadata", "duration_seconds"), False),
    "duration as a string": _set(_research(), ("metadata", "duration_seconds"), "180"),
    "missing agent_type": _drop(_research(), ("metadata", "agent_type")),
    "missing delegation_path": _drop(_research(), ("metadata", "delegation_path")),
    "blank delegation_path entry": _set(_research(), ("metadata", "delegation_path", 0), ""),
    "missing artifact summary": _drop(_research(), ("artifacts", 0, "summary")),
    "artifact as a plain path": _set(_research(), ("artifacts", 0), "specs/x/reports/r.md"),
    "artifact type null": _set(_research(), ("artifacts", 0, "type"), None),
    "status completed": _set(_research(), ("status",), "completed"),
    "status in capitals": _set(_research(), ("status",), "Researched"),
    "status a number": _set(_research(), ("status",), 1),
    "metadata an array": _set(_research(), ("metadata",), []),
    "artifacts an object": _set(_research(), ("artifacts",), {}),
    "missing status": _drop(_research(), ("status",)),
    "error without recoverable": _set(
        _research(), ("errors",), [{"message": "m", "type": "t", "recommendation": "r"}]
    ),
    "roadmap item a number": _set(
        _research(), ("completion_data",), {"completion_summary": "s", "roadmap_items": [1]}
    ),
}


#: The faults that are only keys the contract does not know.
EXTRAS_ONLY = {"unknown top-level key", "unknown metadata key"}


@pytest.mark.parametrize("name", list(UNCLEAN))
def test_each_fault_makes_a_document_unclean(name: str) -> None:
    assert is_clean(_research())
    assert not is_clean(UNCLEAN[name])
    # Clean but for extras only when the fault is an unknown key.
    assert is_clean_but_for_extras(UNCLEAN[name]) == (name in EXTRAS_ONLY)


def test_unknown_keys_at_any_depth_are_extras() -> None:
    doc = _research()
    doc["reviewer"] = {"name": None, "deep": [1, ""]}
    doc["metadata"]["phase_count"] = "4"
    doc["artifacts"][0]["pages"] = None
    assert is_clean_but_for_extras(doc)
    _skipped_passes_find_nothing(doc, extras=True)


@pytest.mark.parametrize("value", [None, [], "text", 1, [{}]])
def test_not_an_object_is_unclean(value: Any) -> None:
    assert not is_clean(value)


def _skipped_passes_find_nothing(doc: Any, *, extras: bool = False) -> None:
    """What the clean shortcut skips: the model accepts, and no field pass reports (with
    ``extras``, the unknown fields are reported by their own pass, which still runs)."""
    found, model = structure(MetadataFile.model_validate, doc, "the document")
    assert found == []
    assert model is not None
    assert list(rules._schema_fields(doc)) == []
    unknown = list(unknown_fields(doc, rules._KNOWN_IN_ORDER, "kept as is"))
    assert bool(unknown) == extras


@pytest.mark.parametrize("doc", CLEAN_EXAMPLES)
def test_clean_examples_get_nothing_from_the_skipped_passes(doc: dict[str, Any]) -> None:
    _skipped_passes_find_nothing(doc)


texts = st.one_of(
    st.text(max_size=6), st.sampled_from(("", " ", "\x1c", "\u00a0", "x", "sess_1_abcdef"))
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    texts,
    st.sampled_from(sorted(STATUSES | {"completed"})),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(st.sampled_from([f for k in SHAPE.values() for f in k]), texts),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


#: Values one step from right: blank or null where text was, a boolean or a string where a
#: number was, an empty or wrong-typed container.
NEAR: tuple[Any, ...] = ("", " ", "\x1c", "\u3000", None, True, False, 0, 1, -1, 1.5, "1", "x")
NEAR_CONTAINERS: tuple[Any, ...] = ([], {}, [""], ["x"], [1])
near_values = st.sampled_from((*NEAR, *NEAR_CONTAINERS)).map(
    copy.deepcopy
)  # a fresh container each time: a later step may add to it


def _same_kind(value: Any) -> st.SearchStrategy[Any]:
    """Another value of ``value``'s JSON type (text may come blank; an object: a copy of it):
    the changes that keep a document clean most often, or leave it one blank away."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=-3, max_value=2**70)
    if isinstance(value, float):
        return st.floats(allow_nan=False)
    if isinstance(value, str):
        if value in STATUSES:
            return st.sampled_from(sorted(STATUSES | {"completed"}))
        return st.one_of(texts, st.text(min_size=1, max_size=12))
    if isinstance(value, dict):
        return st.just(copy.deepcopy(value))
    return near_values


@st.composite
def near_clean(draw: st.DrawFn) -> Any:
    """A clean example with one to three values replaced, removed or added: mostly documents
    one step from clean, where a wrong shortcut would show."""
    doc = copy.deepcopy(draw(st.sampled_from(CLEAN_EXAMPLES)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = json_paths(doc)[1:]  # not the document itself
        path = draw(st.sampled_from(paths))
        holder = doc
        for part in path[:-1]:
            holder = holder[part]
        # Replaced by a value of its kind most often: those keep a document clean, or leave it
        # a blank text away, where a wrong shortcut would show.
        action = draw(st.sampled_from(("replace", "replace", "replace", "retype", "remove", "add")))
        if action == "replace":
            holder[path[-1]] = draw(_same_kind(holder[path[-1]]))
        elif action == "retype":
            holder[path[-1]] = draw(st.one_of(near_values, values))
        elif action == "remove":
            del holder[path[-1]]
        elif isinstance(holder, dict):
            holder[draw(texts)] = draw(st.one_of(near_values, values))
        elif holder and draw(st.booleans()):
            holder.append(draw(_same_kind(draw(st.sampled_from(holder)))))
        else:
            holder.append(draw(values))
    return doc


#: What the random documents must reach, as shares of the examples: clean ones (the skipped
#: passes checked), clean but for unknown keys (checked with that pass still running), and
#: either (the examples that check anything: an unclean one goes through every pass, so there
#: is nothing to hold it to).
CLEAN_FLOOR = 0.1
EXTRAS_FLOOR = 0.05
CHECKED_FLOOR = 0.2


def test_whatever_is_clean_gets_nothing_from_the_skipped_passes() -> None:
    """Random documents, most a few steps from a clean example: each one clean (or clean but
    for unknown keys) gets nothing from the passes the shortcut skips; and enough of them are
    so that the property is tested, each kind above its floor."""
    kinds: list[str] = []

    @settings(max_examples=1000, deadline=None, database=None)
    @given(doc=near_clean())
    def skipped_passes_find_nothing(doc: Any) -> None:
        if is_clean(doc):
            _skipped_passes_find_nothing(doc)
            kinds.append("clean")
        elif is_clean_but_for_extras(doc):
            _skipped_passes_find_nothing(doc, extras=True)
            kinds.append("extras")
        else:
            kinds.append("unclean")  # it goes through every pass: nothing skipped to check

    skipped_passes_find_nothing()
    share = {kind: kinds.count(kind) / len(kinds) for kind in ("clean", "extras", "unclean")}
    assert share["clean"] >= CLEAN_FLOOR, share
    assert share["extras"] >= EXTRAS_FLOOR, share
    assert 1 - share["unclean"] >= CHECKED_FLOOR, share


@settings(max_examples=300, deadline=None, database=None)
@given(doc=values)
def test_any_value_is_judged_and_only_an_object_can_be_clean(doc: Any) -> None:
    """Any JSON value at all: judged without raising, never clean unless an object, and
    checked as the near-clean documents are when it happens to be clean."""
    clean, extras = is_clean(doc), is_clean_but_for_extras(doc)
    assert isinstance(clean, bool) and isinstance(extras, bool)
    if not isinstance(doc, dict):
        assert not clean and not extras
    elif clean:
        _skipped_passes_find_nothing(doc)
    elif extras:
        _skipped_passes_find_nothing(doc, extras=True)
