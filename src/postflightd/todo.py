"""TODO.md edits (SPEC 3): one task's Status, link and Completed lines, every other byte kept.

A task's section starts at a heading ``### {N}. Title`` (``##`` and zero-padded numbers are
accepted too) and runs to the next heading of the same or a higher level. Headings inside
fenced code blocks are not headings: task descriptions often quote shell scripts whose
``# comments`` would otherwise end the section early.

``apply_todo_edits`` applies a whole group commit's edits in one pass: the file is split
once, every task section is indexed once, and each edit works on its own section's lines,
so 1,000 edits to a 1,000-task TODO.md cost about as much as reading it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Final

from postflightd.postflight import TodoEdit

_HEADING: Final = re.compile(r"^(#{1,6})[ \t]+(?:(\d+)\.(?:[ \t]|$))?")
_FENCE: Final = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
#: ``- **Label**: value`` or ``* **Label:** value``; groups: prefix, label, separator, space, value
_FIELD: Final = re.compile(
    r"^([ \t]*[-*+][ \t]+\*\*)([A-Za-z][A-Za-z ]*?)(\*\*:|:\*\*)([ \t]*)(.*)$"
)
_MARKER: Final = re.compile(r"\[[^\[\]]*\]")
#: What a heading or fence line starts with (a fence may follow spaces: checked apart).
_MAYBE_SPECIAL: Final = ("#", "`", "~")
_FIRST_CHARS: Final = frozenset({"#", "`", "~", " ", "\t"})

#: Where new lines go, in this order, and which existing lines they follow.
_LINK_ORDER: Final = ("Research", "Plan", "Summary", "Completed")
_ANCHORS: Final = frozenset({"status", "language", *(label.lower() for label in _LINK_ORDER)})


def _body_start(lines: list[str]) -> int:
    """Index of the first line after the YAML front matter (0 when there is none)."""
    if lines and lines[0].rstrip("\r") == "---":
        # YAML front matter: its `# comments` are not headings.
        for close in range(1, len(lines)):
            if lines[close].rstrip("\r") in {"---", "..."}:
                return close + 1
    return 0


def _headings(lines: list[str]) -> Iterator[tuple[int, int, int | None]]:
    """``(line index, level, task number or None)`` of every heading outside front matter
    and code fences."""
    fence: str | None = None
    body = _body_start(lines)
    # A comprehension picks the few lines that can be headings or fences: the per-line work
    # below is what a 1,000-task TODO.md costs on every postflight.
    maybe = [i for i, line in enumerate(lines) if line[:1] in _FIRST_CHARS and i >= body]
    for index in maybe:
        line = lines[index]
        if not line.startswith(_MAYBE_SPECIAL) and not line.lstrip(" \t").startswith(("`", "~")):
            continue
        line = line.rstrip("\r")
        fence_match = _FENCE.match(line)
        if fence_match is not None:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        heading = _HEADING.match(line) if fence is None else None
        if heading is not None:
            number = heading.group(2)
            yield index, len(heading.group(1)), None if number is None else int(number)


def _section(lines: list[str], task: int) -> tuple[int, int] | None:
    """``(heading index, end index)`` of the task's section, or None."""
    start: int | None = None
    level = 0
    for index, depth, number in _headings(lines):
        if start is not None and depth <= level:
            return start, index
        if start is None and number == task and depth >= 2:
            start, level = index, depth
    return None if start is None else (start, len(lines))


def _index(lines: list[str]) -> dict[int, list[int]]:
    """Task number -> ``[heading index, end index]`` of its section, every task in one pass.

    The same rules as ``_section``: the first ``##``-or-deeper heading with the number wins,
    and its section ends at the next heading of the same or a higher level.
    """
    found: dict[int, list[int]] = {}
    #: sections still open, their levels strictly increasing from bottom to top
    open_: list[tuple[list[int], int]] = []
    for index, depth, number in _headings(lines):
        while open_ and open_[-1][1] >= depth:
            open_.pop()[0][1] = index
        if number is not None and depth >= 2 and number not in found:
            span = [index, len(lines)]
            found[number] = span
            open_.append((span, depth))
    return found


def _field(line: str) -> re.Match[str] | None:
    return _FIELD.match(line.rstrip("\r"))


class _Section:
    """The lines of one task's section, edited in place."""

    def __init__(
        self, lines: list[str], start: int, end: int, cr: str, *, at_eof: bool = True
    ) -> None:
        self.lines = lines
        self.start = start
        self.end = end
        self.cr = cr
        #: the last line of ``lines`` is the file's last line (``lines`` may be one chunk)
        self.at_eof = at_eof
        #: where ``_insert`` put a line, if it did
        self.inserted: int | None = None
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
        if self.at_eof and after == len(self.lines) - 1:
            # The file ends on that line without a newline: the new line becomes the last one.
            self.lines[after] += self.cr
        else:
            new_line += self.cr
        self.lines.insert(after + 1, new_line)
        self.fields = {k: i + 1 if i > after else i for k, i in self.fields.items()}
        self.fields[label.lower()] = after + 1
        self.end += 1
        self.inserted = after + 1


