"""TODO.md edits (SPEC 3): one task's Status, link and Completed lines, every other byte kept.

A task's section starts at a heading ``### {N}. Title`` (``##`` and zero-padded numbers are
accepted too) and runs to the next heading of the same or a higher level. Headings inside
fenced code blocks are not headings: task descriptions often quote shell scripts whose
``# comments`` would otherwise end the section early.
"""

from __future__ import annotations

import re
from typing import Final

from postflightd.postflight import TodoEdit

_HEADING: Final = re.compile(r"^(#{1,6})[ \t]+(?:(\d+)\.(?:[ \t]|$))?")
_FENCE: Final = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
#: ``- **Label**: value`` or ``* **Label:** value``; groups: prefix, label, separator, space, value
_FIELD: Final = re.compile(
    r"^([ \t]*[-*+][ \t]+\*\*)([A-Za-z][A-Za-z ]*?)(\*\*:|:\*\*)([ \t]*)(.*)$"
)
_MARKER: Final = re.compile(r"\[[^\[\]]*\]")

#: Where new lines go, in this order, and which existing lines they follow.
_LINK_ORDER: Final = ("Research", "Plan", "Summary", "Completed")
_ANCHORS: Final = frozenset({"status", "language", *(label.lower() for label in _LINK_ORDER)})


def _section(lines: list[str], task: int) -> tuple[int, int] | None:
    """``(heading index, end index)`` of the task's section, or None."""
    start: int | None = None
    level = 0
    fence: str | None = None
    first = 0
    if lines and lines[0].rstrip("\r") == "---":
        # YAML front matter: its `# comments` are not headings.
        for close in range(1, len(lines)):
            if lines[close].rstrip("\r") in {"---", "..."}:
                first = close + 1
                break
    for index in range(first, len(lines)):
        line = lines[index].rstrip("\r")
        fence_match = _FENCE.match(line)
        if fence_match is not None:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        heading = _HEADING.match(line) if fence is None else None
        if heading is None:
            continue
        depth = len(heading.group(1))
        if start is not None and depth <= level:
            return start, index
        number = heading.group(2)
        if start is None and number is not None and int(number) == task and depth >= 2:
            start, level = index, depth
    return None if start is None else (start, len(lines))


def _field(line: str) -> re.Match[str] | None:
    return _FIELD.match(line.rstrip("\r"))


class _Section:
    """The lines of one task's section, edited in place."""

    def __init__(self, lines: list[str], start: int, end: int, cr: str) -> None:
        self.lines = lines
        self.start = start
        self.end = end
        self.cr = cr
        #: lower-case label -> index of its first field line in the section
        self.fields: dict[str, int] = {}
        for index in range(start + 1, end):
            match = _field(lines[index])
            if match is not None:
                self.fields.setdefault(match.group(2).strip().lower(), index)

    def value(self, label: str) -> str | None:
        index = self.fields.get(label.lower())
        match = _field(self.lines[index]) if index is not None else None
        return match.group(5) if match is not None else None

    def set(self, label: str, value: str) -> None:
        """Replace the value of the label's line, or insert the line when there is none."""
        index = self.fields.get(label.lower())
        match = _field(self.lines[index]) if index is not None else None
        if index is None or match is None:
            self._insert(label, value)
            return
        line = self.lines[index]
        ending = "\r" if line.endswith("\r") else ""
        prefix, name, separator, space = match.group(1, 2, 3, 4)
        self.lines[index] = f"{prefix}{name}{separator}{space or ' '}{value}{ending}"

    def _insert(self, label: str, value: str) -> None:
        """Insert ``- **label**: value`` after the Status/Language/link lines."""
        anchors = [index for key, index in self.fields.items() if key in _ANCHORS]
        after = max(anchors or self.fields.values() or [self.start])
        model = _field(self.lines[after])
        prefix, separator = ("- **", "**:") if model is None else model.group(1, 3)
        new_line = f"{prefix}{label}{separator} {value}"
        if after == len(self.lines) - 1:
            # The file ends on that line without a newline: the new line becomes the last one.
            self.lines[after] += self.cr
        else:
            new_line += self.cr
        self.lines.insert(after + 1, new_line)
        self.fields = {k: i + 1 if i > after else i for k, i in self.fields.items()}
        self.fields[label.lower()] = after + 1
        self.end += 1


def apply_todo_edit(text: str, edit: TodoEdit) -> str | None:
    """``text`` with ``edit`` applied to its task's section; None when it has no section."""
    lines = text.split("\n")
    found = _section(lines, edit.task)
    if found is None:
        return None
    section = _Section(lines, *found, cr="\r" if "\r\n" in text else "")
    if edit.marker is not None:
        marker = f"[{edit.marker}]"
        current = section.value("Status")
        old = _MARKER.search(current) if current is not None else None
        if current is None or not current.strip():
            section.set("Status", marker)
        elif old is None:
            section.set("Status", f"{marker} {current}")
        else:
            section.set("Status", current[: old.start()] + marker + current[old.end() :])
    values = dict(edit.links)
    if edit.completed is not None:
        values["Completed"] = edit.completed
    for label in sorted(values, key=lambda name: (name not in _LINK_ORDER, _order(name))):
        current = section.value(label)
        if current is None or not _already_linked(current, values[label]):
            section.set(label, values[label])
    return "\n".join(lines)


def _order(label: str) -> int:
    return _LINK_ORDER.index(label) if label in _LINK_ORDER else len(_LINK_ORDER)


def _already_linked(current: str, link: str) -> bool:
    """The line already links this target (it may list several reports): leave it as it is."""
    target = re.search(r"\]\((.*)\)$", link)
    return current.strip() == link or (target is not None and f"({target.group(1)})" in current)
