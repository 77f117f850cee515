"""Frozen records: a dataclass's behaviour without its cost at import.

``@dataclass(frozen=True)`` writes each class's ``__init__``, ``__eq__``, ``__hash__``,
``__repr__``, ``__setattr__`` and ``__delattr__`` as source and compiles it when the class is
made: 0.5 to 1 ms a class, paid by every command that imports it. ``Record`` holds those
methods once, reading each class's fields from ``_FIELDS``; a subclass is declared as a frozen
dataclass is (annotated fields with defaults, ``dataclasses.field`` for a factory or
``compare=False``), behaves as one (equality and hashing on the compared fields, the same
``repr``, ``FrozenInstanceError`` on assignment; ``frozen=False`` in the class statement for
one whose fields are assigned), and type checkers read it as one (``dataclass_transform``).
Fields are given as keywords only. Where a
library wants a real dataclass (pydantic validating a configuration file), ``dataclass_twin``
makes one with the same name and fields, when it is needed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, FrozenInstanceError, field, make_dataclass
from typing import Any, ClassVar, Self, dataclass_transform, get_type_hints


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
class Record:
    """A frozen record whose fields are its subclass's annotations (see the module)."""

    __slots__ = ()
    #: the fields, in order, each with its default (a value, or a ``field(...)``)
    _FIELDS: ClassVar[dict[str, Any]] = {}
    #: the fields equality and hashing compare (``field(compare=False)`` is not)
    _COMPARED: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, *, frozen: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not frozen:
            # ``class Tally(Record, frozen=False)``: fields assignable, and so not hashable,
            # as a dataclass that is not frozen.
            cls.__setattr__ = object.__setattr__  # type: ignore[method-assign,assignment]
            cls.__delattr__ = object.__delattr__  # type: ignore[method-assign]
            cls.__hash__ = None  # type: ignore[assignment]
        names = inspect.get_annotations(cls)
        cls._FIELDS = {name: cls.__dict__.get(name, MISSING) for name in names}
        cls._COMPARED = tuple(
            name
            for name, default in cls._FIELDS.items()
            if not isinstance(default, Field) or default.compare
        )
        for name, default in cls._FIELDS.items():
            if isinstance(default, Field):
                delattr(cls, name)  # each instance has its own value

    def __init__(self, **values: Any) -> None:
        for name in values:
            if name not in self._FIELDS:
                raise TypeError(
                    f"{type(self).__name__}.__init__() got an unexpected keyword argument {name!r}"
                )
        for name, default in self._FIELDS.items():
            if name in values:
                value = values[name]
            elif default is MISSING or (
                isinstance(default, Field)
                and default.default is MISSING
                and default.default_factory is MISSING
            ):
                raise TypeError(
                    f"{type(self).__name__}.__init__() missing 1 required keyword-only "
                    f"argument: {name!r}"
                )
            elif not isinstance(default, Field):
                value = default
            elif default.default_factory is MISSING:
                value = default.default
            else:
                value = default.default_factory()
            object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``dataclasses.replace`` for a record)."""
        return type(self)(**{**self.as_mapping(), **changes})

    def as_mapping(self) -> dict[str, Any]:
        """The record's fields and values."""
        return {name: getattr(self, name) for name in self._FIELDS}

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._COMPARED)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"{type(self).__qualname__}({values})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def dataclass_twin(
    record: type[Record],
    twins: dict[type[Record], type[Any]],
    namespace: Mapping[str, Any] | None = None,
) -> type[Any]:
    """A frozen slotted dataclass with ``record``'s name and fields (``namespace`` added to
    its class body), a record nested in it (a field's type or factory) by its own twin.

    ``twins`` collects every twin made, by record, and is asked first: one twin a record.
    """
    if record in twins:
        return twins[record]
    hints = get_type_hints(record, include_extras=True)
    specs: list[tuple[str, Any, Any]] = []
    for name, default in record._FIELDS.items():
        kind = hints[name]
        if isinstance(kind, type) and issubclass(kind, Record):
            kind = dataclass_twin(kind, twins, namespace)
        if isinstance(default, Field):
            factory: Callable[[], Any] | Any = default.default_factory
            if isinstance(factory, type) and issubclass(factory, Record):
                factory = dataclass_twin(factory, twins, namespace)
            spec = field(default=default.default, default_factory=factory, compare=default.compare)
        else:
            spec = field(default=default)  # MISSING: a field without a default
        specs.append((name, kind, spec))
    twin = make_dataclass(
        record.__name__, specs, namespace=dict(namespace or {}), frozen=True, slots=True
    )
    twins[record] = twin
    return twin


def from_twin(value: Any, records: Mapping[type[Any], type[Record]]) -> Any:
    """``value``, a twin's instance (``dataclass_twin``; ``records``: each twin's record) made
    the record it stands for, nested twins too; any other value as it is."""
    record = records.get(type(value))
    if record is None:
        return value
    return record(**{name: from_twin(getattr(value, name), records) for name in record._FIELDS})
