"""TODO.md edits: one task's Status, link and Completed lines, every other byte kept.

Links accumulate: a new artifact is added to the label line, sub-list or Artifacts list the
section already has, in that form (``tests/postflight/test_todo_forms.py`` holds an example of
each), unless the section links its path already, in any form. Nothing is ever removed.

Where a task's section is and which paths its links stand for is read by ``todo_sections``;
this module edits the section's lines.

``apply_todo_edits`` applies a whole group commit's edits in one pass: the file is split
once, every task section is indexed once, and each edit works on its own section's lines,
so 1,000 edits to a 1,000-task TODO.md cost about as much as reading it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from postflightd.inert import CONTROL_OR_LINE_SEPARATOR
from postflightd.models.todo_link import MAX_LINK_CHARS, markdown_link
from postflightd.postflight.todo_sections import (
    PLAIN_PATH,
    LinkPaths,
    WrittenLink,
    find_section,
    links_in,
    norm_path,
    section_index,
)
from postflightd.postflight.transform import TodoEdit, TodoLink

#: ``- **Label**: value`` or ``* **Label:** value``; groups: prefix, label, separator, space, value
_FIELD: Final = re.compile(
    r"^([ \t]*[-*+][ \t]+\*\*)([A-Za-z][A-Za-z ]*?)(\*\*:|:\*\*)([ \t]*)(.*)$"
)
_MARKER: Final = re.compile(r"\[[^\[\]]*\]")
_BLANKS: Final = (" ", "\t")

#: Where new lines go, in this order, and which existing lines they follow.
_LINK_ORDER: Final = ("Research", "Plan", "Summary", "Completed")

#: Link labels real task lists use (lower case, single spaces) -> the label they stand for.
#: ``Artifacts`` is one list for every type (the "artifacts list" form of real task lists).
_LINK_KINDS: Final[Mapping[str, str]] = {
    "research": "Research",
    "research report": "Research",
    "research reports": "Research",
    "report": "Research",
    "reports": "Research",
    "plan": "Plan",
    "plans": "Plan",
    "implementation plan": "Plan",
    "implementation plans": "Plan",
    "summary": "Summary",
    "summaries": "Summary",
    "implementation summary": "Summary",
    "implementation summaries": "Summary",
    "artifacts": "Artifacts",
    "artifact": "Artifacts",
}
_ANCHORS: Final = frozenset({"status", "language", "completed", *_LINK_KINDS})

_ITEM: Final = re.compile(r"^([ \t]+[-*+][ \t]+)")
#: What separates an item's link from its description (form A: `` — summary``).
_SUFFIX: Final = re.compile(r"^([ \t]+[\u2014\u2013-][ \t]+)\S")
#: A value that stands for "no link yet" and may be replaced by the first link.
_PLACEHOLDERS: Final = frozenset(
    {"", "-", "\u2014", "none", "(none)", "none yet", "n/a", "na", "tbd", "todo", "pending"}
)
#: Longest artifact summary copied after a sub-list item's link.
_MAX_SUMMARY: Final = 200


def _field(line: str) -> re.Match[str] | None:
    return _FIELD.match(line.rstrip("\r"))


def _inline(value: str) -> str:
    """``value`` with every control character and line separator made a space: nothing an
    edit writes can start a line (a heading, a fence) or change the line endings."""
    return CONTROL_OR_LINE_SEPARATOR.sub(" ", value)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


@dataclass(slots=True)
class _LinkField:
    """A link label line of a section and the block of lines below it (its sub-list)."""

    kind: str  # "Research", "Plan", "Summary" or "Artifacts"
    line: int
    #: the last line of the block (the label line itself when it has no sub-list)
    last: int
    #: the block's list items: line index and bullet (``"  - "``)
    items: list[tuple[int, str]]


def _render(path: str, style: str) -> str:
    """``path`` as a link in ``style``; a Markdown link when that style could not be read back
    as this path (a bare ``[a b.md]`` is text, not a link), so a second run finds it linked."""
    if style == "bare":
        bare = "[" + re.sub(r"([\\\[\]])", r"\\\1", path) + "]"
        if [(w.target, w.style) for w in links_in(bare)] == [(path, "bare")]:
            return bare
    elif style == "plain" and PLAIN_PATH.fullmatch(path):
        return path
    return markdown_link(path)


def _safe(link: TodoLink) -> bool:
    """Defence in depth (``rules.metadata`` refuses such paths as PF501): a path that could
    break the line or the link is never written."""
    return (
        bool(link.path)
        and not CONTROL_OR_LINE_SEPARATOR.search(link.path)
        and len(markdown_link(link.path)) <= MAX_LINK_CHARS
    )


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
        #: where lines were inserted, in order (each index as of its insertion)
        self.inserted: list[int] = []
        #: lower-case label (single spaces) -> index of its first field line in the section
        self.fields: dict[str, int] = {}
        #: field line index -> index of the last line of its block
        self.blocks: dict[int, int] = {}
        self._link_fields: list[_LinkField] = []
        self._scan()

    def _scan(self) -> None:
        """Index the section's field lines, their blocks and its link fields (again after an
        inserted line: a section is a handful of lines)."""
        self.fields = {}
        self.blocks = {}
        self._link_fields = []
        lines, end = self.lines, self.end
        index = self.start + 1
        while index < end:
            line = lines[index]
            # Cheap test first: every field line holds `**`.
            match = _field(line) if "**" in line else None
            if match is None:
                index += 1
                continue
            label = " ".join(match.group(2).lower().split())
            self.fields.setdefault(label, index)
            # The block: the lines below, indented deeper, up to a blank or shallower line.
            depth = _indent(line) if line[:1] in _BLANKS else 0
            last = index
            while last + 1 < end:
                below = lines[last + 1]
                # An unindented line (most of them) ends any block without further ado.
                if below[:1] not in _BLANKS or not below.strip() or _indent(below) <= depth:
                    break
                if _field(below) is not None:
                    break
                last += 1
            self.blocks[index] = last
            kind = _LINK_KINDS.get(label)
            if kind is not None:
                items = [
                    (i, bullet.group(1))
                    for i in range(index + 1, last + 1)
                    if (bullet := _ITEM.match(lines[i])) is not None
                ]
                self._link_fields.append(_LinkField(kind, index, last, items))
            index = last + 1

    def link_fields(self) -> list[_LinkField]:
        return self._link_fields

    def written_links(self) -> Iterator[WrittenLink]:
        """Every link of the link fields (label lines and their sub-lists), in order."""
        for field in self.link_fields():
            for index in range(field.line, field.last + 1):
                line = self.lines[index].rstrip("\r")
                text = _field_value(line) if index == field.line else _item_text(line)
                yield from links_in(text)

    def value(self, label: str) -> str | None:
        index = self.fields.get(label.lower())
        match = _field(self.lines[index]) if index is not None else None
        return match.group(5) if match is not None else None

    def set(self, label: str, value: str) -> None:
        """Replace the value of the label's line, or insert the line when there is none."""
        index = self.fields.get(label.lower())
        if index is None:
            self._insert_field(label, value)
        else:
            self._set_line(index, value)

    def _set_line(self, index: int, value: str) -> None:
        """Replace the value of the field line at ``index`` (one ``_scan`` found)."""
        line = self.lines[index]
        match = _field(line)
        if match is None:
            # Never from a line _scan indexed: a wrong index must fail, not edit another line.
            raise ValueError(f"line {index + 1} of the section is not a field line")
        ending = "\r" if line.endswith("\r") else ""
        prefix, name, separator, space = match.group(1, 2, 3, 4)
        self.lines[index] = f"{prefix}{name}{separator}{space or ' '}{value}{ending}"

    def _insert_field(self, label: str, value: str) -> None:
        """Insert ``- **label**: value`` after the Status/Language/link lines (and their
        sub-lists)."""
        anchors = [index for key, index in self.fields.items() if key in _ANCHORS]
        after = max(anchors or self.fields.values() or [self.start])
        model = _field(self.lines[after])
        prefix, separator = ("- **", "**:") if model is None else model.group(1, 3)
        line = f"{prefix}{_inline(label)}{separator} {value}"
        self._insert_line(self.blocks.get(after, after) + 1, line)

    def _insert_line(self, at: int, text: str) -> None:
        """Insert ``text`` as a new line before line ``at``."""
        if self.at_eof and at == len(self.lines):
            # The file ends on the line before without a newline: the new line becomes the last.
            self.lines[at - 1] += self.cr
        else:
            text += self.cr
        self.lines.insert(at, text)
        self.end += 1
        self.inserted.append(at)
        self._scan()

    def add_links(self, links: Sequence[TodoLink], paths: LinkPaths) -> None:
        """Add every link not yet in the section's link fields, in the form they use."""
        linked: set[str] = set()
        last_written: WrittenLink | None = None
        for written in self.written_links():
            linked |= paths.same(written.target)
            last_written = written
        for link in links:
            path = norm_path(link.path)
            if not _safe(link) or path in linked:
                continue
            self._add_link(link, path, paths, last_written)
            linked.add(path)

    def _add_link(
        self, link: TodoLink, path: str, paths: LinkPaths, default: WrittenLink | None
    ) -> None:
        fields = self.link_fields()
        field = next((f for f in fields if f.kind == link.label), None)
        if field is None:
            field = next((f for f in fields if f.kind == "Artifacts"), None)
        if field is None:
            style = default.style if default is not None and default.style != "plain" else "link"
            form = paths.form(default.target) if default is not None else "root"
            self._insert_field(link.label, _render(paths.written(path, form), style))
            return
        if field.items:
            self._append_item(field, link, path, paths)
            return
        line = self.lines[field.line].rstrip("\r")
        value = _field_value(line)
        on_line = links_in(value)
        if not on_line:
            form = paths.form(default.target) if default is not None else "root"
            new = _render(paths.written(path, form), "link")
            if value.strip().lower() in _PLACEHOLDERS:
                self._set_line(field.line, new)
            else:
                self._set_line(field.line, f"{value.rstrip()}, {new}")
            return
        model = on_line[-1]
        new = _render(paths.written(path, paths.form(model.target)), model.style)
        self._set_line(field.line, f"{value[: model.end]}, {new}{value[model.end :]}")

    def _append_item(self, field: _LinkField, link: TodoLink, path: str, paths: LinkPaths) -> None:
        """A new item after the block's last line: indented and bulleted like the last item,
        its link in the form and style of the first one (the list's own; later items may be
        another task's artifacts), with a `` — summary`` when the items have one."""
        texts: list[str] = []
        for index, _ in field.items:
            line = self.lines[index].rstrip("\r")
            texts.append(line[_item_start(line) :])
        bullet = field.items[-1][1]
        first = next((written[0] for text in texts if (written := links_in(text))), None)
        form = paths.form(first.target) if first is not None else "root"
        style = first.style if first is not None else "link"
        item = bullet + _render(paths.written(path, form), style)
        summary = " ".join(_inline(link.summary or "").split())
        separator = next((s for text in texts if (s := _suffix(text)) is not None), None)
        if separator is not None and summary:
            if len(summary) > _MAX_SUMMARY:
                summary = summary[: _MAX_SUMMARY - 1].rstrip() + "\u2026"
            item += separator + re.sub(r"([\\`*_\[\]<>])", r"\\\1", summary)
        self._insert_line(field.last + 1, item)


