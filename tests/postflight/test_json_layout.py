"""JSON written in a file's layout, bounded: ``dump_json`` is json.dumps byte for byte, at any
depth, and stops at its layout budget; ``bounded_indent`` keeps only sane indent units."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from postflightd.postflight.json_layout import (
    PLAIN_INDENT,
    LayoutBudget,
    LayoutTooLargeError,
    bounded_indent,
    dump_json,
)

_text = st.text(max_size=8)
_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | _text
)
_json = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_text | st.integers() | st.booleans() | st.none(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, database=None)
@given(
    value=_json,
    indent=st.sampled_from([None, "", " ", "  ", "    ", "\t", "\t\t"]),
    item_sep=st.sampled_from([",", ", "]),
    key_sep=st.sampled_from([":", ": "]),
    ensure_ascii=st.booleans(),
)
def test_dump_json_is_json_dumps(
    value: Any, indent: str | None, item_sep: str, key_sep: str, ensure_ascii: bool
) -> None:
    """Every layout the renderer copies from a file gives what json.dumps gives."""
    expected = json.dumps(
        value, indent=indent, separators=(item_sep, key_sep), ensure_ascii=ensure_ascii
    )
    got = dump_json(value, indent, item_sep=item_sep, key_sep=key_sep, ensure_ascii=ensure_ascii)
    assert got == expected


def test_continuation_lines_take_the_newline_and_base() -> None:
    value = {"a": [1, {"b": None}], "c": {}}
    got = dump_json(value, "\t", newline="\r\n", base="    ")
    assert got == json.dumps(value, indent="\t").replace("\n", "\r\n    ")


def deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_nesting_100000_deep_is_written_without_recursion() -> None:
    """json.dumps raises RecursionError here; dump_json walks the value without recursing."""
    value = deep_list(100_000)
    with pytest.raises(RecursionError):
        json.dumps(value)
    assert dump_json(value, None, item_sep=",") == "[" * 100_000 + "]" * 100_000


def test_the_budget_stops_the_layout_before_it_is_built() -> None:
    """300 levels at 2 spaces is ~90,000 characters of indentation for 600 of content."""
    value = deep_list(300)
    full = dump_json(value, "  ")
    layout = len(full) - 600
    assert dump_json(value, "  ", budget=LayoutBudget(layout)) == full
    with pytest.raises(LayoutTooLargeError):
        dump_json(value, "  ", budget=LayoutBudget(layout - 1))
    # On one line there is no layout to pay for.
    assert dump_json(value, None, budget=LayoutBudget(0)) == "[" * 300 + "]" * 300


def test_what_json_cannot_write_raises_as_json_dumps_does() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular"):
        dump_json(looped, "  ")
    with pytest.raises(ValueError):
        dump_json(10**5000, None)
    with pytest.raises(TypeError):
        dump_json({"a": object()}, None)


@pytest.mark.parametrize(
    ("unit", "kept"),
    [
        (" ", " "),
        ("    ", "    "),
        (" " * 8, " " * 8),
        ("\t", "\t"),
        ("\t\t", "\t\t"),
        (" " * 9, PLAIN_INDENT),
        (" " * 2000, PLAIN_INDENT),
        ("\t\t\t", PLAIN_INDENT),
        (" \t", PLAIN_INDENT),
        ("\u3000", PLAIN_INDENT),
        ("", PLAIN_INDENT),
    ],
)
def test_bounded_indent(unit: str, kept: str) -> None:
    assert bounded_indent(unit) == kept
