"""Is a metadata document *clean*: of the model's shape, with nothing the field rules flag?

Most files an agent writes are clean: every key known, every field the contract asks for
present, each value of its type, no text blank, artifacts given as objects. For those the
generic passes of validation (the model's type check, PF200/PF201; the blank and asked-for
fields, PF206/PF207; unknown fields, PF205) find nothing, and checking that in one walk costs a
fifth of running them: a scan of 10,000 files, most of them clean, is spent mostly in those
passes otherwise. ``is_clean`` answers only yes or "look closer": a document it does not
accept goes through every pass as before, so a finding is always worded by the pass that owns
it. What it accepts, the model accepts too: ``SHAPE`` is generated from the models
(``models.metadata_fields``), and ``tests/rules/test_clean.py`` checks it against the models
field by field, and on random and mutated documents that a clean one gets no finding from the
passes it stands in for.

A document clean but for keys the contract does not know (``is_clean_but_for_extras``)
skips the same passes but the unknown-field one, which reports those keys.

No pydantic here: a scan of clean files never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from postflightd.models.metadata_fields import SHAPE
from postflightd.models.terms import Status

__all__ = ["SHAPE", "is_clean", "is_clean_but_for_extras", "object_check"]

#: A value check: True when the value is certainly fine where it stands.
Check = Callable[[Any], bool]

#: Value kinds of ``SHAPE`` (``models.metadata.field_shape`` names them): text (a string with
#: something but whitespace in it), an integer (not a boolean), a number, a boolean, one of the
#: statuses, a list of text, an object of a kind (``obj:KIND``) or a list of them
#: (``list:KIND``). ``SHAPE`` itself, kind -> field -> (value kind, required), is generated from
#: the models (``models.metadata_fields``): "required" is what the model requires plus what
#: the contract asks for (a missing one is a PF207 warning, so a clean document has it). Null
#: is never clean: an optional field is either absent or of its type.
TEXT: Final = "text"
INT: Final = "int"
NUMBER: Final = "number"
BOOL: Final = "bool"
STATUS: Final = "status"
TEXTS: Final = "texts"

#: The status values; "completed" is not one (PF203).
STATUSES: Final = frozenset(status.value for status in Status)


def _text(value: Any) -> bool:
    # Not blank: not empty and not all whitespace (what ``strip`` would leave empty, asked
    # without copying the text).
    return type(value) is str and value != "" and not value.isspace()


def _int(value: Any) -> bool:
    return type(value) is int


def _number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _bool(value: Any) -> bool:
    return type(value) is bool


def _status(value: Any) -> bool:
    return type(value) is str and value in STATUSES


def _texts(value: Any) -> bool:
    if type(value) is not list:
        return False
    # Loops rather than all() over a generator here and below: a generator a call is a tenth
    # of the check's cost, and this runs for every file of a scan.
    for item in value:  # noqa: SIM110
        if type(item) is not str or item == "" or item.isspace():
            return False
    return True


_SCALARS: Final[Mapping[str, Check]] = {
    TEXT: _text,
    INT: _int,
    NUMBER: _number,
    BOOL: _bool,
    STATUS: _status,
    TEXTS: _texts,
}


def _list_of(check: Check) -> Check:
    def each(value: Any) -> bool:
        if type(value) is not list:
            return False
        for item in value:  # noqa: SIM110
            if not check(item):
                return False
        return True

    return each


Shape = Mapping[str, Mapping[str, tuple[str, bool]]]


def _value_check(kind: str, extras: bool, shape: Shape) -> Check:
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        return scalar
    if kind.startswith("obj:"):
        return object_check(kind[4:], extras=extras, shape=shape)
    if kind.startswith("list:"):
        return _list_of(object_check(kind[5:], extras=extras, shape=shape))
    raise ValueError(f"unknown value kind {kind!r} in SHAPE")


def object_check(kind: str, *, extras: bool = False, shape: Shape = SHAPE) -> Check:
    """The check of an object of ``kind`` (a key of ``shape``, by default ``SHAPE``), built
    once: one set comparison for the keys, then one call per value. ``extras``: keys the
    contract does not know are let be, at any depth (the model keeps them; PF205 reports
    them)."""
    fields = shape[kind]
    known = frozenset(fields)
    required = frozenset(name for name, (_, needed) in fields.items() if needed)
    checks = {
        name: _value_check(value_kind, extras, shape) for name, (value_kind, _) in fields.items()
    }

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return False
        keys = value.keys()
        if not (keys <= known and required <= keys):
            return False
        for name, item in value.items():  # noqa: SIM110
            if not checks[name](item):
                return False
        return True

    def check_known(value: Any) -> bool:
        if type(value) is not dict or not required <= value.keys():
            return False
        for name, item in value.items():
            known_check = checks.get(name)
            if known_check is not None and not known_check(item):
                return False
        return True

    return check_known if extras else check


#: ``is_clean(doc)``: True when ``doc`` is a clean metadata document (see the module's text).
is_clean: Final[Check] = object_check("")
#: ``is_clean_but_for_extras(doc)``: clean, were its unknown keys taken out. Such a document
#: gets only the unknown-field findings (PF205) from the passes ``is_clean`` stands in for.
is_clean_but_for_extras: Final[Check] = object_check("", extras=True)