def _item_start(line: str) -> int:
    bullet = _ITEM.match(line)
    return bullet.end() if bullet is not None else 0


def _suffix(text: str) -> str | None:
    """The separator between an item's link and its description (`` — ``), if it has one."""
    written = links_in(text)
    match = _SUFFIX.match(text[written[0].end :]) if written else None
    return match.group(1) if match is not None else None


def _field_value(line: str) -> str:
    match = _field(line)
    return match.group(5) if match is not None else ""


def _item_text(line: str) -> str:
    return line[_item_start(line) :].strip()


def _edit_section(section: _Section, edit: TodoEdit) -> list[int]:
    """Apply ``edit`` to ``section``; the indexes where lines were inserted, in order."""
    section.inserted = []
    if edit.marker is not None:
        marker = f"[{_inline(edit.marker)}]"
        current = section.value("Status")
        old = _MARKER.search(current) if current is not None else None
        if current is None or not current.strip():
            section.set("Status", marker)
        elif old is None:
            section.set("Status", f"{marker} {current}")
        else:
            section.set("Status", current[: old.start()] + marker + current[old.end() :])
    # Research, then Plan, then Summary: new label lines come in the order a task's work
    # produces them.
    links = sorted(edit.links, key=lambda link: _order(link.label))
    section.add_links(links, LinkPaths(edit.task_dir))
    if edit.completed is not None:
        completed = _inline(edit.completed)
        current = section.value("Completed")
        if current is None or current.strip() != completed:
            section.set("Completed", completed)
    return list(section.inserted)


