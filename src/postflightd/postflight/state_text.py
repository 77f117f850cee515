"""state.json text with its formatting kept: ``render_state`` and its splices.

Pure: the file's text, the document it was read from and the new document in, the new text
out. Only the values that changed are rewritten; key order, indentation, non-ASCII text and
line endings stay as the file had them, so a postflight diff touches only the task it changed.

The text is written by an agent as often as by a tool, so the layout copied from it is
bounded (``json_layout``): output stays in proportion to input. An indent unit wider than
``MAX_INDENT`` becomes two spaces, and the layout a rendering writes (line breaks and
indentation) may total at most ``layout_limit`` of the text's size; past it, the document is
written in json.dumps' plain two-space layout, or on one line when even that would pass it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from postflightd.postflight.json_layout import (
    PLAIN_INDENT,
    LayoutBudget,
    LayoutTooLargeError,
    bounded_indent,
    dump_json,
    layout_limit,
)

_WS: Final = " \t\n\r"
_DECODER: Final = json.JSONDecoder()
_KEY_SEP_RE: Final = re.compile(r'"\s*:( ?)')
_ITEM_SEP_RE: Final = re.compile(r'["\d\]}el],( ?)["\d\[{tfn-]')


@dataclass(frozen=True, slots=True)
class _Style:
    """How state.json is laid out (its indent, separators and escaping), to write a value
    the same way."""

    indent: str | None  # None: one-line JSON
    item_sep: str
    key_sep: str
    ensure_ascii: bool
    newline: str
    #: the layout the rendering using this style may still write (shared by derived styles)
    budget: LayoutBudget = field(compare=False)

    def dump(self, value: Any, base: str = "") -> str:
        """``value`` as JSON in this style, continuation lines prefixed with ``base``."""
        return dump_json(
            value,
            self.indent,
            # Between lines a comma alone, as json.dumps writes a file with an indent.
            item_sep=self.item_sep if self.indent is None else ",",
            key_sep=self.key_sep,
            ensure_ascii=self.ensure_ascii,
            newline=self.newline,
            base=base,
            budget=self.budget,
        )

    def compact(self, span: str) -> _Style:
        """This style on one line, with the separators ``span`` uses."""
        key = _KEY_SEP_RE.search(span)
        item = _ITEM_SEP_RE.search(span)
        return _Style(
            None,
            "," + item.group(1) if item else self.item_sep,
            ":" + key.group(1) if key else self.key_sep,
            self.ensure_ascii,
            self.newline,
            self.budget,
        )


class _IrregularError(Exception):
    """The text cannot be spliced safely: fall back to a full dump."""


def _detect_style(text: str, body: str, budget: LayoutBudget) -> _Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    # Keep \u escapes only when the file was written that way (Python's default dump).
    escaped = body.isascii() and re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", body) is not None
    if len(body) <= 2:
        # Empty, `{}` or `[]`: no layout to keep, so json.dumps' usual 2-space one.
        return _Style(PLAIN_INDENT, ", ", ": ", escaped, newline, budget)
    if "\n" not in body:
        return _Style(None, ", ", ": ", escaped, newline, budget).compact(body)
    indent = ""
    for line in body.split("\n")[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            indent = line[: len(line) - len(stripped)]
            break
    key = _KEY_SEP_RE.search(body)
    return _Style(
        bounded_indent(indent) if indent else indent,
        ", ",
        ":" + (key.group(1) if key else " "),
        escaped,
        newline,
        budget,
    )


def _decode(text: str, start: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _IrregularError from exc


@dataclass(frozen=True, slots=True)
class _Span:
    """Where one member of an object (or element of an array) is written."""

    head: int  # the key's opening quote (an element's start, in an array)
    start: int  # the value
    end: int
    value: Any
    key: str = ""
    #: the elements, when the value is an array that was already walked
    items: list[_Span] | None = None


_WS_RE: Final = re.compile(r"[ \t\n\r]*")


def _skip_ws(text: str, index: int) -> int:
    return _WS_RE.match(text, index).end()  # type: ignore[union-attr]  # `*` always matches


def _object_members(text: str, start: int, *, walk_arrays: bool = False) -> tuple[list[_Span], int]:
    """The members of the object at ``text[start]``, and the index after its ``}``.

    ``walk_arrays`` splits array values into their elements as it goes, so the big
    ``active_projects`` array is parsed once, not once whole and again element by element.
    """
    members: list[_Span] = []
    index = _skip_ws(text, start + 1)
    if text.startswith("}", index):
        return members, index + 1
    while True:
        if not text.startswith('"', index):
            raise _IrregularError
        head = index
        key, index = _decode(text, index)
        index = _skip_ws(text, index)
        if not text.startswith(":", index):
            raise _IrregularError
        value_start = _skip_ws(text, index + 1)
        if walk_arrays and text.startswith("[", value_start):
            items, value_end = _array_items(text, value_start)
            value: Any = [item.value for item in items]
            members.append(_Span(head, value_start, value_end, value, key, items))
        else:
            value, value_end = _decode(text, value_start)
            members.append(_Span(head, value_start, value_end, value, key))
        index = _skip_ws(text, value_end)
        if text.startswith(",", index):
            index = _skip_ws(text, index + 1)
        elif text.startswith("}", index):
            return members, index + 1
        else:
            raise _IrregularError


def _array_items(text: str, start: int) -> tuple[list[_Span], int]:
    """The elements of the array at ``text[start]``, and the index after its ``]``."""
    items: list[_Span] = []
    index = _skip_ws(text, start + 1)
    if text.startswith("]", index):
        return items, index + 1
    while True:
        value, end = _decode(text, index)
        items.append(_Span(index, index, end, value))
        index = _skip_ws(text, end)
        if text.startswith(",", index):
            index = _skip_ws(text, index + 1)
        elif text.startswith("]", index):
            return items, index + 1
        else:
            raise _IrregularError


def _line_indent(text: str, index: int) -> str:
    """The leading whitespace of the line holding ``text[index]``."""
    line = text[text.rfind("\n", 0, index) + 1 : index]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _own_line(text: str, index: int) -> bool:
    return not text[text.rfind("\n", 0, index) + 1 : index].strip(" \t")


def _same(old: Any, new: Any) -> bool:
    # 1 == 1.0 == True in Python, but they are written differently.
    return old is new or (type(old) is type(new) and old == new)


def _context_style(span: str, value: Any, inherited: _Style) -> _Style:
    """The style of a value's contents: its own layout when it is a non-empty container
    (a one-line object stays on one line), else the layout around it."""
    if isinstance(value, (dict, list)) and value and "\n" not in span:
        return inherited.compact(span)
    return inherited


def _appended(text: str, last: _Span, dumped: Sequence[str], style: _Style) -> str:
    """Text of members or elements appended after the last one, laid out like it."""
    if style.indent is not None and _own_line(text, last.head):
        lead = "," + style.newline + _line_indent(text, last.head)
    else:
        lead = style.item_sep
    style.budget.spend(len(lead) * len(dumped))
    return "".join(lead + part for part in dumped)


def _splice_spans(
    text: str, start: int, spans: Sequence[_Span], news: Sequence[Any], style: _Style
) -> list[str]:
    """The container's text up to the end of its last span, each span given its new value."""
    parts = [text[start : spans[0].start]]
    for position, (span, new) in enumerate(zip(spans, news, strict=True)):
        if position:
            parts.append(text[spans[position - 1].end : span.start])
        parts.append(_splice(text, span, new, style))
    return parts


