"""The typed value of a clean document (``rules.clean``), built without a validator.

A clean document is of the models' shape exactly: every key known, each value of its type,
artifacts given as objects. What the models (or their stored schema, ``models.metadata_core``)
make of one is its own values, the status as a ``Status``, and None for each field it leaves
out: ``typed_value`` builds that from ``clean.SHAPE``, read by attribute as the postflight
reads it, so that applying a clean file (most files) loads no validator (pydantic-core and the
stored schema: about a third of a stop's start-up). ``tests/rules/test_typed_value.py`` holds
the outcome it applies to the models' for random clean documents.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from postflightd.models.terms import Status
from postflightd.rules.clean import SHAPE, STATUS, TEXTS


def typed_value(doc: dict[str, Any]) -> Any:
    """The typed value of ``doc``, which ``clean.is_clean`` accepts (anything else: the
    validator's)."""
    return _object("", doc)


def _object(kind: str, value: dict[str, Any]) -> SimpleNamespace:
    out = SimpleNamespace()
    for name, (value_kind, _) in SHAPE[kind].items():
        setattr(out, name, _value(value_kind, value.get(name)))
    # What the validators keep of keys the contract does not know: a clean document has none.
    out.__pydantic_extra__ = {}
    return out


def _value(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == STATUS:
        return Status(value)
    if kind == TEXTS:
        return list(value)
    if kind.startswith("obj:"):
        return _object(kind[4:], value)
    if kind.startswith("list:"):
        return [_object(kind[5:], item) for item in value]
    return value