def _order(label: str) -> int:
    return _LINK_ORDER.index(label) if label in _LINK_ORDER else len(_LINK_ORDER)


def apply_todo_edit(text: str, edit: TodoEdit) -> str | None:
    """``text`` with ``edit`` applied to its task's section; None when it has no section."""
    new, missing = apply_todo_edits(text, [edit])
    return None if missing else new


def _apply_one_by_one(text: str, edits: Sequence[TodoEdit]) -> tuple[str, list[int]]:
    """The slow path: find and edit each task's section again after every edit."""
    missing: list[int] = []
    for edit in edits:
        lines = text.split("\n")
        found = find_section(lines, edit.task)
        if found is None:
            missing.append(edit.task)
            continue
        start, _, own = found
        _edit_section(_Section(lines, start, own, cr="\r" if "\r\n" in text else ""), edit)
        text = "\n".join(lines)
    return text, missing


def apply_todo_edits(text: str, edits: Sequence[TodoEdit]) -> tuple[str, list[int]]:
    """``text`` with every edit applied in order, and the tasks of the edits that found no
    section (one entry per such edit, in order; those edits are skipped).

    The result is byte for byte what applying the edits one after the other with
    ``apply_todo_edit`` gives, in time linear in the file: edits only ever change or add
    field lines, never headings or fences, so the sections found once stay the sections.
    """
    lines = text.split("\n")
    spans = section_index(lines)
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
        base, stop, own = spans[tasks[0]]
        chunk = lines[base:stop]
        at_eof = stop == len(lines)
        if len(tasks) == 1:
            # The section's own lines end at a nested task heading; each inserted line (always
            # among them) moves that end down by one.
            own_end = own - base
            for edit in by_task[tasks[0]]:
                section = _Section(chunk, 0, own_end, cr, at_eof=at_eof)
                own_end += len(_edit_section(section, edit))
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

    Each edit works on its section's own lines (up to the first nested task heading); each
    inserted line moves every heading, section end and own end at or after it down by one.
    """
    local = {task: [bound - base for bound in spans[task]] for task in tasks}
    for edit in edits:
        span = local.get(edit.task)
        if span is None:
            continue
        section = _Section(chunk, span[0], span[2], cr, at_eof=at_eof)
        for at in _edit_section(section, edit):
            for other in local.values():
                for i in range(3):
                    other[i] += other[i] >= at


def section_links(text: str, task: int, task_dir: str | None = None) -> list[set[str]] | None:
    """The links of the task's link fields (label lines and their sub-lists), in order: for
    each, the root-relative paths it may stand for. None when TODO.md has no such section."""
    lines = text.split("\n")
    found = find_section(lines, task)
    if found is None:
        return None
    start, _, own = found
    section = _Section(lines, start, own, cr="")
    paths = LinkPaths(task_dir)
    return [paths.same(written.target) for written in section.written_links()]