def _splice_object(text: str, span: _Span, new: dict[str, Any], style: _Style) -> str | None:
    members, _ = _object_members(text, span.start)
    keys = [member.key for member in members]
    # Duplicate keys, removed keys or a new order: the caller rewrites the whole value.
    if len(set(keys)) != len(keys) or list(new)[: len(keys)] != keys:
        return None
    return _splice_container(text, span, members, [new[key] for key in keys], style, new)


def _splice_array(text: str, span: _Span, new: list[Any], style: _Style) -> str | None:
    items = span.items if span.items is not None else _array_items(text, span.start)[0]
    # Removed elements: the caller rewrites the whole array.
    if len(new) < len(items):
        return None
    return _splice_container(text, span, items, new, style, None)


def _splice_container(
    text: str,
    span: _Span,
    children: list[_Span],
    new: Sequence[Any],
    style: _Style,
    new_object: dict[str, Any] | None,
) -> str:
    """``span`` rewritten child by child, with ``new``'s extra members or elements appended."""
    parts = _splice_spans(text, span.start, children, new[: len(children)], style)
    last = children[-1]
    base = _line_indent(text, last.head)
    if new_object is not None:
        extra = list(new_object)[len(children) :]
        dumped = [style.dump(k) + style.key_sep + style.dump(new_object[k], base) for k in extra]
    else:
        # A new element looks like its predecessor: one line if that one was.
        sibling = _context_style(text[last.start : last.end], last.value, style)
        dumped = [sibling.dump(value, base) for value in new[len(children) :]]
    if dumped:
        parts.append(_appended(text, last, dumped, style))
    parts.append(text[last.end : span.end])
    return "".join(parts)


