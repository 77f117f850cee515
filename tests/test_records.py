"""A record behaves as the frozen dataclass it stands for: each is held to its own twin."""

from __future__ import annotations

import copy
import pickle
from dataclasses import FrozenInstanceError, field, fields, make_dataclass, replace
from typing import Any

import pytest

from postflightd.config import Config, PostflightConfig, StatusMap, ValidationConfig
from postflightd.records import Record, dataclass_twin, from_twin


class Inner(Record):
    name: str = "x"
    tags: list[str] = field(default_factory=list)


class Outer(Record):
    size: int = 1
    inner: Inner = field(default_factory=Inner)
    note: str = field(default="", compare=False)


SECTIONS: list[type[Record]] = [Outer, Config, ValidationConfig, PostflightConfig, StatusMap]


def _twin(record: type[Record]) -> tuple[type[Any], dict[type[Any], type[Record]]]:
    twins: dict[type[Record], type[Any]] = {}
    made = dataclass_twin(record, twins)
    return made, {twin: rec for rec, twin in twins.items()}


@pytest.mark.parametrize("record", SECTIONS)
def test_a_record_reads_as_its_dataclass_twin(record: type[Record]) -> None:
    twin, records = _twin(record)
    assert [f.name for f in fields(twin)] == list(record._FIELDS)
    assert repr(record()) == repr(twin())
    assert from_twin(twin(), records) == record()
    assert record().as_mapping().keys() == {f.name for f in fields(twin)}


def test_equality_and_hashing_compare_what_a_dataclass_compares() -> None:
    twin, _ = _twin(Outer)
    assert Outer(note="a") == Outer(note="b")  # compare=False, as the twin
    assert twin(note="a") == twin(note="b")
    assert Outer(size=2) != Outer()
    assert Outer(size=2) != twin(size=2)  # another class: never equal, as a dataclass
    assert hash(StatusMap(blocked="held")) == hash(_twin(StatusMap)[0](blocked="held"))
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        hash(Outer())  # the list inside, as a frozen dataclass holding one


def test_a_record_is_frozen_as_a_dataclass_is() -> None:
    record, twin = Outer(), _twin(Outer)[0]()
    for target in (record, twin):
        with pytest.raises(FrozenInstanceError, match="cannot assign to field 'size'"):
            target.size = 2
        with pytest.raises(FrozenInstanceError, match="cannot delete field 'size'"):
            del target.size


def test_factories_give_each_record_its_own_value() -> None:
    first, second = Inner(), Inner()
    first.tags.append("a")
    assert second.tags == []


def test_replace_copies_with_changes_and_refuses_an_unknown_field() -> None:
    outer = Outer(size=3, note="n")
    assert outer.replace(size=4) == Outer(size=4, note="n")
    assert outer.replace(size=4).note == "n"
    twin = _twin(Outer)[0]
    assert repr(outer.replace(size=4)) == repr(replace(twin(size=3, note="n"), size=4))
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        outer.replace(colour=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        Outer(colour=1)  # type: ignore[call-arg]


def test_a_record_copies_and_pickles() -> None:
    outer = Outer(size=5, inner=Inner(name="n", tags=["t"]))
    assert copy.deepcopy(outer) == outer
    assert pickle.loads(pickle.dumps(outer)) == outer  # noqa: S301 - our own bytes


class Needs(Record):
    size: int
    name: str = "x"


def test_a_field_without_a_default_must_be_given() -> None:
    twin, _ = _twin(Needs)
    assert repr(Needs(size=2)) == repr(twin(size=2))
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'size'"):
        Needs()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"missing 1 required .*argument: 'size'"):
        twin(name="y")


class Counts(Record, frozen=False):
    seen: int = 0
    names: list[str] = field(default_factory=list)


def test_a_record_not_frozen_is_assigned_and_unhashable_as_such_a_dataclass() -> None:
    twin = make_dataclass("Counts", [("seen", int, field(default=0))])  # not frozen
    counts = Counts()
    counts.seen += 2
    assert counts == Counts(seen=2)
    assert repr(counts) == "Counts(seen=2, names=[])"
    with pytest.raises(TypeError, match="unhashable type: 'Counts'"):
        hash(counts)
    with pytest.raises(TypeError, match="unhashable type: 'Counts'"):
        hash(twin())