def _edit_section(section: _Section, edit: TodoEdit) -> list[int]:
    """Apply ``edit`` to ``section``; the indexes where lines were inserted, in order."""
    inserted: list[int] = []

    def put(label: str, value: str) -> None:
        section.inserted = None
        section.set(label, value)
        if section.inserted is not None:
            inserted.append(section.inserted)

    if edit.marker is not None:
        marker = f"[{edit.marker}]"
        current = section.value("Status")
        old = _MARKER.search(current) if current is not None else None
        if current is None or not current.strip():
            put("Status", marker)
        elif old is None:
            put("Status", f"{marker} {current}")
        else:
            put("Status", current[: old.start()] + marker + current[old.end() :])
    values = dict(edit.links)
    if edit.completed is not None:
        values["Completed"] = edit.completed
    for label in sorted(values, key=lambda name: (name not in _LINK_ORDER, _order(name))):
        current = section.value(label)
        if current is None or not _already_linked(current, values[label]):
            put(label, values[label])
    return inserted


def apply_todo_edit(text: str, edit: TodoEdit) -> str | None:
    """``text`` with ``edit`` applied to its task's section; None when it has no section."""
    new, missing = apply_todo_edits(text, [edit])
    return None if missing else new


def _edit_values(edit: TodoEdit) -> list[str]:
    values = [*edit.links.values()]
    if edit.marker is not None:
        values.append(edit.marker)
    if edit.completed is not None:
        values.append(edit.completed)
    return values


def _apply_one_by_one(text: str, edits: Sequence[TodoEdit]) -> tuple[str, list[int]]:
    """The slow path: find and edit each task's section again after every edit."""
    missing: list[int] = []
    for edit in edits:
        lines = text.split("\n")
        found = _section(lines, edit.task)
        if found is None:
            missing.append(edit.task)
            continue
        _edit_section(_Section(lines, *found, cr="\r" if "\r\n" in text else ""), edit)
        text = "\n".join(lines)
    return text, missing


def apply_todo_edits(text: str, edits: Sequence[TodoEdit]) -> tuple[str, list[int]]:
    """``text`` with every edit applied in order, and the tasks of the edits that found no
    section (one entry per such edit, in order; those edits are skipped).

    The result is byte for byte what applying the edits one after the other with
    ``apply_todo_edit`` gives, in time linear in the file: edits only ever change or add
    field lines, never headings or fences, so the sections found once stay the sections.
    """
    if any("\n" in value or "\r" in value for edit in edits for value in _edit_values(edit)):
        # A value that brings a line break could add headings or change the line endings.
        return _apply_one_by_one(text, edits)
    lines = text.split("\n")
    spans = _index(lines)
    cr = "\r" if "\r\n" in text else ""
    missing: list[int] = []
    by_task: dict[int, list[TodoEdit]] = {}
    for edit in edits:
        if edit.task in spans:
            by_task.setdefault(edit.task, []).append(edit)
        else:
            missing.append(edit.task)
    if not by_task:
        return text, missing
    # Sections nest or are disjoint. Each outermost edited section is cut out as a chunk and
    # edited on its own, so an inserted line shifts only the sections inside its chunk.
    order = sorted(by_task, key=lambda task: (spans[task][0], -spans[task][1]))
    chunks: list[list[int]] = []  # tasks per chunk, outermost first
    for task in order:
        if chunks and spans[task][0] < spans[chunks[-1][0]][1]:
            chunks[-1].append(task)
        else:
            chunks.append([task])
    parts: list[str] = []
    done = 0
    for tasks in chunks:
        base, stop = spans[tasks[0]]
        chunk = lines[base:stop]
        at_eof = stop == len(lines)
        if len(tasks) == 1:
            for edit in by_task[tasks[0]]:
                section = _Section(chunk, 0, len(chunk), cr, at_eof=at_eof)
                _edit_section(section, edit)
        else:
            _edit_nested(chunk, base, tasks, spans, edits, cr, at_eof=at_eof)
        parts.append("\n".join(lines[done:base]) + "\n" if base > done else "")
        parts.append("\n".join(chunk))
        if not at_eof:
            parts.append("\n")
        done = stop
    if done < len(lines):
        parts.append("\n".join(lines[done:]))
    return "".join(parts), missing


def _edit_nested(
    chunk: list[str],
    base: int,
    tasks: list[int],
    spans: dict[int, list[int]],
    edits: Sequence[TodoEdit],
    cr: str,
    *,
    at_eof: bool,
) -> None:
    """Edits to sections nested in one another, applied in their original order.

    An outer section's fields may be lines of an inner one, so the order matters here; each
    inserted line moves every heading (and section end) at or after it down by one.
    """
    local = {task: [spans[task][0] - base, spans[task][1] - base] for task in tasks}
    for edit in edits:
        span = local.get(edit.task)
        if span is None:
            continue
        section = _Section(chunk, span[0], span[1], cr, at_eof=at_eof)
        for at in _edit_section(section, edit):
            for other in local.values():
                other[0] += other[0] >= at
                other[1] += other[1] >= at


def _order(label: str) -> int:
    return _LINK_ORDER.index(label) if label in _LINK_ORDER else len(_LINK_ORDER)


def _already_linked(current: str, link: str) -> bool:
    """The line already links this target (it may list several reports): leave it as it is."""
    target = re.search(r"\]\((.*)\)$", link)
    return current.strip() == link or (target is not None and f"({target.group(1)})" in current)