def _splice(text: str, span: _Span, new: Any, around: _Style) -> str:
    """The text of ``new`` for the value written at ``span``.

    ``around`` is the layout of the enclosing container. Unchanged values keep their bytes;
    changed containers of the same shape are spliced child by child; anything else is
    dumped in the layout of its place.
    """
    old = span.value
    if _same(old, new):
        return text[span.start : span.end]
    own = _context_style(text[span.start : span.end], old, around)
    spliced: str | None = None
    if isinstance(old, dict) and old and isinstance(new, dict):
        spliced = _splice_object(text, span, new, own)
    elif isinstance(old, list) and old and isinstance(new, list):
        spliced = _splice_array(text, span, new, own)
    if spliced is not None:
        return spliced
    return own.dump(new, _line_indent(text, span.start))


def render_state(original_text: str, original: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The text of ``new`` formatted like ``original_text``, the file ``original`` was read from.

    Key order, indentation (spaces or tabs), non-ASCII text and the trailing newline are kept,
    and only the values that changed are rewritten, so a postflight diff touches only the
    task it changed. The splice compares ``new`` with the text itself, so an ``original``
    that does not match the text cannot corrupt the result.

    Output stays in proportion to input: the layout written is at most
    ``layout_limit(len(original_text))`` characters in the file's own layout or in the plain
    two-space one; past that, ``new`` is written on one line.
    """
    start = _skip_ws(original_text, 0)
    end = len(original_text.rstrip(_WS))
    body = original_text[start:end]
    limit = layout_limit(len(original_text))
    style = _detect_style(original_text, body, LayoutBudget(limit))
    trailing = style.newline if end < len(original_text) or not body else ""
    new_doc = dict(new)
    try:
        return _render(original_text, start, end, original, new_doc, style, trailing)
    except LayoutTooLargeError:
        pass
    # The file's layout would grow out of proportion (an indented line that deep, values
    # nested that deep): json.dumps' plain layout, else one line, which has no layout at all.
    plain = _Style(PLAIN_INDENT, ", ", ": ", style.ensure_ascii, style.newline, LayoutBudget(limit))
    try:
        return plain.dump(new_doc) + trailing
    except LayoutTooLargeError:
        return replace(plain, indent=None).dump(new_doc) + trailing


def _render(
    text: str,
    start: int,
    end: int,
    original: Mapping[str, Any],
    new: dict[str, Any],
    style: _Style,
    trailing: str,
) -> str:
    try:
        spliced = _splice_changed_tasks(text, original, new, style)
        if spliced is not None:
            return spliced
        spliced = _canonical(text[start:end], original, new, style)
        if spliced is not None:
            return text[:start] + spliced + text[end:]
        spliced = _splice_document(text, start, end, new, style)
    except (_IrregularError, RecursionError):
        # RecursionError: the splice follows the nesting of what changed, and comparing or
        # decoding values nested deeply enough runs out of stack; the dump below does not.
        spliced = None
    if spliced is None:
        return style.dump(new) + trailing
    return text[:start] + spliced + text[end:]


#: Above this many changed tasks the full walk of the document is as cheap as searching.
_FAST_SPLICE_MAX: Final = 8


def _splice_changed_tasks(
    text: str, original: Mapping[str, Any], new: dict[str, Any], style: _Style
) -> str | None:
    """The common postflight, fast: only a few ``active_projects`` entries changed.

    Walking every element of a 1,000-task file to find their spans costs ~15 ms; finding the
    changed tasks by their ``"project_number"`` costs ~1 ms. Every guess is checked: the
    object found must decode to exactly the old task, and its replacement to exactly the new
    one; otherwise None, and the full walk decides.
    """
    old_tasks, new_tasks = original.get("active_projects"), new.get("active_projects")
    if (
        list(original) != list(new)
        or not isinstance(old_tasks, list)
        or not isinstance(new_tasks, list)
        or len(old_tasks) != len(new_tasks)
        or any(k != "active_projects" and not _same(original[k], new[k]) for k in original)
    ):
        return None
    pairs = zip(old_tasks, new_tasks, strict=True)
    changed = [i for i, (a, b) in enumerate(pairs) if not _same(a, b)]
    if not changed or len(changed) > _FAST_SPLICE_MAX:
        return None
    pieces: list[tuple[int, int, str, int]] = []
    for i in changed:
        number = old_tasks[i].get("project_number") if isinstance(old_tasks[i], dict) else None
        if not isinstance(number, int) or isinstance(number, bool):
            return None
        hits = list(re.finditer(rf'"project_number"\s*:\s*{number}(?![\d.eE])', text))
        if len(hits) != 1:
            return None
        brace = text.rfind("{", 0, hits[0].start())
        if brace < 0 or text[brace + 1 : hits[0].start()].strip():
            return None  # project_number is not the object's first key: no cheap guess
        value, end = _decode(text, brace)
        if value != old_tasks[i]:
            return None
        replacement = _splice(text, _Span(brace, brace, end, value), new_tasks[i], style)
        pieces.append((brace, end, replacement, i))
    pieces.sort()
    parts, cursor = [], 0
    for start, end, replacement, i in pieces:
        if start < cursor:
            return None
        # Each span held exactly one JSON value (the old task, decoded above); the document
        # stays valid and equal to ``new`` when each replacement is that task's new value.
        # Checking the replacements costs microseconds; re-parsing the file costs ~5 ms.
        try:
            if json.loads(replacement) != new_tasks[i]:
                return None
        except ValueError:
            return None
        parts += [text[cursor:start], replacement]
        cursor = end
    return "".join([*parts, text[cursor:]])


def _canonical(
    body: str, original: Mapping[str, Any], new: dict[str, Any], style: _Style
) -> str | None:
    """Many tasks changed in a file in the usual layout of jq and json.dumps: all of ``new``
    dumped in C, in about 3 ms where splicing costs ~0.2 ms a changed task.

    Taken only when dumping ``original`` the same way gives ``body`` exactly (so it is the
    file's own layout, values included), and when the dump of ``new`` reads back as ``new``
    (msgspec writes NaN as null; a number it cannot write raises); otherwise None, and the
    splice decides. A window this short matters: against a writer that ignores the lock,
    state.json is replaced only if it is unchanged from the read to the swap.
    """
    indent = style.indent
    if not indent or indent.strip(" ") or style.newline != "\n" or style.ensure_ascii:
        return None
    # Imported here: the few-task postflights (the hook's) never pay its import (~11 ms).
    import msgspec

    try:
        if msgspec.json.format(msgspec.json.encode(original), indent=len(indent)) != (
            body.encode("utf-8")
        ):
            return None
        compact = msgspec.json.encode(new)
        out = msgspec.json.format(compact, indent=len(indent))
        # Layout written, counted generously (every character the indent adds): as bounded
        # as the splice's.
        if len(out) - len(compact) > style.budget.left or msgspec.json.decode(out) != new:
            return None
    except (msgspec.EncodeError, msgspec.DecodeError, OverflowError, RecursionError):
        return None
    except UnicodeEncodeError:
        return None  # a lone surrogate: json.dumps writes it escaped, the splice decides
    return out.decode("utf-8")


def _splice_document(
    text: str, start: int, end: int, new: dict[str, Any], style: _Style
) -> str | None:
    members, object_end = _object_members(text, start, walk_arrays=True)
    # Trailing garbage or an empty object: nothing worth keeping.
    if object_end != end or not members:
        return None
    keys = [member.key for member in members]
    if len(set(keys)) != len(keys) or list(new)[: len(keys)] != keys:
        return None
    document = _Span(start, start, end, {member.key: member.value for member in members})
    return _splice_container(text, document, members, [new[key] for key in keys], style, new)
