"""JSON written in a file's own layout, with that layout bounded: ``dump_json`` and its limits.

Pure. A project file postflightd rewrites (state.json, ``.claude/settings.json``) lends its
layout to the new text: its indent unit, separators, line endings. An agent writes those files
as often as a tool does, so what is copied is bounded, and output stays in proportion to input:

* an indent unit wider than ``MAX_INDENT`` becomes ``PLAIN_INDENT``; the unit is written once
  per nesting level on every new line, so 2,000 spaces on a file's first indented line would
  make the output grow with the unit times the depth squared;
* the layout a rewrite writes (line breaks and the indentation after them) is counted against
  a ``LayoutBudget`` of ``layout_limit`` of the file's size: past it, ``dump_json`` raises
  ``LayoutTooLargeError`` before the text is built, and the caller writes less layout or
  refuses;
* ``dump_json`` walks the value without recursion, so no depth of nesting raises
  RecursionError (``json.dumps`` with an indent recurses once per level).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, Final

#: The widest indent unit copied from a file, by its character.
MAX_INDENT: Final = {" ": 8, "\t": 2}
#: What a wider (or mixed) unit becomes: json.dumps' usual indent.
PLAIN_INDENT: Final = "  "
#: The layout a rewrite may write is at most this multiple of the file's size, plus
#: ``LAYOUT_SLACK``: a re-rendered regular file has about as much layout as it had, and a
#: postflight adds a few lines to one task.
LAYOUT_FACTOR: Final = 2
LAYOUT_SLACK: Final = 16 * 1024


def layout_limit(size: int) -> int:
    """How many characters of layout rewriting a text of ``size`` characters may write."""
    return LAYOUT_FACTOR * size + LAYOUT_SLACK


def bounded_indent(indent: str) -> str:
    """``indent`` when it is a sane unit (1 to 8 spaces, 1 or 2 tabs), else ``PLAIN_INDENT``."""
    if indent and len(set(indent)) == 1 and len(indent) <= MAX_INDENT.get(indent[0], 0):
        return indent
    return PLAIN_INDENT


class LayoutTooLargeError(ValueError):
    """Writing the value in this layout would pass the layout budget."""


class LayoutBudget:
    """The characters of layout a rewrite may still write, shared by all its dumps."""

    __slots__ = ("left",)

    def __init__(self, chars: int = sys.maxsize) -> None:
        self.left = chars

    def spend(self, chars: int) -> None:
        self.left -= chars
        if self.left < 0:
            raise LayoutTooLargeError("the layout would pass its limit")


def dump_json(
    value: Any,
    indent: str | None,
    *,
    item_sep: str | None = None,
    key_sep: str = ": ",
    ensure_ascii: bool = True,
    newline: str = "\n",
    base: str = "",
    budget: LayoutBudget | None = None,
) -> str:
    """``json.dumps(value, indent=indent, separators=(item_sep, key_sep),
    ensure_ascii=ensure_ascii)``, byte for byte, with each line break written as ``newline``
    followed by ``base`` (the indentation of the line the value starts on). ``item_sep``
    defaults as json.dumps' does: ``","`` with an indent, else ``", "``.

    Each line break and its indentation is charged to ``budget`` as it is written: past it,
    LayoutTooLargeError. Raises what json.dumps raises for a value it cannot write
    (ValueError for an integer past the conversion limit or a circular reference, TypeError
    for a value that is not JSON).
    """
    spend = (budget or LayoutBudget()).spend
    encode_str = encode_basestring_ascii if ensure_ascii else encode_basestring
    if item_sep is None:
        item_sep = ", " if indent is None else ","
    breaks: list[str] = []  # breaks[level]: a line break and the indentation of that level

    def line_break(level: int) -> str:
        while len(breaks) <= level:
            breaks.append(newline + base + (indent or "") * len(breaks))
        spend(len(breaks[level]))
        return breaks[level]

    parts: list[str] = []
    append = parts.append
    #: the containers being written, outermost first: their children left, is it an object,
    #: its id (a container inside itself is a circular reference, as json.dumps says)
    stack: list[tuple[Iterator[Any], bool, int]] = []
    open_ids: set[int] = set()
    item = value
    while True:
        if isinstance(item, (dict, list, tuple)) and item:
            marker = id(item)
            if marker in open_ids:
                raise ValueError("Circular reference detected")
            open_ids.add(marker)
            is_object = isinstance(item, dict)
            append("{" if is_object else "[")
            children: Iterator[Any] = iter(item.items() if isinstance(item, dict) else item)
            stack.append((children, is_object, marker))
            child = next(children)
        else:
            append(_leaf_text(item, encode_str))
            # The next child of the innermost open container, closing those that are done.
            while stack:
                children, is_object, marker = stack[-1]
                child = next(children, _DONE)
                if child is not _DONE:
                    append(item_sep)
                    break
                stack.pop()
                open_ids.discard(marker)
                if indent is not None:
                    append(line_break(len(stack)))
                append("}" if is_object else "]")
            else:
                return "".join(parts)
        if indent is not None:
            append(line_break(len(stack)))
        if is_object:
            key, item = child
            append(encode_str(_key_text(key)))
            append(key_sep)
        else:
            item = child


_DONE: Final = object()


def _leaf_text(value: object, encode_str: Callable[[str], str]) -> str:
    """A scalar or an empty container as json.dumps writes it."""
    if isinstance(value, str):
        return encode_str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)  # ValueError past the 4,300-digit limit, as json.dumps
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _key_text(key: object) -> str:
    """An object key as json.dumps writes it, before quoting."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float_text(key)
    if key is True or key is False or key is None:
        return json.dumps(key)
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
